#!/usr/bin/env bash
# Faults of a served mpirun job (4 ranks: --tp 2 --pp 2 --sp on, f32) on the e2e model:
#  1. a worker rank throws during a streaming request (--fail-rank 3 --fail-at-step 4): the
#     client gets an error event naming rank 3, and the job exits non-zero naming it;
#  2. a worker rank is killed with SIGKILL mid-stream: the client's request ends and the job
#     exits non-zero.
# Both must happen within the comm timeout (plus start-up slack), never a hang.
#   run_mpi_faults.sh HANDOFF_BINARY WORK_DIR MPIRUN [MPIRUN ARGS...]
set -euo pipefail
handoff=$1
work=$2
shift 2
mpirun=("$@")
model="$work/e2e-default"  # made by the OpenAiE2E test
[[ -f $model/config.json ]] || { echo "missing $model (run OpenAiE2E first)"; exit 1; }
source "$(cd "$(dirname "$0")" && pwd)/server_process.sh"
comm_timeout=20
limit=$((comm_timeout + 15))

# start_job LOG [serve flags...]: starts the job, sets $job (mpirun's pid) and $url.
start_job() {
  local log=$1
  shift
  "${mpirun[@]}" -np 4 "$handoff" serve --comm mpi --tp 2 --pp 2 --sp on --threads 1 --dtype f32 \
    --model "$model" --port 0 --kv-cache-tokens 8192 --comm-timeout $comm_timeout "$@" \
    >"$log" 2>&1 &
  job=$!
  wait_for_server "$log" $job 600
}

# wait_job: waits up to $limit s for the job and sets $status to its exit status, or fails.
wait_job() {
  for _ in $(seq 1 $((limit * 10))); do
    if ! kill -0 $job 2>/dev/null; then
      status=0
      wait $job || status=$?
      return 0
    fi
    sleep 0.1
  done
  kill -9 $job 2>/dev/null || true
  echo "the job was still running ${limit} s after the fault"
  exit 1
}

stream='{"model":"e2e-default","prompt":"Once upon a time","max_tokens":200,"temperature":0,"stream":true}'
trap 'kill -9 ${job:-0} 2>/dev/null || true' EXIT

# 1. A worker rank throws.
log="$work/mpi-fault-throw-$$.log"
start_job "$log" --fail-rank 3 --fail-at-step 4
body=$(curl -sN --max-time $limit "$url/v1/completions" -H 'content-type: application/json' \
  -d "$stream" || true)
grep -q '"error"' <<<"$body" || { echo "no error event:"; echo "$body"; cat "$log"; exit 1; }
grep -q 'rank 3' <<<"$body" || { echo "the error event does not name rank 3:"; echo "$body"; exit 1; }
wait_job
[[ $status -ne 0 ]] || { echo "the job exited 0 after a rank failed"; cat "$log"; exit 1; }
grep -q 'rank 3 failed' "$log" || { echo "the job's output does not name rank 3"; cat "$log"; exit 1; }
echo "worker throws: error event naming rank 3, job exited $status: ok"

# 2. A worker rank is killed.
log="$work/mpi-fault-kill-$$.log"
start_job "$log"
rank0=$(grep -o 'listening on http://[0-9.:]* (pid [0-9]*' "$log" | head -1 | grep -o '[0-9]*$')
victim=""
for pid in $(pgrep -P $job || true); do  # the ranks are mpirun's children
  [[ $pid != "$rank0" ]] && victim=$pid && break
done
[[ -n $victim ]] || { echo "no worker rank process found"; exit 1; }
out="$work/mpi-fault-kill-$$.out"
curl -sN --max-time $limit "$url/v1/completions" -H 'content-type: application/json' \
  -d "$stream" >"$out" 2>&1 &
client=$!
for _ in $(seq 1 100); do grep -q '^data:' "$out" 2>/dev/null && break; sleep 0.1; done
kill -9 "$victim"
client_status=0
wait $client || client_status=$?
[[ $client_status -ne 28 ]] || { echo "the client waited past ${limit} s"; exit 1; }
if grep -q '\[DONE\]' "$out" && ! grep -q '"error"' "$out"; then
  echo "the stream completed normally although a rank was killed"
  exit 1
fi
wait_job
[[ $status -ne 0 ]] || { echo "the job exited 0 after a rank was killed"; cat "$log"; exit 1; }
echo "worker killed: the request ended (curl $client_status), job exited $status: ok"
trap - EXIT
