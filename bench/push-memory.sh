#!/usr/bin/env bash
# serverlab-load's memory per held push connection: comet, SSE and WebSocket clients held
# against node-http (one event a second), at LOW and HIGH connections; the figure is the
# slope of the engine's peak RSS, (RSS at HIGH - RSS at LOW) / (HIGH - LOW), in KiB per
# connection (target: at most 2). Peak RSS comes from wait4()'s rusage (measure.py), so what
# the kernel holds for the sockets is not in it. Every run's received events and errors are
# shown beside it: a run that lost connections measures nothing.
#
# Usage: bench/push-memory.sh   (LOW=1000 HIGH=15000 RAMP=10 HOLD=30 by default; HOLD is the
# seconds of events after the ramp; ENGINE=path measures another build, e.g. an older one;
# TLS=1 holds the streams over TLS on node-http's TLS port, trusting the run's CA, where
# the target is at most 4 KiB per connection (issue 22); KINDS="comet sse" picks behaviours).
# Needs node-http built (make build) and cargo.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
LOW="${LOW:-1000}"
HIGH="${HIGH:-15000}"
RAMP="${RAMP:-10}"
HOLD="${HOLD:-30}"
GEN_CPU="${GEN_CPU:-0}"
SERVER_CPU="${SERVER_CPU:-1}"
if [[ -z "${ENGINE:-}" ]]; then
  ENGINE="$ROOT/engine/target/release/serverlab-load"
  (cd "$ROOT/engine" && cargo build --release --locked --quiet)
fi
# Each side (the engine, the server) holds HIGH sockets; both stay under the hard limit.
ulimit -n "$(ulimit -Hn)"

WORK="$(mktemp -d /tmp/serverlab-pushmem.XXXXXX)"
SERVER_PID=""
# shellcheck source=bench/push-server.sh
source "$HERE/push-server.sh"
cleanup() {
  stop_push_server
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

start_push_server 1000

# held KIND N: runs N clients of KIND, prints "rss_kib events errors"
held() {
  local kind="$1" n="$2" path flag
  local base="http://127.0.0.1:$PORT" trust=()
  if [[ -n "${TLS:-}" ]]; then base="https://127.0.0.1:$TLS_PORT" trust=(--tls-ca "$TLS_CA"); fi
  case "$kind" in
    comet) path=/push; flag=(--comet e1) ;;
    sse) path=/sse; flag=(--sse e1) ;;
    websocket) path=/ws; flag=(--websocket e1) base="${base/#http/ws}" ;;
  esac
  taskset -c "$GEN_CPU" python3 "$HERE/measure.py" "$WORK/$kind-$n.cpu" -- \
    "$ENGINE" "$base$path" "${flag[@]}" "${trust[@]}" --users "$n" --ramp-up "${RAMP}s" \
    --hold "${HOLD}s" --json >"$WORK/$kind-$n.out" 2>"$WORK/$kind-$n.err" || true
  read -r _ _ _ rss < "$WORK/$kind-$n.cpu"
  python3 - "$WORK/$kind-$n.out" "$rss" <<'PY'
import json, sys
summary = json.loads(open(sys.argv[1]).read().splitlines()[-1])
errors = sum(summary["errors"].values())
print(sys.argv[2], summary["events"]["received"], errors)
PY
}

printf '%-10s %12s %12s %14s %14s %10s\n' behaviour "RSS@$LOW" "RSS@$HIGH" "events@$HIGH" "errors" "KiB/conn"
for kind in ${KINDS:-comet sse websocket}; do
  read -r low_rss low_events low_errors < <(held "$kind" "$LOW")
  read -r high_rss high_events high_errors < <(held "$kind" "$HIGH")
  slope="$(python3 -c "print(f'{($high_rss - $low_rss) / ($HIGH - $LOW):.2f}')")"
  printf '%-10s %10s K %10s K %14s %14s %10s\n' "$kind" "$low_rss" "$high_rss" "$high_events" \
    "$((low_errors + high_errors))" "$slope"
done
