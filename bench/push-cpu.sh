#!/usr/bin/env bash
# serverlab-load's CPU per delivered push event beside a peer client, in one run: WebSocket
# against Tsung (ts_websocket: connect /ws, the subscribe message, a thinktime to hold) and
# SSE against curl -N (one process per client). node-http serves on the server CPU, one
# event every INTERVAL_MS; every generator holds CLIENTS clients (joined over RAMP s) for
# HOLD s on the generator CPU. CPU is the generator's user+system time from wait4()'s
# rusage (measure.py; it includes the children a generator waits for, so every curl);
# events are the server's own count (the /stats `deliveries` of that transport before and
# after the run), printed beside the generator's own count. ROUNDS paired rounds, the engine
# and its peer back to back, the order alternating; the ratio is taken per round, then its
# median (target: engine CPU per event at most 1.0x the peer's).
#
# Usage: bench/push-cpu.sh   (CLIENTS=50 INTERVAL_MS=10 RAMP=1 HOLD=20 ROUNDS=3 by default)
# Needs: tsung curl (the Makefile's BENCH_PACKAGES), node-http built (make build), cargo.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
CLIENTS="${CLIENTS:-50}"
INTERVAL_MS="${INTERVAL_MS:-10}"
RAMP="${RAMP:-1}"
HOLD="${HOLD:-20}"
ROUNDS="${ROUNDS:-3}"
GEN_CPU="${GEN_CPU:-0}"
SERVER_CPU="${SERVER_CPU:-1}"
ENGINE="$ROOT/engine/target/release/serverlab-load"

for tool in tsung curl taskset python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make bench installs it)" >&2; exit 1; }
done
(cd "$ROOT/engine" && cargo build --release --locked --quiet)
ulimit -n "$(ulimit -Hn)"

WORK="$(mktemp -d /tmp/serverlab-pushcpu.XXXXXX)"
SERVER_PID=""
# shellcheck source=bench/push-server.sh
source "$HERE/push-server.sh"
# Tsung starts Erlang's epmd, which outlives it: stop it at the end unless it ran before.
EPMD_BEFORE="$(pgrep -x epmd || true)"
cleanup() {
  stop_push_server
  if [[ -z "$EPMD_BEFORE" ]]; then pkill -x epmd 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

start_push_server "$INTERVAL_MS"

# deliveries KIND : the server's count of event messages sent on that transport (sse, websocket)
deliveries() {
  curl -sf "http://127.0.0.1:$PORT/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]]["deliveries"])' "$1"
}

# measured NAME CMD... : runs CMD on the generator CPU; leaves "user sys rc rss" in NAME.cpu
measured() {
  local name="$1"; shift
  taskset -c "$GEN_CPU" python3 "$HERE/measure.py" "$WORK/$name.cpu" -- "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" || true
}

engine_run() {
  local name="$1" kind="$2" path flag
  case "$kind" in
    sse) path=/sse; flag=(--sse e1) ;;
    websocket) path=/ws; flag=(--websocket e1) ;;
  esac
  measured "$name" "$ENGINE" "http://127.0.0.1:$PORT$path" "${flag[@]}" --users "$CLIENTS" \
    --ramp-up "${RAMP}s" --hold "${HOLD}s" --json
  python3 -c 'import json,sys; s=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(s["events"]["received"], sum(s["errors"].values()))' "$WORK/$name.out"
}

# Tsung's WebSocket session; arrivals at the rate that starts CLIENTS in RAMP s. The phase
# lasts 10 s longer: on a busy machine Tsung's launcher falls behind, and users a phase has
# not started by its end are never started.
tsung_config() {
  cat <<XML
<?xml version="1.0"?>
<!DOCTYPE tsung SYSTEM "/usr/share/tsung/tsung-1.0.dtd" []>
<tsung loglevel="warning" version="1.0">
  <clients><client host="localhost" use_controller_vm="true" maxusers="$CLIENTS"/></clients>
  <servers><server host="127.0.0.1" port="$PORT" type="tcp"/></servers>
  <load>
    <arrivalphase phase="1" duration="$((RAMP + 10))" unit="second">
      <users maxnumber="$CLIENTS" arrivalrate="$(((CLIENTS + RAMP - 1) / RAMP))" unit="second"/>
    </arrivalphase>
  </load>
  <sessions>
    <session name="ws" probability="100" type="ts_websocket">
      <request><websocket type="connect" path="/ws"></websocket></request>
      <request><websocket type="message" frame="text" ack="no_ack">{"type": "subscribe", "events": ["e1"]}</websocket></request>
      <thinktime value="$HOLD" random="false"/>
      <request><websocket type="close"></websocket></request>
    </session>
  </sessions>
</tsung>
XML
}

# Tsung's own count: the reads it made during the thinktime (async_unknown_data_rcv), less
# one `subscribed` reply per connection; reads that found two frames count once. Errors:
# clients whose WebSocket did not open.
tsung_run() {
  local name="$1"
  tsung_config >"$WORK/$name.xml"
  measured "$name" tsung -n -f "$WORK/$name.xml" -l "$WORK/$name.log" start
  awk '$2 == "async_unknown_data_rcv" {r = $4} $2 == "websocket_succ" {c = $4} $2 == "users_count" {u = $4}
       END {print r - c, n - c}' n="$CLIENTS" "$WORK/$name.log"/*/tsung.log
}

# curl -N per client, all waited for by one shell (so wait4 sees their CPU); its own count is
# the `data:` lines written. Errors: clients that got none.
curl_run() {
  local name="$1"
  mkdir -p "$WORK/$name.d"
  # shellcheck disable=SC2016  # the inner shell expands its own arguments
  measured "$name" bash -c 'for i in $(seq "$1"); do curl -sN --max-time "$2" -H "Accept: text/event-stream" \
    "$3" -o "$4/$i.txt" & done; wait' _ "$CLIENTS" "$((RAMP + HOLD))" "http://127.0.0.1:$PORT/sse?events=e1" "$WORK/$name.d"
  echo "$(cat "$WORK/$name.d"/*.txt | grep -c '^data:') $(grep -L '^data:' "$WORK/$name.d"/*.txt | wc -l)"
}

# one KIND GENERATOR ROUND : a run, appended to results as
# "kind generator round cpu_s server_deliveries own_count errors"
one() {
  local kind="$1" gen="$2" round="$3" name="$1-$2-$3" before after own errors user sys
  before="$(deliveries "$kind")"
  case "$gen" in
    serverlab-load) read -r own errors < <(engine_run "$name" "$kind") ;;
    tsung) read -r own errors < <(tsung_run "$name") ;;
    curl) read -r own errors < <(curl_run "$name") ;;
  esac
  after="$(deliveries "$kind")"
  read -r user sys _ _ <"$WORK/$name.cpu"
  echo "$kind $gen $round $(python3 -c "print($user + $sys)") $((after - before)) $own $errors" >>"$WORK/results"
  sleep 1
}

echo "push-cpu: $CLIENTS clients, an event every $INTERVAL_MS ms, ramp ${RAMP}s, hold ${HOLD}s, $ROUNDS rounds; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
  for pair in "websocket tsung" "sse curl"; do
    read -r kind peer <<<"$pair"
    if ((round % 2)); then one "$kind" serverlab-load "$round"; one "$kind" "$peer" "$round"
    else one "$kind" "$peer" "$round"; one "$kind" serverlab-load "$round"; fi
  done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$HERE/push_cpu_table.py" "$WORK/results"
