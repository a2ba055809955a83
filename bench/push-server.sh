# shellcheck shell=bash
# Sourced by the push benchmarks: node-http on SERVER_CPU with one emitter, e1.
#   start_push_server INTERVAL_MS   sets PORT and SERVER_PID, and TLS_PORT and TLS_CA (the
#                                   run's CA) from what `serve` says; logs to $WORK
#   stop_push_server                for the caller's cleanup
# Needs ROOT, WORK and SERVER_CPU set, node-http built (make build).

start_push_server() {
  local interval_ms="$1"
  PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  PYTHONUNBUFFERED=1 taskset -c "$SERVER_CPU" "$ROOT/.venv/bin/serverlab" serve node-http --port "$PORT" >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 100); do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/stats" && break
    sleep 0.2
  done
  TLS_PORT="$(sed -n 's|^TLS on https://127.0.0.1:\([0-9]*\),.*|\1|p' "$WORK/server.log")"
  TLS_CA="$(sed -n 's|^TLS on .* CA \(.*\) (gone when.*|\1|p' "$WORK/server.log")"
  curl -sf -X POST "http://127.0.0.1:$PORT/event/set" -d "{\"name\": \"e1\", \"interval_ms\": $interval_ms}" >/dev/null
}

stop_push_server() {
  if [[ -n "${SERVER_PID:-}" ]]; then kill -INT "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
}
