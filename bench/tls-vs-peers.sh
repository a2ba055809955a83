#!/usr/bin/env bash
# serverlab-load beside its peers over TLS and HTTP/2 (issue 22, item 6), against nginx (one
# worker pinned to CPU 1, the 84-byte /perf body), every generator alone on CPU 0:
#   - HTTPS keep-alive, CONNS connections: CPU per request against wrk's (target <= 0.8x);
#   - a new HTTPS connection per request, CONNS concurrent, full handshakes (nginx keeps no
#     session cache and sends no tickets; the engine runs --tls-resume off): CPU per
#     connection against ab's (target <= 0.8x), with nginx's worker CPU beside it;
#   - h2 over TLS and h2c, H2_CONNS connections x STREAMS streams: CPU per request against
#     h2load's at the same -m (target <= 0.8x);
#   - the engine's full handshakes per second per core beside the client-side limit that
#     `openssl speed` gives on CPU 0 (X25519 and ECDSA P-256), and the fraction reached.
# A throwaway CA and an ECDSA P-256 server key are made per run with openssl in the run's
# temporary folder (mode 0600), which is deleted on exit, Ctrl-C included.
#
# Usage: bench/tls-vs-peers.sh   (DURATION=5 ROUNDS=3 CONNS=100 H2_CONNS=10 STREAMS=10
# SPEED_SECONDS=2 by default; ENGINE=path measures that build instead of building one). Each
# workload runs ROUNDS paired rounds, the engine first in odd rounds and last in even ones;
# tables show medians, ratios the median [range] of the per-round ratios.
# Needs: nginx-light wrk nghttp2-client apache2-utils openssl curl (make deps), cargo.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
DURATION="${DURATION:-5}"
ROUNDS="${ROUNDS:-3}"
CONNS="${CONNS:-100}"
H2_CONNS="${H2_CONNS:-10}"
STREAMS="${STREAMS:-10}"
SPEED_SECONDS="${SPEED_SECONDS:-2}"
GEN_CPU="${GEN_CPU:-0}"
SERVER_CPU="${SERVER_CPU:-1}"
BODY='serverlab GET /perf: one fixed body of exactly eighty-four bytes, for every server.'

for tool in nginx wrk h2load ab openssl curl taskset python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is missing (make deps installs it)" >&2; exit 1; }
done
if [[ -z "${ENGINE:-}" ]]; then
  ENGINE="$ROOT/engine/target/release/serverlab-load"
  (cd "$ROOT/engine" && cargo build --release --locked --quiet)
fi

WORK="$(mktemp -d /tmp/serverlab-tlsbench.XXXXXX)"
NGINX_PID=""
cleanup() {
  if [[ -n "$NGINX_PID" ]]; then kill "$NGINX_PID" 2>/dev/null || true; wait "$NGINX_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
# The EXIT trap does the cleaning; a signal only ends the script (a trap on INT alone would
# let it carry on after the cleanup with nginx and the keys gone).
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
# shellcheck source=bench/peers-lib.sh
source "$HERE/peers-lib.sh"

# make_keys : a throwaway CA and a server certificate for IP 127.0.0.1, ECDSA P-256, signed
# by the CA; nothing but the CA's certificate is needed after this (its key is removed)
make_keys() {
  local k="$WORK/keys"
  (umask 077 && mkdir "$k")
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 -days 1 \
    -subj "/CN=serverlab tls-vs-peers throwaway CA" -keyout "$k/ca.key" -out "$k/ca.pem" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -sha256 \
    -subj "/CN=127.0.0.1" -keyout "$k/server.key" -out "$k/server.csr" 2>/dev/null
  printf '%s\n' "subjectAltName=IP:127.0.0.1" "basicConstraints=critical,CA:FALSE" \
    "keyUsage=critical,digitalSignature" "extendedKeyUsage=serverAuth" > "$k/server.ext"
  openssl x509 -req -in "$k/server.csr" -CA "$k/ca.pem" -CAkey "$k/ca.key" -CAcreateserial \
    -days 1 -sha256 -extfile "$k/server.ext" -out "$k/server.pem" 2>/dev/null
  rm -f "$k/ca.key" "$k/server.csr" "$k/ca.srl"
  chmod 600 "$k"/*
  CA="$k/ca.pem"
}

# write_conf : one nginx worker; cleartext and TLS HTTP/1.1, h2 over TLS, h2c, and a probe
# port that logs what each TLS client negotiated (the measured ports log nothing)
write_conf() {
  P_PLAIN="$(free_port)"; P_TLS="$(free_port)"; P_H2="$(free_port)"; P_H2C="$(free_port)"; P_PROBE="$(free_port)"
  local perf="location = /perf { default_type text/plain; return 200 \"$BODY\\n\"; }"
  { nginx_conf_head; cat <<CONF; } > "$WORK/nginx.conf"
  ssl_certificate $WORK/keys/server.pem;
  ssl_certificate_key $WORK/keys/server.key;
  ssl_protocols TLSv1.2 TLSv1.3;
  ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305;
  ssl_session_cache off;
  ssl_session_tickets off;
  log_format negotiated '\$ssl_protocol \$ssl_curve \$ssl_cipher \$server_protocol resumed=\$ssl_session_reused';
  server { listen 127.0.0.1:$P_PLAIN backlog=65535; listen 127.0.0.1:$P_TLS ssl backlog=65535; $perf }
  server { listen 127.0.0.1:$P_H2 ssl http2 backlog=65535; $perf }
  server { listen 127.0.0.1:$P_H2C http2 backlog=65535; $perf }
  server { listen 127.0.0.1:$P_PROBE ssl http2; access_log $WORK/probe.log negotiated; $perf }
}
CONF
}

# start_nginx : master and worker on the server CPU; sets NGINX_PID and WORKER
start_nginx() {
  taskset -c "$SERVER_CPU" nginx -e "$WORK/error.log" -p "$WORK" -c "$WORK/nginx.conf" &
  NGINX_PID=$!
  await_body "http://127.0.0.1:$P_PLAIN/perf" "$BODY"
  await_body "https://127.0.0.1:$P_TLS/perf" "$BODY" --cacert "$CA"
  await_body "https://127.0.0.1:$P_H2/perf" "$BODY" --cacert "$CA" --http2
  await_body "http://127.0.0.1:$P_H2C/perf" "$BODY" --http2-prior-knowledge
  WORKER="$(pgrep -P "$NGINX_PID" | head -n 1)"
  [[ -n "$WORKER" ]] || { echo "bench: nginx has no worker" >&2; exit 1; }
}

# probe LABEL CMD... : a short run of CMD against the probe port, then what its connections
# negotiated, from nginx's log of the probe port (version, group, cipher, protocol, resumed)
probe() {
  local label="$1"; shift
  : > "$WORK/probe.log"
  taskset -c "$GEN_CPU" "$@" >"$WORK/probe.out" 2>&1 || true
  sleep 0.2   # nginx writes the line after the answer went out
  printf '    %-40s %s\n' "$label" "$(sort "$WORK/probe.log" | uniq -c | sed 's/^ *//' | paste -sd ';' -)"
}

# server_clock : the nginx worker's CPU time and its time spent runnable but waiting for a
# CPU, both in seconds so far (/proc/PID/stat's user + system ticks; /proc/PID/schedstat)
server_clock() {
  local ticks delay
  ticks="$(awk '{print $14 + $15}' "/proc/$WORKER/stat" 2>/dev/null || echo 0)"
  delay="$(awk '{print $2}' "/proc/$WORKER/schedstat" 2>/dev/null || echo 0)"
  echo "$ticks / $(getconf CLK_TCK), $delay / 1e9"
}
# measure_busy NAME TOOL CMD... : measure (peers-lib.sh), plus the nginx worker's CPU and its
# wait for a CPU over the tool's own run time, as shares of that time, appended to NAME.busy
# (busy + waiting near 100 % means nginx was the limit: it wanted a whole core)
measure_busy() {
  local name="$1" tool="$2" before after s
  before="$(server_clock)"
  measure "$@"
  after="$(server_clock)"
  s="$(seconds "$name" "$tool" 2>/dev/null)" || s=""
  [[ -n "$s" ]] && python3 -c "b, a = ($before), ($after); print((a[0] - b[0]) / $s, (a[1] - b[1]) / $s)" >> "$WORK/$name.busy"
  return 0
}
# busy LABEL NAME... : the nginx worker's busy and waiting shares during each generator's runs
busy() {
  local label="$1"; shift
  python3 - "$WORK" "$label" "$@" <<'PY'
import os, statistics, sys
work, label, names = sys.argv[1], sys.argv[2], sys.argv[3:]
def share(rows, column):
    v = [100 * r[column] for r in rows]
    return f"{statistics.median(v):.0f}% [{min(v):.0f}-{max(v):.0f}]"
parts = []
for name in names:
    path = os.path.join(work, name + ".busy")
    rows = [list(map(float, l.split())) for l in open(path)] if os.path.exists(path) else []
    if rows:
        parts.append(f"{name} {share(rows, 0)} busy, {share(rows, 1)} waiting")
print(f"    nginx worker on CPU {label} (/proc stat and schedstat, median [range]): " + "; ".join(parts))
PY
}

# in_turn ROUND FN... : runs the FNs in order in odd rounds and in reverse in even ones, so
# that neither generator always runs first after the other
in_turn() {
  local round="$1" i; shift
  local fns=("$@")
  if (( round % 2 == 1 )); then
    for i in "${!fns[@]}"; do "${fns[$i]}"; done
  else
    for (( i=${#fns[@]}-1; i>=0; i-- )); do "${fns[$i]}"; done
  fi
}

# The runs, one function each so that in_turn can order them. Every generator gets one
# thread (-t 1, h2load -t1) and the same connections; the engine trusts only the run's CA.
ka_engine() { measure_busy sl_ka serverlab "$ENGINE" "$TLS_URL" -c "$CONNS" -t 1 -d "${DURATION}s" "${TRUST[@]}" --json; }
ka_wrk() { measure_busy wrk_ka wrk wrk -t1 -c "$CONNS" -d "${DURATION}s" "$TLS_URL"; }
hs_engine() { measure_busy sl_hs serverlab "$ENGINE" "$TLS_URL" "${NEW[@]}" --tls-resume off "${TRUST[@]}" --json; }
hs_engine_insecure() { measure_busy sl_hs_any serverlab "$ENGINE" "$TLS_URL" "${NEW[@]}" --tls-resume off --insecure --json; }
hs_ab() { measure_busy ab_hs ab ab -c "$CONNS" -t "$DURATION" -n 100000000 "$TLS_URL"; }
nc_engine() { measure_busy sl_nc serverlab "$ENGINE" "$PLAIN_URL" "${NEW[@]}" --json; }
nc_ab() { measure_busy ab_nc ab ab -c "$CONNS" -t "$DURATION" -n 100000000 "$PLAIN_URL"; }
h2_engine() { measure_busy sl_h2 serverlab "$ENGINE" "$H2_URL" --h2 "${MUX[@]}" "${TRUST[@]}" --json; }
h2_h2load() { measure_busy h2load_h2 h2load h2load -t1 -c "$H2_CONNS" -m "$STREAMS" -D "$DURATION" "$H2_URL"; }
h2c_engine() { measure_busy sl_h2c serverlab "$ENGINE" "$H2C_URL" --h2c "${MUX[@]}" --json; }
h2c_h2load() { measure_busy h2load_h2c h2load h2load -t1 -c "$H2_CONNS" -m "$STREAMS" -D "$DURATION" "$H2C_URL"; }

# rounds FN... : ROUNDS paired rounds of the FNs, in turn
rounds() {
  local r
  for r in $(seq "$ROUNDS"); do in_turn "$r" "$@"; done
}

# negotiated : what each TLS client agreed with nginx, by a short run of each on the probe port
negotiated() {
  local url="https://127.0.0.1:$P_PROBE/perf"
  echo "-- what each TLS client negotiated (nginx's log of a probe port: count version group cipher protocol resumed)"
  probe "serverlab-load --new-connection" "$ENGINE" "$url" -c 2 -n 20 -t 1 --new-connection --tls-resume off "${TRUST[@]}"
  probe "serverlab-load --new-connection --insecure" "$ENGINE" "$url" -c 2 -n 20 -t 1 --new-connection --tls-resume off --insecure
  probe "serverlab-load --h2" "$ENGINE" "$url" -c 2 -n 20 -t 1 --h2 --streams "$STREAMS" "${TRUST[@]}"
  probe "ab" ab -c 2 -n 20 "$url"
  probe "wrk (1 s)" wrk -t1 -c2 -d1s "$url"
  probe "h2load" h2load -t1 -c 2 -m "$STREAMS" -n 20 "$url"
}

# handshakes NAME : the engine's own count of TLS handshakes in its last run of NAME
handshakes() {
  summary "$1" '"%d connections, %d handshakes (%d resumed), handshake p50 %d us p99 %d us" % (s["connections_opened"], s["tls_handshakes"], s["tls_resumed"], s["tls_handshake_us"]["p50"], s["tls_handshake_us"]["p99"])' 2>/dev/null || echo "no summary"
}

# limits : `openssl speed` on the generator CPU, and the handshakes per core each client made
limits() {
  echo "-- full handshakes per core, client side, beside what one core's crypto allows"
  taskset -c "$GEN_CPU" openssl speed -seconds "$SPEED_SECONDS" ecdsap256 ecdhx25519 > "$WORK/speed.out" 2>/dev/null
  python3 "$HERE/tls_limits.py" "$WORK" "$GEN_CPU"
}

# check_errors : a TLS mistake shows as errors, not as speed, so any error fails the bench
check_errors() {
  python3 - "$WORK" "$ROUNDS" sl_ka wrk_ka sl_hs sl_hs_any ab_hs sl_nc ab_nc sl_h2 h2load_h2 sl_h2c h2load_h2c <<'PY'
import os, sys
work, rounds, names = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
bad = []
for name in names:
    path = os.path.join(work, name + ".results")
    rows = [l.split() for l in open(path)] if os.path.exists(path) else []
    errors = sum(float(r[3]) for r in rows)
    if len(rows) != rounds or errors:
        bad.append(f"{name} ({len(rows)} of {rounds} rounds gave a result, {errors:.0f} errors)")
print("errors: none in any run" if not bad else "bench: FAILED, errors or missing results: " + "; ".join(bad))
sys.exit(1 if bad else 0)
PY
}

make_keys
write_conf
start_nginx
PLAIN_URL="http://127.0.0.1:$P_PLAIN/perf"
TLS_URL="https://127.0.0.1:$P_TLS/perf"
H2_URL="https://127.0.0.1:$P_H2/perf"
H2C_URL="http://127.0.0.1:$P_H2C/perf"
TRUST=(--tls-ca "$CA")
NEW=(-c "$CONNS" -t 1 -d "${DURATION}s" --new-connection)
MUX=(--streams "$STREAMS" -c "$H2_CONNS" -t 1 -d "${DURATION}s")

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "nginx $(nginx -v 2>&1 | sed 's/.*\///') (worker pid $WORKER) on CPU $SERVER_CPU, generators on CPU $GEN_CPU," \
  "${DURATION}s per run, $ROUNDS rounds, kernel $(uname -r), $(openssl version | cut -d' ' -f1-2);" \
  "ECDSA P-256 certificate from a throwaway CA, TLS 1.2 and 1.3, no session cache, no tickets"
negotiated
printf '%-34s %12s %10s %10s %8s %6s\n' "workload / generator" "requests/s" "CPU us/req" "requests" "errors" "rounds"
echo "(requests/s and CPU are medians over the rounds; requests and errors are totals)"

echo "-- HTTPS keep-alive, $CONNS connections"
rounds ka_engine ka_wrk
report "serverlab-load ($(backend sl_ka))" sl_ka
report "wrk" wrk_ka
ratios sl_ka wrk_ka
busy "$SERVER_CPU" sl_ka wrk_ka
echo "    target: serverlab-load CPU/request <= 0.8x wrk's"

echo "-- a new HTTPS connection per request (full handshake), $CONNS concurrent; and the same in cleartext"
rounds hs_engine hs_engine_insecure nc_engine hs_ab nc_ab
report "serverlab-load --tls-ca ($(backend sl_hs))" sl_hs
report "serverlab-load --insecure" sl_hs_any
report "ab" ab_hs
report "serverlab-load, cleartext" sl_nc
report "ab, cleartext" ab_nc
ratios sl_hs ab_hs; ratios sl_hs_any ab_hs; ratios sl_nc ab_nc
echo "    serverlab-load --tls-ca, last round: $(handshakes sl_hs)"
busy "$SERVER_CPU" sl_hs sl_hs_any ab_hs sl_nc ab_nc
echo "    target: serverlab-load CPU/connection <= 0.8x ab's (ab checks one signature, see the limits below)"

echo "-- h2 over TLS, $H2_CONNS connections x $STREAMS streams"
rounds h2_engine h2_h2load
report "serverlab-load --h2 ($(backend sl_h2))" sl_h2
report "h2load -m $STREAMS" h2load_h2
ratios sl_h2 h2load_h2
busy "$SERVER_CPU" sl_h2 h2load_h2

echo "-- h2c (prior knowledge), $H2_CONNS connections x $STREAMS streams"
rounds h2c_engine h2c_h2load
report "serverlab-load --h2c ($(backend sl_h2c))" sl_h2c
report "h2load -m $STREAMS" h2load_h2c
ratios sl_h2c h2load_h2c
busy "$SERVER_CPU" sl_h2c h2load_h2c
echo "    target: serverlab-load CPU/request <= 0.8x h2load's, h2 and h2c"

limits
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
check_errors
