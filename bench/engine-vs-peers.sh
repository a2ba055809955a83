#!/usr/bin/env bash
# serverlab-load beside wrk, h2load and ab against nginx (one worker pinned to CPU 1, the
# 84-byte /perf body), every generator pinned to CPU 0, side by side in one run.
# Prints requests/s, generator CPU microseconds per request, and the ratios to wrk; then the
# seed 003 test (-c 10000 -n 20000 --new-connection), an open loop at 20,000 req/s, and the
# latency-bound comparisons: sequential connections against httperf (section `sequential`:
# the engine closing each connection itself, as httperf does, and waiting for the server's
# close for contrast), -c 1 new connection per request against ab, -c 1 keep-alive p50 against
# wrk (section `latency`; LATENCY_ROUNDS paired rounds each).
#
# Usage: bench/engine-vs-peers.sh   (DURATION=10 ROUNDS=3 CONNS=100 LATENCY_ROUNDS=5
# LATENCY_DURATION=3 SEQUENTIAL=5000 SEED003_ROUNDS=5 by default,
# SECTIONS="keepalive newconn seed003 open sequential latency" picks workloads; the machine is
# shared, so each workload runs ROUNDS times with the generators alternating, medians shown;
# ratios are taken per round between runs made back to back, then their median)
# Needs: nginx-light wrk nghttp2-client apache2-utils httperf (the Makefile's DEBIAN_PACKAGES),
# cargo.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
DURATION="${DURATION:-10}"
ROUNDS="${ROUNDS:-3}"
CONNS="${CONNS:-100}"
LATENCY_ROUNDS="${LATENCY_ROUNDS:-5}"
LATENCY_DURATION="${LATENCY_DURATION:-3}"
SEQUENTIAL="${SEQUENTIAL:-5000}"
SEED003_ROUNDS="${SEED003_ROUNDS:-5}"
# Which workloads to run (all by default), e.g. SECTIONS="seed003 latency".
SECTIONS="${SECTIONS:-keepalive newconn seed003 open sequential latency}"
GEN_CPU="${GEN_CPU:-0}"
SERVER_CPU="${SERVER_CPU:-1}"
# ENGINE=path measures another build (then nothing is built here).
ENGINE="${ENGINE:-}"
BODY='serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.'

for tool in nginx wrk h2load ab httperf taskset python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make deps installs it)" >&2; exit 1; }
done
if [[ -z "$ENGINE" ]]; then
  (cd "$ROOT/engine" && cargo build --release --locked --quiet)
  ENGINE="$ROOT/engine/target/release/serverlab-load"
fi

WORK="$(mktemp -d /tmp/serverlab-bench.XXXXXX)"
NGINX_PID=""
cleanup() {
  if [[ -n "$NGINX_PID" ]]; then kill "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

# shellcheck source=bench/peers-lib.sh
source "$HERE/peers-lib.sh"
PORT="$(free_port)"
{ nginx_conf_head; cat <<CONF; } > "$WORK/nginx.conf"
  server {
    listen 127.0.0.1:$PORT backlog=65535 reuseport;
    location = /perf { default_type text/plain; return 200 "$BODY\n"; }
  }
}
CONF
# The master and its single worker both run on the server CPU.
taskset -c "$SERVER_CPU" nginx -e "$WORK/error.log" -p "$WORK" -c "$WORK/nginx.conf" &
NGINX_PID=$!
URL="http://127.0.0.1:$PORT/perf"
await_body "$URL" "$BODY"

wants() { [[ " $SECTIONS " == *" $1 "* ]]; }

# tcpext : the kernel's count of accept-queue overflows and of SYNs sent again
# (/proc/net/netstat, the whole network namespace: loopback is shared with the machine)
tcpext() {
  awk '/^TcpExt:/ { if (!h) { for (i = 1; i <= NF; i++) k[i] = $i; h = 1 } else for (i = 1; i <= NF; i++) v[k[i]] = $i }
       END { print v["ListenOverflows"] + 0, v["TCPSynRetrans"] + 0 }' /proc/net/netstat
}
# listen_counted NAME TOOL CMD... : measure, and append the run's accept-queue overflows and
# SYN retransmits to NAME.listen
listen_counted() {
  local name="$1" before after
  before="$(tcpext)"
  measure "$@"
  after="$(tcpext)"
  echo "$before $after" | awk '{print $3 - $1, $4 - $2}' >> "$WORK/$name.listen"
}
# overflows NAME : medians of the accept-queue overflows and SYN retransmits per round
overflows() {
  python3 - "$WORK/$1.listen" "$1" <<'PY'
import statistics, sys
rows = [list(map(int, l.split())) for l in open(sys.argv[1]) if l.strip()]
print(f"    {sys.argv[2]}: accept-queue overflows {statistics.median(r[0] for r in rows):.0f}, "
      f"SYNs sent again {statistics.median(r[1] for r in rows):.0f} (median of {len(rows)} rounds; "
      f"each round {[tuple(r) for r in rows]})")
PY
}

# waits NAME : the wait serverlab-load chose in each round, and its spinning share of CPU
waits() {
  python3 - "$WORK/$1.waits" <<'PY'
import collections, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
seen = collections.Counter(f"{w} ({why})" for w, why, _ in rows)
spin = [float(s) for _, _, s in rows]
print(f"    serverlab-load waited: {'; '.join(f'{n}x {k}' for k, n in seen.items())};"
      f" spinning {100 * sum(spin) / max(len(spin), 1):.0f}% of its CPU on average")
PY
}
# latency NAME ARGS... : one serverlab-load round of a latency-bound workload, recorded with
# the wait it chose
latency_round() {
  local name="$1"; shift
  measure "$name" serverlab "$ENGINE" "$URL" -t 1 "$@" --json
  summary "$name" '"\t".join(map(str, (s["wait"], s["wait_reason"], s["spin_cpu_s"] / max(s["client_cpu_s"], 1e-9))))' >> "$WORK/$name.waits" 2>/dev/null || true
}

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nginx $(nginx -v 2>&1 | sed 's/.*\///') on CPU $SERVER_CPU, generators on CPU $GEN_CPU, ${DURATION}s per run, kernel $(uname -r)"
printf '%-34s %12s %10s %10s %8s %6s\n' "workload / generator" "requests/s" "CPU us/req" "requests" "errors" "rounds"
echo "(requests/s and CPU are medians over the rounds; requests and errors are totals)"

if wants keepalive; then
echo "-- keep-alive, $CONNS connections ($ROUNDS rounds, generators alternating)"
for _ in $(seq "$ROUNDS"); do
  measure sl_ka serverlab "$ENGINE" "$URL" -c "$CONNS" -t 1 -d "${DURATION}s" --json
  measure sl_ka_epoll serverlab "$ENGINE" "$URL" -c "$CONNS" -t 1 -d "${DURATION}s" --io epoll --json
  measure wrk_ka wrk wrk -t1 -c "$CONNS" -d "${DURATION}s" "$URL"
  measure h2_ka h2load h2load --h1 -t1 -c "$CONNS" -D "$DURATION" "$URL"
  measure ab_ka ab ab -k -c "$CONNS" -t "$DURATION" -n 100000000 "$URL"
done
report "serverlab-load ($(backend sl_ka))" sl_ka
report "serverlab-load --io epoll" sl_ka_epoll
report "wrk" wrk_ka
report "h2load --h1" h2_ka
report "ab -k" ab_ka
ratios sl_ka wrk_ka; ratios sl_ka_epoll wrk_ka; ratios h2_ka wrk_ka; ratios ab_ka wrk_ka
python3 - "$WORK/sl_ka.out" <<'PY'
import json, sys
n = json.loads(open(sys.argv[1]).read().splitlines()[-1]).get("notice_us") or {}
if n.get("count"):
    print(f"    serverlab-load (last round) read answers {n['p50']} us (p50), {n['p90']} us (p90), "
          f"{n['p99']} us (p99) after the kernel received them (notice_us, sampled)")
PY
fi

if wants newconn; then
echo "-- new connection per request, $CONNS concurrent ($ROUNDS rounds)"
for _ in $(seq "$ROUNDS"); do
  measure sl_nc serverlab "$ENGINE" "$URL" -c "$CONNS" -t 1 -d "${DURATION}s" --new-connection --json
  measure sl_nc_epoll serverlab "$ENGINE" "$URL" -c "$CONNS" -t 1 -d "${DURATION}s" --new-connection --io epoll --json
  measure wrk_nc wrk wrk -t1 -c "$CONNS" -d "${DURATION}s" -H "Connection: close" "$URL"
  measure ab_nc ab ab -c "$CONNS" -t "$DURATION" -n 100000000 "$URL"
done
report "serverlab-load --new-connection ($(backend sl_nc))" sl_nc
report "  the same with --io epoll" sl_nc_epoll
report "wrk (Connection: close)" wrk_nc
report "ab" ab_nc
echo "    (h2load cannot open a connection per request)"
ratios sl_nc wrk_nc; ratios sl_nc ab_nc; ratios sl_nc_epoll ab_nc; ratios ab_nc wrk_nc
fi

if wants seed003; then
echo "-- seed 003: -c 10000 -n 20000, new connection per request ($SEED003_ROUNDS rounds, generators alternating)"
for _ in $(seq "$SEED003_ROUNDS"); do
  listen_counted sl_10k serverlab "$ENGINE" "$URL" -c 10000 -n 20000 -t 1 --new-connection --timeout 30s --source 127.0.0.2-127.0.0.250 --json
  listen_counted sl_10k_epoll serverlab "$ENGINE" "$URL" -c 10000 -n 20000 -t 1 --new-connection --timeout 30s --source 127.0.0.2-127.0.0.250 --io epoll --json
  listen_counted ab_10k ab ab -c 10000 -n 20000 -s 30 "$URL"
done
report "serverlab-load -c 10000 ($(backend sl_10k))" sl_10k
report "  the same with --io epoll" sl_10k_epoll
report "ab -c 10000" ab_10k
ratios sl_10k ab_10k; ratios sl_10k_epoll ab_10k; ratios sl_10k sl_10k_epoll
overflows sl_10k; overflows sl_10k_epoll; overflows ab_10k
python3 - "$WORK/sl_10k.out" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(f"    serverlab-load (last round): {s['requests']} requests, errors {sum(s['errors'].values())}, valid={s['valid']}, p99 {s['latency_us']['p99']/1000:.1f} ms")
PY
fi

if wants open; then
echo "-- open loop at 20000 req/s for 5 s, $CONNS kept-alive connections"
measure sl_open serverlab "$ENGINE" "$URL" -R 20000 -c "$CONNS" -t 1 -d 5s --json
report "serverlab-load -R 20000" sl_open
python3 - "$WORK/sl_open.out" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
off = (s["achieved_rate"] - s["intended_rate"]) / s["intended_rate"] * 100
print(f"    intended {s['intended_rate']:.0f}/s, achieved {s['achieved_rate']:.0f}/s ({off:+.2f}%), "
      f"completed {s['rps']:.0f}/s, latency p50 {s['latency_us']['p50']} us p99 {s['latency_us']['p99']} us, "
      f"lag p99 {s['lag_us']['p99']} us")
PY
fi

if wants sequential; then
echo "-- sequential connections, seed 000 Test 1 ($LATENCY_ROUNDS paired rounds; load average $(cut -d' ' -f1-3 /proc/loadavg))"
for _ in $(seq "$LATENCY_ROUNDS"); do
  latency_round sl_seq --sequential -n "$SEQUENTIAL" --close client
  latency_round sl_seq_spin --sequential -n "$SEQUENTIAL" --close client --wait spin
  latency_round sl_seq_ring --sequential -n "$SEQUENTIAL" --close client --io io_uring
  latency_round sl_seq_ring_spin --sequential -n "$SEQUENTIAL" --close client --io io_uring --wait spin
  latency_round sl_seq_server --sequential -n "$SEQUENTIAL"
  measure httperf_seq httperf httperf --hog --server 127.0.0.1 --port "$PORT" --uri /perf --num-conns "$SEQUENTIAL"
done
report "serverlab-load --sequential --close client" sl_seq
report "  the same with --wait spin" sl_seq_spin
report "  the same with --io io_uring" sl_seq_ring
report "  the same with --io io_uring --wait spin" sl_seq_ring_spin
report "  the same with --close server" sl_seq_server
report "httperf --num-conns $SEQUENTIAL" httperf_seq
ratios sl_seq httperf_seq; waits sl_seq; ratios sl_seq_spin httperf_seq; ratios sl_seq_ring httperf_seq
ratios sl_seq_ring_spin httperf_seq; ratios sl_seq_server httperf_seq
echo "    (--close client closes each connection once its answer is complete, as httperf does;"
echo "     --close server waits for nginx's close before the next connection)"
echo "    target: sequential >= 0.9x httperf's rate"
fi

if wants latency; then
echo "-- latency-bound: one connection at a time ($LATENCY_ROUNDS paired rounds; load average $(cut -d' ' -f1-3 /proc/loadavg))"
for _ in $(seq "$LATENCY_ROUNDS"); do
  latency_round sl_c1nc -c 1 -d "${LATENCY_DURATION}s" --new-connection
  latency_round sl_c1nc_spin -c 1 -d "${LATENCY_DURATION}s" --new-connection --wait spin
  measure ab_c1nc ab ab -c 1 -t "$LATENCY_DURATION" -n 100000000 "$URL"
  latency_round sl_c1ka -c 1 -d "${LATENCY_DURATION}s"
  latency_round sl_c1ka_spin -c 1 -d "${LATENCY_DURATION}s" --wait spin
  measure wrk_c1ka wrk wrk -t1 -c1 -d "${LATENCY_DURATION}s" --latency "$URL"
done
report "serverlab-load -c 1 --new-connection" sl_c1nc
report "  the same with --wait spin" sl_c1nc_spin
report "ab -c 1" ab_c1nc
report "serverlab-load -c 1 (keep-alive)" sl_c1ka
report "  the same with --wait spin" sl_c1ka_spin
report "wrk -c 1" wrk_c1ka
ratios sl_c1nc ab_c1nc; waits sl_c1nc; ratios sl_c1nc_spin ab_c1nc
ratios sl_c1ka wrk_c1ka; waits sl_c1ka; ratios sl_c1ka_spin wrk_c1ka
echo "    (auto spins only on a CPU of its own: pinned, nobody else pinned there, idle before the run;"
echo "     the --wait spin rows show what spinning buys when auto declines on a busy machine)"
echo "    targets: -c 1 new connection >= 1.1x ab's rate; -c 1 keep-alive p50 <= 1.05x wrk's"
fi

echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
