# Sourced by the e2e scripts: starting and stopping a `handoff serve` they launched.

# wait_for_server LOG PID [TRIES]: waits (TRIES × 0.2 s, default
# 300) until LOG names the server's URL and its /health answers, then sets `url`. Exits 1 with
# the log if PID dies first or the time runs out.
wait_for_server() {
  local log=$1 pid=$2 tries=${3:-300}
  url=""
  for _ in $(seq 1 "$tries"); do
    url=$(grep -o 'listening on http://[0-9.:]*' "$log" | head -1 | sed 's/listening on //') || true
    [[ -n $url ]] && curl -sf "$url/health" >/dev/null && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$log"; echo "the server died while starting"; exit 1; }
    sleep 0.2
  done
  cat "$log"
  echo "the server did not start"
  exit 1
}

# expect_clean_exit PID LOG: waits for PID (sent SIGTERM by the caller) and exits 1 with the log
# unless it exited 0 (the drain finished).
expect_clean_exit() {
  local pid=$1 log=$2 status=0
  wait "$pid" || status=$?
  trap - EXIT
  [[ $status -eq 0 ]] || { echo "serve exited $status after SIGTERM"; cat "$log"; exit 1; }
  echo "server drained and exited 0"
}
