# shellcheck shell=bash
# Sourced by the benchmarks that set serverlab-load beside its peers (engine-vs-peers.sh,
# tls-vs-peers.sh): a free port, waiting for a server's body, running a generator pinned to
# GEN_CPU with its CPU from wait4() (measure.py), reading each tool's own report, and the
# medians and per-round ratios over paired rounds.
# Needs HERE (the bench folder), WORK (the run's temporary folder) and GEN_CPU set.

# free_port : a TCP port of 127.0.0.1 free at this moment
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

# await_body URL BODY [CURL_ARG...] : waits up to 5 s for URL to answer exactly BODY (84
# bytes with curl's view of it); exits the script with nginx's error log if it never does
await_body() {
  local url="$1" body="$2"; shift 2
  for _ in $(seq 50); do
    [[ "$(curl -s "$@" "$url" 2>/dev/null || true)" == "$body" ]] && break
    sleep 0.1
  done
  [[ "$(curl -s "$@" "$url")" == "$body" ]] || { echo "bench: $url did not answer /perf's body" >&2; cat "$WORK/error.log" >&2; exit 1; }
  [[ "$(curl -s "$@" "$url" | wc -c)" == 84 ]] || { echo "bench: $url is not 84 bytes" >&2; exit 1; }
}

# nginx_conf_head : the start of the nginx.conf the peer benchmarks share, up to inside the
# http block (one worker, logs, pid and temp files in WORK, keep-alive without limits); the
# caller adds its servers and the closing brace
nginx_conf_head() {
  mkdir -p "$WORK/tmp"
  cat <<CONF
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
CONF
}

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
  # A run that printed no report (a refused plan, a crash) leaves these empty, reported below.
  n="$(requests "$name" "$tool" 2>/dev/null)" || n=""
  s="$(seconds "$name" "$tool" 2>/dev/null)" || s=""
  f="$(failures "$name" "$tool" 2>/dev/null)" || f=""
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
