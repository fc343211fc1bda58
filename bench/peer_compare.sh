#!/usr/bin/env bash
# Handoff beside llama.cpp on the same weights, in one run (docs/performance.md, "Beside
# llama.cpp"). Everything llama.cpp needs is built or made outside the repository, in PEER.
#
#   bench/peer_compare.sh                 # build (first time), speed table, logits cross-check
#   MODE=speed bench/peer_compare.sh      # only the speed table
#   MODE=check bench/peer_compare.sh      # only the logits cross-check
#   ROUNDS=5 WEIGHTS="bf16 q8_0" MODEL=/path/to/checkpoint bench/peer_compare.sh
#   MODE=table OUT=DIR MODEL=... bench/peer_compare.sh   # re-print the table of a run in DIR
#
# Steps:
#  1. llama.cpp: the source bundled in the npm package node-llama-cpp (NODE_LLAMA_CPP, fetched
#     with `npm pack`) is cloned and built into PEER/llama.cpp (llama-bench, llama-quantize,
#     libllama; ~15 min on 2 cores, once), then bench/peer/llama_logits.cpp against it.
#  2. speed (MODE speed|all): MODEL (a bf16 deepseek_v3 / deepseek_v32 checkpoint; default
#     models/bench-moe, made by make-model like bench/bench_moe.sh) is exported by
#     `handoff export-gguf` at bf16 and f32 (exact widening), and llama-quantize makes a Q8_0
#     file from the f32 one. ROUNDS rounds, each: stream_read (read bandwidth, 1 and 2 threads,
#     the faster of plain loads and loads behind non-temporal prefetches),
#     then per weight type, each engine's runs, every run between two 2-thread stream_reads,
#     llama-bench (-t THREADS -p PROMPT_LEN -n DECODE -d 0,PROMPT_LEN
#     -r 1) and `handoff bench offline` (one request, PROMPT_LEN random ids in, DECODE out;
#     prefill = PROMPT_LEN / TTFT, decode = 1 / TPOT; and one of a single id in, DECODE out),
#     the engine order alternating per round. Decode is measured at two depths, for both
#     engines: after the prompt (cache positions PROMPT_LEN.., a served request's decode) and
#     from an empty cache (llama-bench's plain tg, which does not follow its pp test). Beside
#     Q8_0 Handoff runs `--quantize fp8` (the published FP8 block format; its output head stays
#     bf16, so its roofline is not given). bf16 and fp8 also run with `--activations bf16`
#     (rows "-bf16act": prefill products on bf16-rounded inputs). The table: medians over
#     rounds; % of roofline = the median over runs of decode tok/s x active weight bytes per
#     token / the mean of the bandwidths read just before and just after that run (the guest's
#     bandwidth moves within a round, by up to 8 GB/s across one run). Active bytes are the GGUF's: everything but the embedding table, which is one row
#     per token, and routed experts counted n_used / n_expert; cache reads are not in it, so
#     depth 0 is the weight stream.
#  3. check (MODE check|all): f32 bench-moe checkpoints of deepseek_v3 and deepseek_v32 (made by
#     make-model, seed 1), plus the deepseek_v32 one with index_topk 8 (its DSA selection is
#     sparse within the 24 positions), exported with export-gguf. A fixed 16-token prompt:
#     `handoff generate --dtype f32 --max-new-tokens 8 --dump` gives Handoff's logits and greedy
#     tokens; llama_logits runs llama.cpp on the GGUF teacher-forced on those tokens (F32 KV cache,
#     no flash attention). Pass: every logit of the prefill's last position and of the 8 decode
#     steps within CHECK_TOL (1e-4) and the greedy tokens equal. Also: llama.cpp's tokenizer on
#     the exported demo model (models/default, DeepSeek-V3's tokenizer) against `handoff tokenize`.
# Results (logs, runs.tsv, table.txt, check.txt) go to OUT. Exit status 1 when the check fails.
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
PEER=${PEER:-$HOME/.cache/handoff-peer}
NODE_LLAMA_CPP=${NODE_LLAMA_CPP:-3.22.1}   # bundles llama.cpp 0.5.0-dev
BUILD=${BUILD:-build}
HANDOFF=${HANDOFF:-$BUILD/bin/handoff}
STREAM_READ=${STREAM_READ:-$BUILD/bin/stream_read}
MODE=${MODE:-all}
MODEL=${MODEL:-models/bench-moe}
DEMO_MODEL=${DEMO_MODEL:-models/default}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-2}
PROMPT_LEN=${PROMPT_LEN:-512}
DECODE=${DECODE:-128}
WEIGHTS=${WEIGHTS:-"bf16 f32 q8_0"}
CHECK_TOL=${CHECK_TOL:-1e-4}
CHECK_PROMPT=${CHECK_PROMPT:-"17,4242,99,1234,5,31000,777,2048,12,9999,300,65,18000,7,25000,1500"}
CHECK_STEPS=${CHECK_STEPS:-8}
OUT=${OUT:-$PEER/results/$(date +%Y%m%d-%H%M%S)}
LLAMA=$PEER/llama.cpp
# llama.cpp's native build on an AMX CPU puts Q8_0 weights in its AMX buffer type, and then aborts
# on deepseek32 (ggml-backend.cpp: GGML_ASSERT(*cur_backend_id != -1), also with
# `-ot .*=CPU`), so there it is built for the CPU's AVX-512 features without AMX, in its own
# folder (measured 2026-12-02; llama.cpp de3ff81).
# A native build is tuned to (and may use instructions of) the CPU it was built on, and these
# machines change CPU between sessions, so each CPU model gets its own build folder.
CPU_TAG=$(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //; s/([^)]*)//g; s/[^A-Za-z0-9]\+/-/g; s/^-//; s/-$//')
LLAMA_FLAGS=(-DGGML_NATIVE=ON)
LLAMA_BUILD=$LLAMA/build-native-$CPU_TAG
if grep -qw amx_int8 /proc/cpuinfo; then
  LLAMA_FLAGS=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
    -DGGML_BMI2=ON -DGGML_AVX512=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF)
  for f in vbmi vnni bf16; do
    grep -qw "avx512_$f\|avx512$f" /proc/cpuinfo && LLAMA_FLAGS+=("-DGGML_AVX512_${f^^}=ON")
  done
  LLAMA_BUILD=$LLAMA/build-noamx-$CPU_TAG
fi
NICE=${NICE:-nice -n 19}

mkdir -p "$OUT" "$PEER/models"
log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT/log.txt"; }
for b in "$HANDOFF" "$STREAM_READ"; do
  [[ -x $b ]] || { echo "missing $b: build Handoff first (see README)" >&2; exit 1; }
done

# ---- 1. llama.cpp from the npm package's bundle ----
build_llama() {
  if [[ ! -d $LLAMA/.git ]]; then
    log "fetching node-llama-cpp@$NODE_LLAMA_CPP with npm"
    rm -rf "$PEER/npm" && mkdir -p "$PEER/npm"
    (cd "$PEER/npm" && npm pack --silent "node-llama-cpp@$NODE_LLAMA_CPP" > /dev/null &&
      tar xzf node-llama-cpp-*.tgz)
    git clone -q "$PEER/npm/package/llama/gitRelease.bundle" "$LLAMA"
  fi
  local need=$LLAMA_BUILD/bin/libllama.so
  [[ $MODE == check ]] || need="$need $LLAMA_BUILD/bin/llama-bench $LLAMA_BUILD/bin/llama-quantize"
  local missing=0 f
  for f in $need; do [[ -e $f ]] || missing=1; done
  if ((missing)); then
    log "building llama.cpp $(git -C "$LLAMA" log -1 --format=%h) into $LLAMA_BUILD (long, once)"
    $NICE cmake -S "$LLAMA" -B "$LLAMA_BUILD" -DCMAKE_BUILD_TYPE=Release "${LLAMA_FLAGS[@]}" \
      -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
      -DLLAMA_BUILD_SERVER=OFF > "$OUT/llama-cmake.log"
    $NICE cmake --build "$LLAMA_BUILD" -j "$(nproc)" --target llama-bench llama-quantize llama \
      > "$OUT/llama-build.log"
  fi
  local drv=$PEER/llama_logits-${LLAMA_BUILD##*/} src=$ROOT/bench/peer/llama_logits.cpp
  if [[ ! -x $drv || $src -nt $drv ]]; then
    $NICE g++ -O2 -std=c++17 "$src" -I"$LLAMA/include" -I"$LLAMA/ggml/include" \
      -L"$LLAMA_BUILD/bin" -lllama -Wl,-rpath,"$LLAMA_BUILD/bin" -o "$drv"
  fi
}

# export_gguf CHECKPOINT FILE [flags]: `handoff export-gguf`
# (skipped when FILE is newer than the handoff binary and the checkpoint's config and files)
export_gguf() {
  local dir=$1 file=$2; shift 2
  if [[ -f $file && $file -nt $HANDOFF && $file -nt $dir/config.json ]] &&
    [[ -z $(find -L "$dir" -name '*.safetensors' -newer "$file") ]]; then
    log "export-gguf: $file is up to date"
    return
  fi
  log "export-gguf $dir -> $file $*"
  "$HANDOFF" export-gguf --model "$dir" --out "$file" "$@" >> "$OUT/export.log"
}

median() { sort -g | awk '{v[NR] = $1} END {if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; else print "NA"}'; }

# ---- 2. speed ----
gguf_paths() {  # the exported files of MODEL, by weight type
  local name
  name=$(basename "$(cd "$MODEL" && pwd)")
  declare -gA GGUF
  GGUF[bf16]=$PEER/models/$name-bf16.gguf
  GGUF[f32]=$PEER/models/$name-f32.gguf
  GGUF[q8_0]=$PEER/models/$name-q8_0.gguf
}

# The 2-thread read bandwidth now, GB/s (stream_read, ~12 s): the faster of plain loads and
# loads behind non-temporal prefetches (what the AVX-512 decode kernels stream single-pass
# weights with on AMD), so that neither way of reading is set against a roofline it beat.
bandwidth_now() {
  "$STREAM_READ" --benchmark_filter='BM_StreamRead(NonTemporal)?/2/' --benchmark_format=json \
    2> /dev/null | python3 -c 'import json, sys
b = [b["GB/s"] for b in json.load(sys.stdin)["benchmarks"] if b.get("run_type") == "iteration"]
print("%.3f" % (max(b) / 1e9) if b else "NA")'
}

# bandwidth_around BEFORE: reads the bandwidth after a run; prints the mean of BEFORE and that
# reading (the run's bandwidth), then the reading itself (the next run's BEFORE).
bandwidth_around() {
  local after
  after=$(bandwidth_now)
  python3 -c 'import sys
a, b = sys.argv[1:]
print("%.3f %s" % ((float(a) + float(b)) / 2, b) if "NA" not in (a, b) else "NA " + b)' "$1" "$after"
}

run_speed() {
  if [[ ! -f $MODEL/config.json ]]; then
    log "making $MODEL (bench-moe, deepseek_v3, bf16, seed 1)"
    "$HANDOFF" make-model --family deepseek_v3 --preset bench-moe --seed 1 --dtype bf16 \
      --out "$MODEL" >> "$OUT/log.txt"
  fi
  gguf_paths
  export_gguf "$MODEL" "${GGUF[bf16]}" --dtype bf16
  if [[ " $WEIGHTS " == *" f32 "* || " $WEIGHTS " == *" q8_0 "* ]]; then
    export_gguf "$MODEL" "${GGUF[f32]}" --dtype f32
  fi
  if [[ " $WEIGHTS " == *" q8_0 "* && ! ${GGUF[q8_0]} -nt ${GGUF[f32]} ]]; then
    log "llama-quantize -> ${GGUF[q8_0]}"
    "$LLAMA_BUILD/bin/llama-quantize" "${GGUF[f32]}" "${GGUF[q8_0]}" Q8_0 > "$OUT/quantize.log" 2>&1
  fi
  printf 'round\tengine\tweights\tprefill_tps\tdecode_tps\tdecode0_tps\tload1\tbw2\tbw2_d0\n' \
    > "$OUT/runs.tsv"
  printf 'round\tthreads\tGBps\n' > "$OUT/bandwidth.tsv"
  local prompt_file=$OUT/prompt.txt
  for ((r = 1; r <= ROUNDS; ++r)); do
    "$STREAM_READ" --benchmark_repetitions=1 --benchmark_format=json > "$OUT/stream_r$r.json"
    python3 - "$OUT/stream_r$r.json" "$r" >> "$OUT/bandwidth.tsv" << 'EOF'
import json, sys
best = {}  # threads -> the faster of plain and non-temporal reads
for b in json.load(open(sys.argv[1]))["benchmarks"]:
    if b.get("run_type") == "iteration":
        t = int(b["threads"])
        best[t] = max(best.get(t, 0.0), b["GB/s"] / 1e9)
for t in sorted(best):
    print(f"{sys.argv[2]}\t{t}\t{best[t]:.3f}")
EOF
    log "round $r stream_read: $(awk -F'\t' -v r="$r" '$1 == r {printf "%s thr %s GB/s; ", $2, $3}' "$OUT/bandwidth.tsv")"
    # Every run sits between two readings (each reading is the next run's "before"), and is
    # set against their mean: the bandwidth moved by up to 8 GB/s across one ~20 s run.
    local bw
    bw=$(bandwidth_now)
    for w in $WEIGHTS; do
      local order="llama handoff"
      ((r % 2)) || order="handoff llama"
      for e in $order; do
        local l1 f p d run_bw run_bw0
        l1=$(cut -d' ' -f1 /proc/loadavg)
        if [[ $e == llama ]]; then
          f=$OUT/llama_${w}_r$r.json
          # -d 0,P: pp and tg from an empty cache, and again after P cached tokens (its
          # pp at depth P is run too and not used).
          "$LLAMA_BUILD/bin/llama-bench" -m "${GGUF[$w]}" -t "$THREADS" -p "$PROMPT_LEN" \
            -n "$DECODE" -d "0,$PROMPT_LEN" -r 1 -o json > "$f" 2> "$f.err"
          read -r p d d0 <<< "$(python3 - "$f" "$PROMPT_LEN" "$DECODE" << 'EOF'
import json, sys
runs = json.load(open(sys.argv[1])); n_p, n_d = int(sys.argv[2]), int(sys.argv[3])
def ts(prompt, gen, depth):
    x = [x["avg_ts"] for x in runs
         if (x["n_prompt"], x["n_gen"], x.get("n_depth", 0)) == (prompt, gen, depth)]
    return f"{x[0]:.2f}" if x else "NA"
print(ts(n_p, 0, 0), ts(0, n_d, n_p), ts(0, n_d, 0))
EOF
)"
          run_bw=$(bandwidth_around "$bw")
          bw=${run_bw#* }
          run_bw=${run_bw% *}
          printf '%s\tllama.cpp\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$w" "$p" "$d" "$d0" "$l1" \
            "$run_bw" "$run_bw" >> "$OUT/runs.tsv"
          log "round $r llama.cpp $w: prefill $p tok/s, decode $d tok/s after the prompt," \
            "$d0 from an empty cache (load $l1)"
        else
          # Beside llama.cpp's Q8_0: Handoff's 8-bit path, the published FP8 block format
          # (--quantize fp8 of the same bf16 checkpoint; the output head stays bf16). bf16 and
          # fp8 run twice: exact activations (the default) and --activations bf16 (prefill
          # products take bf16-rounded inputs, as llama.cpp's and GPU engines' do).
          local hw=$w flags=(--dtype "$w") acts=(exact)
          [[ $w != q8_0 ]] || { hw=fp8; flags=(--dtype bf16 --quantize fp8); }
          [[ $w == f32 ]] || acts=(exact bf16)
          local act label
          for act in "${acts[@]}"; do
            label=$hw
            local act_flags=()
            if [[ $act == bf16 ]]; then label=$hw-bf16act; act_flags=(--activations bf16); fi
            f=$OUT/handoff_${label}_r$r.txt
            "$HANDOFF" bench offline --model "$MODEL" "${flags[@]}" "${act_flags[@]}" \
              --threads "$THREADS" --concurrency 1 --num-prompts 1 --input-len "$PROMPT_LEN" \
              --output-len "$DECODE" --max-num-batched-tokens "$PROMPT_LEN" \
              --max-model-len $((PROMPT_LEN + DECODE)) \
              --kv-cache-tokens $((PROMPT_LEN + DECODE + 64)) > "$f" 2> "$f.err"
            run_bw=$(bandwidth_around "$bw")
            bw=${run_bw#* }
            run_bw=${run_bw% *}
            p=$(awk -v n="$PROMPT_LEN" '$1 == "TTFT" {printf "%.2f", n / ($3 / 1000)}' "$f")
            d=$(awk '$1 == "TPOT" {printf "%.2f", 1000 / $3}' "$f")
            # Decode from an (almost) empty cache, as llama-bench's tg: one id in. The
            # activations flag applies to prefill products only, so only exact runs it.
            local d0=NA
            run_bw0=NA
            if [[ $act == exact ]]; then
              "$HANDOFF" bench offline --model "$MODEL" "${flags[@]}" --threads "$THREADS" \
                --concurrency 1 --num-prompts 1 --input-len 1 --output-len "$DECODE" \
                --max-model-len $((1 + DECODE)) --kv-cache-tokens $((DECODE + 64)) \
                > "$f.depth0" 2> "$f.depth0.err"
              d0=$(awk '$1 == "TPOT" {printf "%.2f", 1000 / $3}' "$f.depth0")
              run_bw0=$(bandwidth_around "$bw")
              bw=${run_bw0#* }
              run_bw0=${run_bw0% *}
            fi
            printf '%s\tHandoff\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$label" "${p:-NA}" \
              "${d:-NA}" "${d0:-NA}" "$l1" "$run_bw" "$run_bw0" >> "$OUT/runs.tsv"
            log "round $r Handoff $label: prefill ${p:-NA} tok/s, decode ${d:-NA} tok/s after" \
              "the prompt, ${d0:-NA} from an empty cache (load $l1)"
          done
        fi
      done
    done
  done
  speed_table
}

# The table from OUT's runs.tsv and bandwidth.tsv (MODE=table re-prints it, e.g. for a run
# that was stopped after some rounds).
speed_table() {
  gguf_paths
  local bw1 bw2 rounds
  rounds=$(awk -F'\t' 'NR > 1 {print $1}' "$OUT/runs.tsv" | sort -u | wc -l)
  bw1=$(awk -F'\t' 'NR > 1 && $2 == 1 {print $3}' "$OUT/bandwidth.tsv" | median)
  bw2=$(awk -F'\t' 'NR > 1 && $2 == 2 {print $3}' "$OUT/bandwidth.tsv" | median)
  {
    local bwr
    bwr=$(awk -F'\t' 'NR == 1 {for (i = 1; i <= NF; ++i) if ($i == "bw2") c = i}
      NR > 1 && c && $c != "NA" {print $c}' "$OUT/runs.tsv" | sort -g |
      awk '{v[NR] = $1} END {if (NR) printf "%s-%s", v[1], v[NR]; else print "NA"}')
    echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores;" \
      "stream read (median of $rounds rounds): 1 thread $bw1 GB/s, 2 threads $bw2 GB/s;" \
      "2 threads around each engine run (mean of the readings before and after): $bwr GB/s"
    echo "model: $MODEL; $THREADS threads, batch 1, prefill $PROMPT_LEN, decode $DECODE;" \
      "medians of $rounds interleaved rounds; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    python3 - "$OUT/runs.tsv" "$bw2" "${GGUF[bf16]}" "${GGUF[f32]}" "${GGUF[q8_0]}" \
      "$PROMPT_LEN" << 'EOF'
import csv, os, statistics, struct, sys

def active_bytes(path):
    """Weight bytes one decode token reads, from a GGUF header: all tensors but the embedding
    table (one row) and the routed experts (n_used of n_expert)."""
    if path is None or not os.path.exists(path):
        return None
    with open(path, "rb") as f:
        def rd(fmt):
            return struct.unpack("<" + fmt, f.read(struct.calcsize("<" + fmt)))[0]
        def rstr():
            return f.read(rd("Q")).decode("utf-8", "replace")
        sizes = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q", 12: "d"}
        def value(t):
            if t == 8:
                return rstr()
            if t == 9:
                et, n = rd("I"), rd("Q")
                return [value(et) for _ in range(n)]
            return rd(sizes[t])
        assert f.read(4) == b"GGUF"
        rd("I"); nt = rd("Q"); nkv = rd("Q")
        kv = {}
        for _ in range(nkv):
            k = rstr(); kv[k] = value(rd("I"))
        arch = kv["general.architecture"]
        n_exp, n_used = kv[f"{arch}.expert_count"], kv[f"{arch}.expert_used_count"]
        # bytes per element (block types: Q8_0 = 34 bytes per 32)
        per = {0: 4.0, 1: 2.0, 30: 2.0, 8: 34 / 32}
        total = 0.0
        for _ in range(nt):
            name = rstr(); nd = rd("I"); ne = [rd("Q") for _ in range(nd)]; t = rd("I"); rd("Q")
            n = 1
            for d in ne:
                n *= d
            b = n * per[t]
            if "_exps." in name:
                b *= n_used / n_exp
            elif name == "token_embd.weight":
                b /= ne[-1]
            total += b
        return total

runs = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
bw = float(sys.argv[2]) if sys.argv[2] != "NA" else None
gguf = {"bf16": sys.argv[3], "f32": sys.argv[4], "q8_0": sys.argv[5]}
def med(xs):
    xs = [float(x) for x in xs if x not in ("NA", "")]
    return statistics.median(xs) if xs else None
rows = []
for key in dict.fromkeys((r["engine"], r["weights"]) for r in runs):
    rs = [r for r in runs if (r["engine"], r["weights"]) == key]
    p, d = med(r["prefill_tps"] for r in rs), med(r["decode_tps"] for r in rs)
    d0 = med(r.get("decode0_tps", "NA") for r in rs)
    a = active_bytes(gguf.get(key[1].split("-")[0]))
    roof = bw * 1e9 / a if bw and a else None
    def span(col):
        xs = [float(r[col]) for r in rs if r.get(col, "NA") not in ("NA", "", None)]
        return "–".join(f"{v:.0f}" for v in sorted({min(xs), max(xs)})) if xs else "NA"
    def pct(col, v):
        # Each run against the bandwidth around it (runs.tsv column bw2, or bw2_d0 for the
        # depth-0 run where there is one), the median of those shares; runs without that column:
        # the median against the rounds' median.
        if not a:
            return "NA"
        def run_bw(r):
            b = r.get("bw2_d0", "NA") if col == "decode0_tps" else "NA"
            return b if b not in ("NA", "", None) else r.get("bw2", "NA")
        shares = [float(r[col]) * a / (float(run_bw(r)) * 1e9) for r in rs
                  if r.get(col, "NA") not in ("NA", "", None)
                  and run_bw(r) not in ("NA", "", None)]
        if shares:
            return f"{100 * statistics.median(shares):.0f} %"
        return f"{100 * v / roof:.0f} %" if roof and v else "NA"
    rows.append([key[0], key[1].upper() if key[0] == "llama.cpp" else key[1],
                 f"{p:.1f}" if p else "NA", span("prefill_tps"),
                 f"{d:.1f}" if d else "NA", span("decode_tps"), pct("decode_tps", d),
                 f"{d0:.1f}" if d0 else "NA", span("decode0_tps"), pct("decode0_tps", d0),
                 f"{a / 1e6:.1f}" if a else "NA"])
hdr = ["engine", "weights", "prefill tok/s", "(range)", f"decode at depth {sys.argv[6]} tok/s",
       "(range)", "% of roofline", "decode at depth 0 tok/s", "(range)", "% of roofline",
       "active MB/token"]
print("| " + " | ".join(hdr) + " |")
print("|" + "|".join("---" for _ in hdr) + "|")
for r in rows:
    print("| " + " | ".join(r) + " |")
# Handoff over llama.cpp, medians against medians, each column at the same depth for both.
pairs = [("bf16", "bf16"), ("f32", "f32"), ("fp8", "q8_0")]
cols = [("prefill", "prefill_tps"), (f"decode at depth {sys.argv[6]}", "decode_tps"),
        ("decode at depth 0", "decode0_tps")]
print()
for h, l in pairs:
    hs = [r for r in runs if r["engine"] == "Handoff" and r["weights"] == h]
    ls = [r for r in runs if r["engine"] == "llama.cpp" and r["weights"] == l]
    if not hs or not ls:
        continue
    parts = []
    for name, col in cols:
        a, b = med(r.get(col, "NA") for r in hs), med(r.get(col, "NA") for r in ls)
        parts.append(f"{name} {a / b:.2f}x" if a and b else f"{name} NA")
    print(f"Handoff {h} / llama.cpp {l.upper()}: " + ", ".join(parts))
EOF
  } | tee "$OUT/table.txt"
}

# ---- 3. logits cross-check ----
compare_logits() {  # handoff dump, llama json -> one line; exit 1 on a failure
  python3 - "$1" "$2" "$CHECK_TOL" << 'EOF'
import json, sys
h = json.load(open(sys.argv[1]))["prompts"][0]
l = json.load(open(sys.argv[2]))
tol = float(sys.argv[3])
rows_h = [h["prefill_last_logits"]] + h["decode_logits"]
rows_l = [l["prefill_last_logits"]] + l["decode_logits"]
assert len(rows_h) == len(rows_l), (len(rows_h), len(rows_l))
worst = 0.0
for a, b in zip(rows_h, rows_l):
    assert len(a) == len(b), (len(a), len(b))
    worst = max(worst, max(abs(x - y) for x, y in zip(a, b)))
same = h["greedy_tokens"] == l["greedy_tokens"]
ok = worst <= tol and same
print(f"max |logit diff| {worst:.2e} over {len(rows_h)} x {len(rows_h[0])} logits; greedy tokens "
      f"{'identical' if same else 'DIFFER'} ({h['greedy_tokens']} vs {l['greedy_tokens']}): "
      f"{'PASS' if ok else 'FAIL'}")
sys.exit(0 if ok else 1)
EOF
}

run_check() {
  local m=$PEER/models fails=0
  declare -A FAM=([v3]=deepseek_v3 [v32]=deepseek_v32)
  for k in v3 v32; do
    local dir=$m/bench-moe-$k-f32
    if [[ ! -f $dir/config.json ]]; then
      log "making $dir (bench-moe, ${FAM[$k]}, f32, seed 1)"
      "$HANDOFF" make-model --family "${FAM[$k]}" --preset bench-moe --seed 1 --dtype f32 \
        --out "$dir" >> "$OUT/log.txt"
    fi
  done
  # the deepseek_v32 weights with index_topk 8: the same files, another config
  local sparse=$m/bench-moe-v32s-f32
  mkdir -p "$sparse"
  for f in "$m"/bench-moe-v32-f32/*.safetensors*; do ln -sf "$f" "$sparse/"; done
  python3 - "$m/bench-moe-v32-f32/config.json" "$sparse/config.json" << 'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["index_topk"] = 8
text = json.dumps(c, indent=2)
try:
    same = open(sys.argv[2]).read() == text
except OSError:
    same = False
if not same:  # rewritten only on a change, so the exported file stays up to date
    open(sys.argv[2], "w").write(text)
EOF
  : > "$OUT/check.txt"
  local n
  n=$(tr ',' '\n' <<< "$CHECK_PROMPT" | wc -l)
  echo "logits cross-check: f32 bench-moe weights, a $n-token prompt ($CHECK_PROMPT), $CHECK_STEPS" \
    "teacher-forced decode steps, tolerance $CHECK_TOL, $THREADS threads" | tee -a "$OUT/check.txt"
  for k in v3 v32 v32s; do
    local dir=$m/bench-moe-$k-f32 g=$m/bench-moe-$k-f32.gguf
    export_gguf "$dir" "$g" --dtype f32
    "$HANDOFF" generate --model "$dir" --dtype f32 --threads "$THREADS" \
      --prompt-ids "$CHECK_PROMPT" --max-new-tokens "$CHECK_STEPS" \
      --dump "$OUT/handoff_$k.json" > "$OUT/handoff_$k.txt" 2>&1
    local feed
    feed=$(python3 -c 'import json,sys; print(",".join(map(str, json.load(open(sys.argv[1]))["prompts"][0]["greedy_tokens"])))' "$OUT/handoff_$k.json")
    "$PEER/llama_logits-${LLAMA_BUILD##*/}" logits "$g" --prompt "$CHECK_PROMPT" --steps "$CHECK_STEPS" \
      --feed "$feed" --threads "$THREADS" > "$OUT/llama_$k.json" 2> "$OUT/llama_$k.err"
    local label=${FAM[${k%s}]}
    [[ $k != v32s ]] || label="deepseek_v32, index_topk 8"
    local line rc=0
    line=$(compare_logits "$OUT/handoff_$k.json" "$OUT/llama_$k.json") || rc=$?
    echo "  $label: $line" | tee -a "$OUT/check.txt"
    ((rc == 0)) || fails=$((fails + 1))
  done
  if [[ -f $DEMO_MODEL/tokenizer.json ]]; then
    local g=$m/$(basename "$DEMO_MODEL")-tok.gguf
    local text=$'Hello, world! \u4f60\u597d 12345 <\uff5cUser\uff5c>def f(x):\n  return x  # caf\u00e9'
    export_gguf "$DEMO_MODEL" "$g"
    local ours theirs
    ours=$(python3 -c 'import json,sys; print(json.dumps({"text": sys.argv[1]}))' "$text" |
      "$HANDOFF" tokenize --model "$DEMO_MODEL" 2> /dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["ids"])' || true)
    theirs=$("$PEER/llama_logits-${LLAMA_BUILD##*/}" tokenize "$g" "$text" 2> "$OUT/llama_tok.err" || true)
    if [[ -n $ours && "$(tr -d ' []\n' <<< "$ours")" == "$(tr -d ' []\n' <<< "$theirs")" ]]; then
      echo "  tokenizer ($DEMO_MODEL exported): llama.cpp and Handoff give the same ids: PASS" | tee -a "$OUT/check.txt"
    else
      echo "  tokenizer ($DEMO_MODEL exported): llama.cpp $theirs vs Handoff $ours: FAIL" | tee -a "$OUT/check.txt"
      fails=$((fails + 1))
    fi
  fi
  return $((fails > 0))
}

if [[ $MODE == table ]]; then
  speed_table
  exit 0
fi
{
  echo "peer_compare: $(date -u +%FT%TZ), handoff $(git -C "$ROOT" rev-parse --short HEAD 2> /dev/null || echo '?')"
  echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/header.txt"
build_llama
echo "llama.cpp: $(git -C "$LLAMA" log -1 --format=%h) (node-llama-cpp@$NODE_LLAMA_CPP), ${LLAMA_BUILD##*/}: ${LLAMA_FLAGS[*]}" | tee -a "$OUT/header.txt"
status=0
if [[ $MODE == check || $MODE == all ]]; then run_check || status=1; fi
if [[ $MODE == speed || $MODE == all ]]; then run_speed; fi
log "results in $OUT"
exit $status
