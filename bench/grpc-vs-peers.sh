#!/usr/bin/env bash
# serverlab-load beside ghz and h2load on gRPC unary calls (issue 36, item 5), against
# go-nethttp's grpc-go server (h2c, GOMAXPROCS 1, pinned to CPU 1), every generator alone on
# CPU 0:
#   - closed loop, CONNS connections x STREAMS streams of Perf calls: calls/s and CPU per
#     call of the engine (--grpc-unary --streams), ghz (--connections CONNS, --concurrency
#     CONNS x STREAMS) and h2load (-c CONNS -m STREAMS, content-type: application/grpc,
#     te: trailers, the prebuilt 5-byte Perf request as its body);
#   - open loop at RATE calls/s: the engine's p99 beside ghz's (--rps RATE), both from the
#     scheduled send (ghz: its own timing);
#   - memory per held Subscribe stream: the engine's peak RSS holding HELD streams less its
#     peak holding one, over HELD - 1, with one stream to a connection and with 100.
# Targets (issue 36): CPU per call <= 0.8x ghz's and <= 1.0x h2load's, p99 within 10 % of
# ghz's, <= 3 KiB per held stream. On a shared machine these figures are noisy: the script
# prints the load average beside them and claims nothing.
#
# Usage: bench/grpc-vs-peers.sh   (DURATION=5 ROUNDS=3 CONNS=4 STREAMS=16 RATE=5000 HELD=2000
# by default; ENGINE=path measures that build; GHZ=path uses that ghz, else it is installed
# with `go install` at GHZ_VERSION into build/tools). Each workload runs ROUNDS paired rounds.
# Needs: nghttp2-client (make deps), go, cargo, and go-nethttp built (serverlab build go-nethttp).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
DURATION="${DURATION:-5}"
ROUNDS="${ROUNDS:-3}"
CONNS="${CONNS:-4}"
STREAMS="${STREAMS:-16}"
RATE="${RATE:-5000}"
HELD="${HELD:-2000}"
GEN_CPU="${GEN_CPU:-0}"
SERVER_CPU="${SERVER_CPU:-1}"
# The newest ghz the Go module proxy serves here (go list -m -versions github.com/bojand/ghz).
GHZ_VERSION="${GHZ_VERSION:-v0.93.0}"
SERVER="$ROOT/contestants/go-nethttp/build/go-nethttp"
PROTO="$ROOT/spec/grpc/serverlab.proto"

for tool in h2load go taskset python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make deps installs it)" >&2; exit 1; }
done
[[ -x "$SERVER" ]] || { echo "bench: $SERVER is missing (serverlab build go-nethttp)" >&2; exit 1; }
if [[ -z "${ENGINE:-}" ]]; then
  ENGINE="$ROOT/engine/target/release/serverlab-load"
  (cd "$ROOT/engine" && cargo build --release --locked --quiet)
fi
if [[ -z "${GHZ:-}" ]]; then
  GHZ="$ROOT/build/tools/ghz"
  [[ -x "$GHZ" ]] || GOBIN="$ROOT/build/tools" go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
fi

WORK="$(mktemp -d /tmp/serverlab-grpcbench.XXXXXX)"
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# shellcheck source=bench/peers-lib.sh
source "$HERE/peers-lib.sh"

# start_server : go-nethttp on the server CPU, one P; waits for its h2c port to take calls
start_server() {
  P_PLAIN="$(free_port)"; P_H2C="$(free_port)"
  ulimit -n "$(ulimit -Hn)"
  taskset -c "$SERVER_CPU" "$SERVER" -port "$P_PLAIN" -h2c-port "$P_H2C" -gomaxprocs 1 \
    >"$WORK/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 50); do
    "$ENGINE" "http://127.0.0.1:$P_H2C/" --h2c --grpc-unary -n 1 -c 1 >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "bench: go-nethttp answered no gRPC call" >&2; cat "$WORK/server.log" >&2; exit 1
}

# The prebuilt Perf request h2load sends as every call's body: flag 0, length 0.
printf '\x00\x00\x00\x00\x00' > "$WORK/perf.bin"

# record_ghz NAME PERCENT : appends "rps cpu_us_per_call calls errors latency_us" of ghz's last
# run, the latency at PERCENT (50 beside the engine's closed-loop p50, 99 at a fixed rate), from
# its JSON report (count, total in ns, statuses, latency distribution in ns); the calls ghz
# had in flight when its duration ended are in its report as Unavailable, so in errors
record_ghz() {
  local name="$1" percent="$2" user sys rc line
  read -r user sys rc _ < "$WORK/$name.cpu"
  line="$(python3 - "$WORK/$name.out" "$percent" <<'PY' 2>/dev/null
import json, sys
g = json.load(open(sys.argv[1]))
errors = sum(n for status, n in g.get("statusCodeDistribution", {}).items() if status != "OK")
at = float(sys.argv[2])
latency = next((l["latency"] for l in g["latencyDistribution"] if l["percentage"] == at), 0)
print(g["count"], g["total"] / 1e9, errors, latency / 1e3)
PY
)" || line=""
  [[ -n "$line" ]] || { echo "bench: $name gave no result (exit $rc)" >&2; head -c 300 "$WORK/$name.out" >&2; return 0; }
  read -r n s f latency <<<"$line"
  python3 -c "print($n / $s, ($user + $sys) * 1e6 / $n, $n, $f, $latency)" >> "$WORK/$name.results"
}
# record_p99 NAME : as `record`, the engine's p99 in the last column
record_p99() {
  record "$1" serverlab
  local p99; p99="$(summary "$1" 's["latency_us"]["p99"]')"
  python3 - "$WORK/$1.results" "$p99" <<'PY'
import sys
path, p99 = sys.argv[1], sys.argv[2]
lines = open(path).read().splitlines()
cols = lines[-1].split()
lines[-1] = " ".join(cols[:4] + [p99])
open(path, "w").write("\n".join(lines) + "\n")
PY
}

start_server
CONCURRENCY=$((CONNS * STREAMS))
# Each generator's command line (measure.py runs it, so no shell function).
GHZ_CALL=("$GHZ" --insecure --proto "$PROTO" --call serverlab.v1.Lab.Perf -d '{}' -O json
  --connections "$CONNS" -c "$CONCURRENCY" -z "${DURATION}s")
ENGINE_CALL=("$ENGINE" "http://127.0.0.1:$P_H2C/" --h2c --grpc-unary -c "$CONNS" --streams "$STREAMS"
  -d "${DURATION}s" --json)
for round in $(seq "$ROUNDS"); do
  run engine-closed "${ENGINE_CALL[@]}"; record engine-closed serverlab
  run ghz-closed "${GHZ_CALL[@]}" "127.0.0.1:$P_H2C"; record_ghz ghz-closed 50
  run h2load-closed h2load -c "$CONNS" -m "$STREAMS" -D "$DURATION" -d "$WORK/perf.bin" \
    -H 'content-type: application/grpc' -H 'te: trailers' "http://127.0.0.1:$P_H2C/serverlab.v1.Lab/Perf"
  record h2load-closed h2load
  run engine-rate "${ENGINE_CALL[@]}" -R "$RATE"; record_p99 engine-rate
  run ghz-rate "${GHZ_CALL[@]}" --rps "$RATE" "127.0.0.1:$P_H2C"; record_ghz ghz-rate 99
  echo "round $round of $ROUNDS done" >&2
done

# held_rss CONNECTIONS STREAMS : the engine's peak RSS (KiB) holding CONNECTIONS x STREAMS
# Subscribe streams for 3 s (no event emitted: the streams are held, not fed)
held_rss() {
  run "held-$1-$2" "$ENGINE" "http://127.0.0.1:$P_H2C/" --h2c --grpc-stream e1 -c "$1" --streams "$2" -d 3s --json
  awk '{print $4}' "$WORK/held-$1-$2.cpu"
}

echo
echo "gRPC unary Perf calls against go-nethttp (grpc-go, h2c, GOMAXPROCS 1, CPU $SERVER_CPU); generators on CPU $GEN_CPU"
echo "load average before the summary: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-34s %12s %10s %10s %8s %6s\n' "" "calls/s" "CPU us/call" "calls" "errors" "rounds"
report "engine, $CONNS x $STREAMS closed" engine-closed
report "ghz, $CONNS conns x $CONCURRENCY closed" ghz-closed
report "h2load, $CONNS x $STREAMS closed" h2load-closed
ratios engine-closed ghz-closed
ratios engine-closed h2load-closed
echo "at $RATE calls/s offered (p99 in us, median over rounds):"
for name in engine-rate ghz-rate; do
  [[ -s "$WORK/$name.results" ]] || { echo "    $name: no result"; continue; }
  python3 -c 'import statistics,sys; r=[list(map(float,l.split())) for l in open(sys.argv[1])]; print(f"    {sys.argv[2]}: {statistics.median(x[0] for x in r):.0f} calls/s, p99 {statistics.median(x[4] for x in r):.0f} us, CPU {statistics.median(x[1] for x in r):.2f} us/call")' "$WORK/$name.results" "$name"
done
one="$(held_rss 1 1)"
for streams in 1 100; do
  many="$(held_rss $((HELD / streams)) "$streams")"
  python3 -c "print(f'held Subscribe streams, {$streams} to a connection: {($many - $one) * 1024 / ($HELD - 1):.0f} bytes of engine RSS each ({$HELD} streams, peak {$many} KiB against {$one} KiB for one)')"
done
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
