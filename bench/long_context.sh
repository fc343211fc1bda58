#!/usr/bin/env bash
# Long-context benchmark (issue 10, docs/performance.md "Long context") on the bench-moe shape
# with the DSA indexer (family deepseek_v32: indexer 8 heads x 64, index_topk 2048).
#
#  1. Per LENGTHS: `handoff generate` on one prompt of that many random token ids, chunked
#     prefill in 512-token steps, then DECODE greedy tokens at that depth. Prints prefill tok/s,
#     decode tok/s, peak RSS (VmHWM: weights + cache + scratch) and the bound the issue sets,
#     weights + cache + 1 GB (both from the load log), and the ratios to the first length, which
#     runs again before each other length (the ratios use the median of those runs).
#  2. Per PEER_LENGTHS, when llama.cpp is built in PEER (bench/peer_compare.sh builds it):
#     llama-bench on the same weights exported to GGUF (deepseek32): prefill of LEN tokens, and
#     DECODE tokens at depth LEN. Its caches are its defaults (f16).
#  3. Per SERVE_LENGTHS: `handoff serve` sized for that one request, one /v1/completions request
#     with the prompt as token ids, and the server's VmHWM against the same bound (a memory
#     check, last: its time is not part of the tables above).
#
#   bench/long_context.sh                          # build/, models/bench-moe-dsa, 2 threads
#   LENGTHS="512 4096" SERVE_LENGTHS= PEER_LENGTHS= bench/long_context.sh   # a short run
#   KV_CACHE_DTYPE=f32 INDEXER_CACHE_DTYPE=f32 bench/long_context.sh        # f32 caches
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/bench-moe-dsa}
LENGTHS=${LENGTHS-512 4096 8192 32768 65536}
SERVE_LENGTHS=${SERVE_LENGTHS-65536}
PEER_LENGTHS=${PEER_LENGTHS-512 4096 8192}
DECODE=${DECODE:-32}
THREADS=${THREADS:-2}
DTYPE=${DTYPE:-bf16}
KV_CACHE_DTYPE=${KV_CACHE_DTYPE:-bf16}
INDEXER_CACHE_DTYPE=${INDEXER_CACHE_DTYPE:-bf16}
HANDOFF=${HANDOFF:-$BUILD/bin/handoff}
PEER=${PEER:-$HOME/.cache/handoff-peer}
PORT=${PORT:-18631}

[[ -x $HANDOFF ]] || { echo "missing $HANDOFF: build first (see README)" >&2; exit 1; }
if [[ ! -f $MODEL/config.json ]]; then
  echo "writing $MODEL (bench-moe, deepseek_v32, bf16; ~2.5 GB)" >&2
  "$HANDOFF" make-model --family deepseek_v32 --preset bench-moe --dtype bf16 --out "$MODEL" >&2
fi
work=$(mktemp -d)
server_pid=
cleanup() {
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# prompt_ids LEN: LEN token ids in [3, 32000), the same for every engine (fixed seed).
prompt_ids() {
  awk -v n="$1" 'BEGIN { srand(11); for (i = 0; i < n; ++i) printf "%s%d", (i ? "," : ""), 3 + int(rand() * 31997) }'
}
# mib_from_log LOG PATTERN: the number before " MiB" on the first line matching PATTERN.
mib_from_log() { grep -m1 "$2" "$1" | sed -E 's/.* ([0-9.]+) MiB.*/\1/'; }
# bound_mib LOG: weights + cache (MiB, from the load log) + 1 GB.
bound_mib() {
  awk -v w="$(mib_from_log "$1" 'MiB of weights')" -v c="$(mib_from_log "$1" 'bytes per token')" \
    'BEGIN { printf "%.0f", w + c + 1e9 / 1048576 }'
}

cpu_field() { grep -m1 "^$1" /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'; }
echo "CPU: $(cpu_field 'model name') (family $(cpu_field 'cpu family') model $(cpu_field 'model\s')); threads $THREADS;" \
  "weights $DTYPE; caches: latent $KV_CACHE_DTYPE, indexer key $INDEXER_CACHE_DTYPE; $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
cache_flags=(--kv-cache-dtype "$KV_CACHE_DTYPE" --indexer-cache-dtype "$INDEXER_CACHE_DTYPE")

# run_generate LEN: one generate run; sets p (prefill tok/s), d (decode tok/s), rss, bound.
run_generate() {
  echo "[[$(prompt_ids "$1")]]" > "$work/prompt.json"
  log=$work/generate-$1.log
  "$HANDOFF" generate --model "$MODEL" --dtype "$DTYPE" "${cache_flags[@]}" --threads "$THREADS" \
    --prompts-json "$work/prompt.json" --max-new-tokens "$DECODE" --prefill-chunk 512 \
    > "$log" 2>&1 || { cat "$log" >&2; exit 1; }
  p=$(sed -nE 's/^prefill: .* = ([0-9.]+) tokens\/s/\1/p' "$log")
  d=$(sed -nE 's/^decode: .* = ([0-9.]+) tokens\/s/\1/p' "$log")
  rss=$(mib_from_log "$log" 'peak resident memory')
  bound=$(bound_mib "$log")
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }

if [[ -n $LENGTHS ]]; then
  # The first length is the baseline. This machine's speed drifts by 10-20 % between runs, so
  # the baseline runs again just before every other length, and each ratio is against the
  # median of all baseline runs (listed below the table).
  read -r base rest <<< "$LENGTHS"
  base_p= base_d= rows=
  for len in $rest; do
    run_generate "$base"
    base_p="$base_p $p" base_d="$base_d $d"
    run_generate "$len"
    rows="$rows$len $p $d $rss $bound
"
  done
  run_generate "$base"
  base_p="$base_p $p" base_d="$base_d $d"
  mp=$(median <<< "$base_p") md=$(median <<< "$base_d")
  echo
  echo "handoff generate, prefill in 512-token chunks, $DECODE tokens decoded at depth:"
  printf '| prompt tokens | prefill tok/s | decode tok/s | peak RSS (MiB) | bound (MiB) | prefill ratio | decode ratio |\n'
  printf '|---|---|---|---|---|---|---|\n'
  printf '%s %s %s %s %s\n' "$base" "$mp" "$md" "$rss" "$bound" | cat - <(printf '%s' "$rows") |
    awk -v fp="$mp" -v fd="$md" '{ printf "| %d | %.1f | %.2f | %.0f | %d%s | %.2f x | %.2f x |\n",
      $1, $2, $3, $4, $5, ($4 <= $5 ? "" : " EXCEEDED"), $2 / fp, $3 / fd }'
  echo "baseline ($base tokens) runs, in order: prefill$base_p; decode$base_d (its row: the medians)"
fi

llama_bench=$PEER/llama.cpp/build/bin/llama-bench
if [[ -n $PEER_LENGTHS && -x $llama_bench ]]; then
  gguf=$PEER/models/$(basename "$MODEL")-$DTYPE.gguf
  [[ -f $gguf ]] || "$HANDOFF" export-gguf --model "$MODEL" --out "$gguf" > "$work/export.log" 2>&1 ||
    { cat "$work/export.log" >&2; exit 1; }
  echo
  echo "llama.cpp ($(basename "$gguf"), deepseek32, llama-bench -t $THREADS -r 1):"
  printf '| prompt tokens | prefill tok/s | decode tok/s |\n|---|---|---|\n'
  for len in $PEER_LENGTHS; do
    "$llama_bench" -m "$gguf" -t "$THREADS" -r 1 -p "$len" -n 0 -o json > "$work/pp.json" 2> "$work/pp.err" ||
      { cat "$work/pp.err" >&2; exit 1; }
    "$llama_bench" -m "$gguf" -t "$THREADS" -r 1 -p 0 -n "$DECODE" -d "$len" -o json > "$work/tg.json" \
      2> "$work/tg.err" || { cat "$work/tg.err" >&2; exit 1; }
    p=$(grep -oE '"avg_ts": *[0-9.]+' "$work/pp.json" | head -1 | grep -oE '[0-9.]+$')
    d=$(grep -oE '"avg_ts": *[0-9.]+' "$work/tg.json" | head -1 | grep -oE '[0-9.]+$')
    printf '| %d | %.1f | %.2f |\n' "$len" "$p" "$d"
  done
fi
if [[ -n $SERVE_LENGTHS ]]; then
  echo
  echo "handoff serve, one /v1/completions request of token ids, max_tokens $DECODE:"
  printf '| prompt tokens | completion tokens | request s | peak RSS (MiB) | bound (MiB) |\n|---|---|---|---|---|\n'
  for len in $SERVE_LENGTHS; do
    ctx=$(( (len + DECODE + 15) / 16 * 16 ))
    log=$work/serve-$len.log
    "$HANDOFF" serve --model "$MODEL" --dtype "$DTYPE" "${cache_flags[@]}" --threads "$THREADS" \
      --port "$PORT" --max-model-len "$ctx" --kv-cache-tokens "$ctx" > "$log" 2>&1 &
    server_pid=$!
    for _ in $(seq 600); do
      curl -sf "http://127.0.0.1:$PORT/health" > /dev/null && break
      kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
      sleep 1
    done
    name=$(curl -sf "http://127.0.0.1:$PORT/v1/models" | grep -oE '"id": *"[^"]+"' | head -1 | cut -d'"' -f4)
    echo "{\"model\": \"$name\", \"prompt\": [$(prompt_ids "$len")], \"max_tokens\": $DECODE, \"temperature\": 0}" \
      > "$work/request.json"
    start=$(date +%s%N)
    curl -sf --max-time 36000 "http://127.0.0.1:$PORT/v1/completions" -H 'Content-Type: application/json' \
      --data-binary @"$work/request.json" > "$work/response.json" ||
      { echo "request failed"; cat "$log" >&2; exit 1; }
    end=$(date +%s%N)
    rss=$(awk '/^VmHWM/ { printf "%.0f", $2 / 1024 }' "/proc/$server_pid/status")
    kill "$server_pid"
    wait "$server_pid" || true
    server_pid=
    usage_of() { grep -oE "\"$1\": *[0-9]+" "$work/response.json" | grep -oE '[0-9]+$'; }
    prompt_tokens=$(usage_of prompt_tokens) completion_tokens=$(usage_of completion_tokens)
    awk -v l="$prompt_tokens" -v c="$completion_tokens" -v s="$(( (end - start) / 1000000 ))" -v r="$rss" \
      -v b="$(bound_mib "$log")" 'BEGIN { printf "| %d | %d | %.1f | %d | %d%s |\n", l, c, s / 1000, r, b,
        (r <= b ? "" : " EXCEEDED") }'
  done
fi

echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
