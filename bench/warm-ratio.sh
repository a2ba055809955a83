#!/usr/bin/env bash
# The cross-check of issue 32 (item 7): serverlab's warmed keep-alive throughput ratio
# node-http / java-tomcat-blocking beside wrk's, on the same warmed servers. Both servers run
# at once, each pinned to SERVER_CPU (serverlab serve --cpus; the idle one costs the other
# next to nothing), every generator pinned to GEN_CPU, CONNS connections of GET /perf.
# Each server is first warmed WARMUP seconds by serverlab-load (the default warm-up cap,
# docs/warmup.md); then ROUNDS rounds each measure DURATION seconds per server with
# serverlab-load and with wrk, the tool going first alternating by round. Prints each
# tool's median requests/s per server, each tool's ratio (the median of the per-round
# ratios), and the load average before and after: on a shared machine the figures are only
# as good as its quiet, so the ±15 % agreement is judged on a quiet one.
#
# Usage: bench/warm-ratio.sh   (WARMUP=30 DURATION=10 ROUNDS=3 CONNS=50 GEN_CPU=0
# SERVER_CPU=1 by default; ENGINE=path measures another engine build)
# Needs: wrk (the Makefile's BENCH_PACKAGES), the contestants built (make build).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
WARMUP="${WARMUP:-30}"
DURATION="${DURATION:-10}"
ROUNDS="${ROUNDS:-3}"
CONNS="${CONNS:-50}"
GEN_CPU="${GEN_CPU:-0}"
SERVER_CPU="${SERVER_CPU:-1}"
ENGINE="${ENGINE:-$ROOT/engine/target/release/serverlab-load}"
SERVERLAB="$ROOT/.venv/bin/serverlab"
SERVERS=(node-http java-tomcat-blocking)
BODY='serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.'

for tool in wrk taskset curl python3; do
  command -v "$tool" >/dev/null || { echo "warm-ratio: $tool is missing (make deps installs it)" >&2; exit 1; }
done
[[ -x "$ENGINE" ]] || { echo "warm-ratio: $ENGINE is missing (make engine)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/serverlab-warm-ratio.XXXXXX)"
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill -INT "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# shellcheck source=bench/peers-lib.sh
source "$HERE/peers-lib.sh"

echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A URLS
for name in "${SERVERS[@]}"; do
  port="$(free_port)"
  "$SERVERLAB" serve "$name" --port "$port" --cpus "$SERVER_CPU" >"$WORK/$name.log" 2>&1 &
  PIDS+=("$!")
  URLS[$name]="http://127.0.0.1:$port/perf"
  # A JVM takes seconds to start: up to 60 s for its first answer.
  for _ in $(seq 600); do
    [[ "$(curl -s "${URLS[$name]}" 2>/dev/null)" == "$BODY" ]] && break
    sleep 0.1
  done
  [[ "$(curl -s "${URLS[$name]}")" == "$BODY" ]] || { echo "warm-ratio: $name never answered" >&2; cat "$WORK/$name.log" >&2; exit 1; }
done

# engine_rps URL SECONDS : serverlab-load's answers per second over the run
engine_rps() {
  taskset -c "$GEN_CPU" "$ENGINE" "$1" -c "$CONNS" -d "${2}s" --json | tail -n 1 \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["rps"])'
}
# wrk_rps URL SECONDS : wrk's Requests/sec (one thread, as the engine on one CPU)
wrk_rps() {
  taskset -c "$GEN_CPU" wrk -t1 -c "$CONNS" -d "${2}s" "$1" | awk '/^Requests\/sec:/ { print $2 }'
}

for name in "${SERVERS[@]}"; do
  echo "warming $name for $WARMUP s ($CONNS connections, serverlab-load)"
  engine_rps "${URLS[$name]}" "$WARMUP" >/dev/null
done

# One line per measurement: round tool server rps
for round in $(seq "$ROUNDS"); do
  tools=(serverlab wrk)
  (( round % 2 == 0 )) && tools=(wrk serverlab)
  for tool in "${tools[@]}"; do
    for name in "${SERVERS[@]}"; do
      if [[ "$tool" == serverlab ]]; then rps="$(engine_rps "${URLS[$name]}" "$DURATION")"
      else rps="$(wrk_rps "${URLS[$name]}" "$DURATION")"; fi
      echo "$round $tool $name $rps" | tee -a "$WORK/rates"
    done
  done
done

python3 - "$WORK/rates" "${SERVERS[@]}" <<'PY'
import statistics
import sys
from collections import defaultdict

path, top, bottom = sys.argv[1:4]
rates = defaultdict(dict)  # (tool, round) -> server -> rps
for line in open(path):
    rnd, tool, server, rps = line.split()
    rates[(tool, rnd)][server] = float(rps)
ratio = {}
for tool in ("serverlab", "wrk"):
    rounds = [r for (t, _), r in rates.items() if t == tool]
    for server in (top, bottom):
        median = statistics.median(r[server] for r in rounds)
        print(f"{tool:9} {server:22} median {median:>10,.0f} req/s over {len(rounds)} rounds")
    ratio[tool] = statistics.median(r[top] / r[bottom] for r in rounds)
    print(f"{tool:9} {top} / {bottom} = {ratio[tool]:.3f}")
print(f"serverlab's ratio / wrk's = {ratio['serverlab'] / ratio['wrk']:.3f} (the target: within 0.85-1.15)")
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
