#!/usr/bin/env bash
# serverlab-load beside wrk, h2load and ab against nginx (one worker pinned to CPU 1, the
# 84-byte /perf body), every generator pinned to CPU 0, side by side in one run.
# Prints requests/s, generator CPU microseconds per request, and the ratios to wrk; then the
# seed 003 test (-c 10000 -n 20000 --new-connection), an open loop at 20,000 req/s, and the
# latency-bound comparisons: sequential connections against httperf, -c 1 new connection per
# request against ab, -c 1 keep-alive p50 against wrk (LATENCY_ROUNDS paired rounds).
#
# Usage: bench/engine-vs-peers.sh   (DURATION=10 ROUNDS=3 CONNS=100 LATENCY_ROUNDS=5
# LATENCY_DURATION=3 SEQUENTIAL=5000 by default, ENGINE=path for a built binary; the machine is
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
GEN_CPU="${GEN_CPU:-0}"
SERVER_CPU="${SERVER_CPU:-1}"
# ENGINE=path measures that build instead of building this tree's (a before/after pair).
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

PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p "$WORK/tmp"
cat > "$WORK/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/error.log error;
worker_rlimit_nofile 70000;
events { worker_connections 30000; multi_accept on; }
http {
  access_log off;
  client_body_temp_path $WORK/tmp; proxy_temp_path $WORK/tmp; fastcgi_temp_path $WORK/tmp;
  uwsgi_temp_path $WORK/tmp; scgi_temp_path $WORK/tmp;
  keepalive_requests 100000000;
  keepalive_timeout 60s;
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
for _ in $(seq 50); do
  [[ "$(curl -s "$URL" 2>/dev/null || true)" == "$BODY" ]] && break
  sleep 0.1
done
[[ "$(curl -s "$URL")" == "$BODY" ]] || { echo "bench: nginx did not come up" >&2; cat "$WORK/error.log" >&2; exit 1; }
[[ "$(curl -s "$URL" | wc -c)" == 84 ]] || { echo "bench: /perf is not 84 bytes" >&2; exit 1; }

# run NAME CMD... : runs pinned to the generator CPU; leaves output in $WORK/NAME.out and
# "user sys rc max_rss_kib" in $WORK/NAME.cpu
run() {
  local name="$1"; shift
  ulimit -n "$(ulimit -Hn)"
  taskset -c "$GEN_CPU" python3 "$HERE/measure.py" "$WORK/$name.cpu" -- "$@" >"$WORK/$name.out" 2>&1 || true
  sleep 1
}

# summary NAME EXPR : EXPR of serverlab-load's summary `s` (the last line of its output)
summary() {
  python3 -c 'import json,sys; s=json.loads(open(sys.argv[1]).read().splitlines()[-1]); print(eval(sys.argv[2]))' "$WORK/$1.out" "$2"
}
# requests NAME TOOL : completed requests parsed from each tool's own report
requests() {
  local f="$WORK/$1.out"
  case "$2" in
    serverlab) summary "$1" 's["answered"]' ;;   # answered attempts, as wrk counts
    wrk) awk '/requests in/ {print $1}' "$f" ;;
    h2load) awk '/^requests:/ {print $8}' "$f" ;;   # "requests: N total, N started, N done, N succeeded"
    ab) awk '/^Complete requests:/ {print $3}' "$f" ;;
    httperf) awk '/^Total: connections/ {print $3}' "$f" ;;   # one request per connection
  esac
}
failures() {
  local f="$WORK/$1.out"
  case "$2" in
    serverlab) summary "$1" 'sum(s["errors"].values())' ;;
    wrk) awk '/Non-2xx|Socket errors/ {gsub(",","",$0); for(i=1;i<=NF;i++) if ($i ~ /^[0-9]+$/) n+=$i} END {print n+0}' "$f" ;;
    h2load) awk '/^requests:/ {print $10+$12}' "$f" ;;
    ab) awk '/^Failed requests:/ {print $3}' "$f" ;;
    httperf) awk '/^Errors: total/ {print $3}' "$f" ;;
  esac
}
seconds() {
  local f="$WORK/$1.out"
  case "$2" in
    serverlab) summary "$1" 's["duration_s"]' ;;
    wrk) awk '/requests in/ {sub("s,","",$4); print $4}' "$f" ;;
    h2load) awk '/^finished in/ {sub("s,","",$3); print $3}' "$f" ;;
    ab) awk '/^Time taken for tests:/ {print $5}' "$f" ;;
    httperf) awk '/^Total: connections/ {print $(NF-1)}' "$f" ;;   # "... test-duration 0.612 s"
  esac
}
# p50 NAME TOOL : the median latency in microseconds (0 where the tool does not say)
p50() {
  local f="$WORK/$1.out"
  case "$2" in
    serverlab) summary "$1" 's["latency_us"]["p50"]' ;;
    wrk) awk '$1 == "50%" {v=$2; u=1; if (v ~ /us$/) u=1; else if (v ~ /ms$/) u=1000; else if (v ~ /s$/) u=1000000; sub(/[a-z]+$/, "", v); print v*u}' "$f" ;;
    *) echo 0 ;;
  esac
}

# record NAME TOOL : appends "rps cpu_us_per_request requests errors p50_us" of the last run
record() {
  local name="$1" tool="$2" n s f m user sys rc
  n="$(requests "$name" "$tool")"; s="$(seconds "$name" "$tool")"; f="$(failures "$name" "$tool")"
  m="$(p50 "$name" "$tool" 2>/dev/null || echo 0)"
  read -r user sys rc _ < "$WORK/$name.cpu"
  if [[ -z "$n" || -z "$s" || "$n" == 0 ]]; then
    echo "bench: $name gave no result (exit $rc):" >&2
    tail -n 3 "$WORK/$name.out" | sed 's/^/    /' >&2
    return 0
  fi
  python3 -c "print($n / $s, ($user + $sys) * 1e6 / $n, $n, ${f:-0}, ${m:-0})" >> "$WORK/$name.results"
}

# measure NAME TOOL CMD... : one run, recorded
measure() {
  local name="$1" tool="$2"; shift 2
  run "$name" "$@"
  record "$name" "$tool"
}

# backend NAME : the socket loop serverlab-load reported for its last run
backend() {
  summary "$1" 's.get("io_backend", "?")' 2>/dev/null || echo "?"
}
# report LABEL NAME : medians over the rounds (requests and errors summed)
report() {
  local label="$1" name="$2" line
  if [[ ! -s "$WORK/$name.results" ]]; then
    printf '%-34s %12s\n' "$label" "no result"
    return
  fi
  line="$(python3 - "$WORK/$name.results" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
rps = statistics.median(r[0] for r in rows)
cpu = statistics.median(r[1] for r in rows)
print(rps, cpu, int(sum(r[2] for r in rows)), int(sum(r[3] for r in rows)), len(rows))
PY
)"
  read -r rps cpu n f rounds <<<"$line"
  printf '%-34s %12.0f %10.2f %10s %8s %6s\n' "$label" "$rps" "$cpu" "$n" "$f" "$rounds"
}
# ratios NAME BASE : each round's figures over the base's of the same round (the two ran
# back to back, so a drift of the shared machine hits both), median and range over rounds
ratios() {
  local name="$1" base="$2"
  [[ -s "$WORK/$name.results" && -s "$WORK/$base.results" ]] || return 0
  python3 - "$WORK/$name.results" "$WORK/$base.results" "$name" "$base" <<'PY'
import statistics, sys
def rows(path):
    return [list(map(float, l.split())) for l in open(path) if l.strip()]
pairs = list(zip(rows(sys.argv[1]), rows(sys.argv[2])))
def show(column):
    r = [a[column] / b[column] for a, b in pairs]
    return f"{statistics.median(r):.2f}x [{min(r):.2f}-{max(r):.2f}]"
latency = ""
if all(len(a) > 4 and len(b) > 4 and a[4] > 0 and b[4] > 0 for a, b in pairs):
    latency = f", p50 {show(4)} {sys.argv[4]}"
print(f"    {sys.argv[3]}: rps {show(0)} {sys.argv[4]}, CPU/request {show(1)} {sys.argv[4]}{latency}"
      f" (median [range] of {len(pairs)} paired rounds)")
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

echo "-- seed 003: -c 10000 -n 20000, new connection per request"
measure sl_10k serverlab "$ENGINE" "$URL" -c 10000 -n 20000 -t 1 --new-connection --timeout 30s --source 127.0.0.2-127.0.0.250 --json
measure ab_10k ab ab -c 10000 -n 20000 -s 30 "$URL"
report "serverlab-load -c 10000" sl_10k
report "ab -c 10000" ab_10k
python3 - "$WORK/sl_10k.out" <<'PY'
import json, sys
s = json.loads(open(sys.argv[1]).read().splitlines()[-1])
print(f"    serverlab-load: {s['requests']} requests, errors {s['errors']}, valid={s['valid']}, p99 {s['latency_us']['p99']/1000:.1f} ms")
PY

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

echo "-- latency-bound: one connection at a time ($LATENCY_ROUNDS paired rounds; load average $(cut -d' ' -f1-3 /proc/loadavg))"
for _ in $(seq "$LATENCY_ROUNDS"); do
  latency_round sl_seq --sequential -n "$SEQUENTIAL"
  latency_round sl_seq_spin --sequential -n "$SEQUENTIAL" --wait spin
  measure httperf_seq httperf httperf --hog --server 127.0.0.1 --port "$PORT" --uri /perf --num-conns "$SEQUENTIAL"
  latency_round sl_c1nc -c 1 -d "${LATENCY_DURATION}s" --new-connection
  latency_round sl_c1nc_spin -c 1 -d "${LATENCY_DURATION}s" --new-connection --wait spin
  measure ab_c1nc ab ab -c 1 -t "$LATENCY_DURATION" -n 100000000 "$URL"
  latency_round sl_c1ka -c 1 -d "${LATENCY_DURATION}s"
  latency_round sl_c1ka_spin -c 1 -d "${LATENCY_DURATION}s" --wait spin
  measure wrk_c1ka wrk wrk -t1 -c1 -d "${LATENCY_DURATION}s" --latency "$URL"
done
report "serverlab-load --sequential" sl_seq
report "  the same with --wait spin" sl_seq_spin
report "httperf --num-conns $SEQUENTIAL" httperf_seq
report "serverlab-load -c 1 --new-connection" sl_c1nc
report "  the same with --wait spin" sl_c1nc_spin
report "ab -c 1" ab_c1nc
report "serverlab-load -c 1 (keep-alive)" sl_c1ka
report "  the same with --wait spin" sl_c1ka_spin
report "wrk -c 1" wrk_c1ka
ratios sl_seq httperf_seq; waits sl_seq; ratios sl_seq_spin httperf_seq
ratios sl_c1nc ab_c1nc; waits sl_c1nc; ratios sl_c1nc_spin ab_c1nc
ratios sl_c1ka wrk_c1ka; waits sl_c1ka; ratios sl_c1ka_spin wrk_c1ka
echo "    (auto spins only on a CPU of its own: pinned, nobody else pinned there, idle before the run;"
echo "     the --wait spin rows show what spinning buys when auto declines on a busy machine)"
echo "    targets: sequential >= 0.9x httperf's rate; -c 1 new connection >= 1.1x ab's rate; -c 1 keep-alive p50 <= 1.05x wrk's"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
