#!/usr/bin/env bash
# Long-context benchmark (issue 10, docs/performance.md "Long context"): `handoff bench offline`
# on the bench-moe shape with the DSA indexer (family deepseek_v32: indexer 8 heads x 64,
# index_topk 2048), one request per prompt length, chunked prefill in 512-token steps, then
# DECODE tokens at that depth. Prints per length: prefill tok/s (prompt / TTFT), decode tok/s
# (1 / TPOT), peak RSS (VmHWM of the whole process: weights + cache + scratch), and the ratios
# to the shortest length, with the load average around the runs (the machine may be shared).
#
#   bench/long_context.sh                        # build/, models/bench-moe-dsa, 2 threads
#   LENGTHS="512 4096 8192 32768 65536" DECODE=32 THREADS=2 bench/long_context.sh
#   KV_CACHE_DTYPE=f32 INDEXER_CACHE_DTYPE=f32 bench/long_context.sh   # the f32-cache baseline
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
MODEL=${MODEL:-models/bench-moe-dsa}
LENGTHS=${LENGTHS:-512 4096 8192 32768 65536}
DECODE=${DECODE:-32}
THREADS=${THREADS:-2}
DTYPE=${DTYPE:-bf16}
KV_CACHE_DTYPE=${KV_CACHE_DTYPE:-bf16}
INDEXER_CACHE_DTYPE=${INDEXER_CACHE_DTYPE:-bf16}
HANDOFF=${HANDOFF:-$BUILD/bin/handoff}

[[ -x $HANDOFF ]] || { echo "missing $HANDOFF: build first (see README)" >&2; exit 1; }
if [[ ! -f $MODEL/config.json ]]; then
  echo "writing $MODEL (bench-moe, deepseek_v32, bf16; ~2.5 GB)" >&2
  "$HANDOFF" make-model --family deepseek_v32 --preset bench-moe --dtype bf16 --out "$MODEL" >&2
fi

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'); threads $THREADS;" \
  "weights $DTYPE; caches: latent $KV_CACHE_DTYPE, indexer key $INDEXER_CACHE_DTYPE"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| prompt tokens | prefill tok/s | decode tok/s | peak RSS (GiB) |\n|---|---|---|---|\n'
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for len in $LENGTHS; do
  # The cache holds exactly one request (rounded up to whole 16-token blocks).
  ctx=$(( (len + DECODE + 15) / 16 * 16 ))
  /usr/bin/time -f 'maxrss_kb %M' "$HANDOFF" bench offline --model "$MODEL" --dtype "$DTYPE" \
    --kv-cache-dtype "$KV_CACHE_DTYPE" --indexer-cache-dtype "$INDEXER_CACHE_DTYPE" \
    --threads "$THREADS" --num-prompts 1 --concurrency 1 --input-len "$len" \
    --output-len "$DECODE" --max-model-len "$ctx" --kv-cache-tokens "$ctx" \
    --max-num-batched-tokens 512 >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
  ttft=$(awk '/^TTFT/{print $3}' "$log")
  tpot=$(awk '/^TPOT/{print $3}' "$log")
  rss=$(awk '/^maxrss_kb/{print $2}' "$log")
  awk -v l="$len" -v t="$ttft" -v p="$tpot" -v r="$rss" 'BEGIN {
    printf "| %d | %.1f | %.2f | %.2f |\n", l, l / (t / 1000), 1000 / p, r / 1048576 }'
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
