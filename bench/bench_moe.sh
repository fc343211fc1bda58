#!/usr/bin/env bash
# The bench-moe benchmark (docs/performance.md): memory read bandwidth (stream_read, 1 and 2
# threads, the faster of plain and non-temporally prefetched reads), then `handoff generate` on
# the bench-moe shape at bf16 — prefill of a 512-token prompt and 128 decode tokens, batch 1 —
# RUNS times each. Prints the medians, the load average
# around the runs (the machine may be shared) and decode as a fraction of the roofline
# (2-thread read bandwidth / active weight bytes per token).
#
#   bench/bench_moe.sh                 # build/, models/bench-moe, 2 threads, 3 runs
#   RUNS=5 THREADS=2 BUILD=build MODEL=models/bench-moe bench/bench_moe.sh
#   HANDOFF=/path/to/other/handoff bench/bench_moe.sh   # e.g. a build of an older commit
#   COMPETE=1 bench/bench_moe.sh       # one busy process beside each generate run (a shared
#                                      # machine): how much a stolen core costs
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/bench-moe}
RUNS=${RUNS:-3}
THREADS=${THREADS:-2}
PROMPT_LEN=${PROMPT_LEN:-512}
DECODE=${DECODE:-128}
DTYPE=${DTYPE:-bf16}
COMPETE=${COMPETE:-0}
BIN=$BUILD/bin
HANDOFF=${HANDOFF:-$BIN/handoff}  # another build of handoff to compare against

for b in handoff stream_read; do
  [[ -x $BIN/$b ]] || { echo "missing $BIN/$b: build first (see README)" >&2; exit 1; }
done
if [[ ! -f $MODEL/config.json ]]; then
  echo "making $MODEL (about 2.5 GB)..."
  "$HANDOFF" make-model --family deepseek_v3 --preset bench-moe --seed 1 --dtype bf16 \
    --out "$MODEL"
fi

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

echo "host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

# Memory read bandwidth: Google Benchmark repetitions, medians of GB/s per thread count.
sr_json=$(mktemp)
trap 'rm -f "$sr_json"' EXIT
"$BIN/stream_read" --benchmark_repetitions="$RUNS" --benchmark_format=json \
  --benchmark_out="$sr_json" --benchmark_out_format=json > /dev/null
bw_of() {  # median GB/s of the stream_read runs of benchmark $1 with $2 threads
  jq -r --arg b "$1/" --argjson t "$2" \
    '.benchmarks[] | select(.run_type == "iteration" and .threads == $t
                            and (.name | startswith($b))) | ."GB/s" / 1e9' "$sr_json" | median
}
bw() {  # the faster of plain and non-temporally prefetched reads with $1 threads
  printf '%s\n%s\n' "$(bw_of BM_StreamRead "$1")" "$(bw_of BM_StreamReadNonTemporal "$1")" |
    sort -g | tail -1
}
bw1=$(bw 1)
bw2=$(bw 2)
printf 'stream_read: 1 thread %.2f GB/s, 2 threads %.2f GB/s (median of %d)\n' "$bw1" "$bw2" "$RUNS"

prompt=$(seq -s, 1 "$PROMPT_LEN")
prefill=()
decode=()
loadtime=()
competitor=""
stop_competitor() { [[ -z $competitor ]] || kill "$competitor" 2> /dev/null || true; }
trap 'rm -f "$sr_json"; stop_competitor' EXIT
active=""
for ((i = 1; i <= RUNS; ++i)); do
  if ((COMPETE)); then
    yes > /dev/null &
    competitor=$!
  fi
  out=$("$HANDOFF" generate --model "$MODEL" --prompt-ids "$prompt" \
    --max-new-tokens "$DECODE" --dtype "$DTYPE" --threads "$THREADS" 2>&1)
  p=$(sed -n 's/^prefill: .* = \([0-9.]*\) tokens\/s$/\1/p' <<< "$out")
  d=$(sed -n 's/^decode: .* = \([0-9.]*\) tokens\/s$/\1/p' <<< "$out")
  active=$(sed -n 's/^active weight bytes per token: \([0-9]*\)$/\1/p' <<< "$out")
  l=$(sed -n 's/.* loaded .* in \([0-9.]*\) s;.*/\1/p' <<< "$out")
  stop_competitor
  competitor=""
  [[ -n $p && -n $d ]] || { echo "$out" >&2; exit 1; }
  echo "run $i: load ${l:-?} s, prefill $p tokens/s, decode $d tokens/s (load average $(cut -d' ' -f1 /proc/loadavg))"
  prefill+=("$p")
  decode+=("$d")
  [[ -z $l ]] || loadtime+=("$l")
done
p_med=$(printf '%s\n' "${prefill[@]}" | median)
d_med=$(printf '%s\n' "${decode[@]}" | median)
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
((${#loadtime[@]} == 0)) || echo "median model load: $(printf '%s\n' "${loadtime[@]}" | median) s"
((COMPETE == 0)) || echo "(each run had one busy competing process)"
echo "median of $RUNS: prefill ($PROMPT_LEN tokens) $p_med tokens/s, decode ($DECODE tokens) $d_med tokens/s ($THREADS threads, $DTYPE)"
awk -v bw="$bw2" -v a="$active" -v d="$d_med" 'BEGIN {
  roof = bw * 1e9 / a
  printf "roofline: %.2f GB/s / %.1f MB per token = %.1f tokens/s; decode at %.1f %% of it\n",
         bw, a / 1e6, roof, 100 * d / roof
}'
