#!/bin/sh
# Writes nginx.conf for this run into the workdir and runs nginx in the foreground.
# Usage: start.sh PORT DOCROOT WORKDIR WORKER_PROCESSES WORKER_CONNECTIONS HOST \
#                 TLS_PORT TLS_CERT TLS_KEY H2C_PORT HEADER_TIMEOUT_S H2_STREAMS
# nginx listens on 127.0.0.1 and also on HOST when it is another address: HTTP/1.1 on
# PORT, TLS with ALPN h2 or http/1.1 on TLS_PORT, HTTP/2 with prior knowledge on H2C_PORT.
set -eu
if [ $# -ne 12 ]; then
    echo "usage: start.sh PORT DOCROOT WORKDIR WORKER_PROCESSES WORKER_CONNECTIONS HOST TLS_PORT TLS_CERT TLS_KEY H2C_PORT HEADER_TIMEOUT_S H2_STREAMS" >&2
    exit 2
fi
port=$1 docroot=$2 workdir=$3 worker_processes=$4 worker_connections=$5 host=$6
tls_port=$7 tls_cert=$8 tls_key=$9 h2c_port=${10} header_timeout_s=${11} h2_streams=${12}
here=$(cd "$(dirname "$0")" && pwd)
nginx=$(command -v nginx || echo /usr/sbin/nginx)

docroot=$(cd "$docroot" && pwd -P)
mkdir -p "$workdir"
workdir=$(cd "$workdir" && pwd -P)

# Workers run as nobody by default; under root they must be able to read any docroot.
user_directive=""
[ "$(id -u)" -eq 0 ] && user_directive="user root root;"

# HOST goes into nginx.conf as it is, so it must be an address and nothing else.
case $host in
    '' | *[!0-9A-Fa-f.:]*) echo "start.sh: host '$host' is not an IP address" >&2; exit 2 ;;
esac
for value in "$port" "$tls_port" "$h2c_port" "$header_timeout_s" "$h2_streams"; do
    case $value in
        '' | *[!0-9]*) echo "start.sh: '$value' is not a number" >&2; exit 2 ;;
    esac
done
# The key and certificate paths go into nginx.conf too: no character that ends a directive.
for value in "$tls_cert" "$tls_key"; do
    case $value in
        *[\;\"\'\{\}\ \$]* | '') echo "start.sh: path '$value' cannot go into nginx.conf" >&2; exit 2 ;;
    esac
done
tls_cert=$(cd "$(dirname "$tls_cert")" && pwd -P)/$(basename "$tls_cert")
tls_key=$(cd "$(dirname "$tls_key")" && pwd -P)/$(basename "$tls_key")

# One listen line per port; "ssl http2" lets ALPN pick h2 or http/1.1, and "http2" alone
# is HTTP/2 with prior knowledge, where an HTTP/1.1 request is a broken preface.
listens_on() {
    printf 'listen %s:%s backlog=4096; listen %s:%s ssl http2 backlog=4096; listen %s:%s http2 backlog=4096;' \
        "$1" "$port" "$1" "$tls_port" "$1" "$h2c_port"
}
listen=$(listens_on 127.0.0.1)
if [ "$host" != 127.0.0.1 ]; then
    case $host in *:*) host="[$host]" ;; esac  # an IPv6 address
    listen="$listen $(listens_on "$host")"
fi

# Escapes a value for the right-hand side of a sed s||| command.
sed_escape() { printf '%s' "$1" | sed -e 's/[\\&|]/\\&/g'; }

sed -e "s|@LISTEN@|$(sed_escape "$listen")|g" \
    -e "s|@DOCROOT@|$(sed_escape "$docroot")|g" \
    -e "s|@WORKDIR@|$(sed_escape "$workdir")|g" \
    -e "s|@WORKER_PROCESSES@|$(sed_escape "$worker_processes")|g" \
    -e "s|@WORKER_CONNECTIONS@|$(sed_escape "$worker_connections")|g" \
    -e "s|@TLS_CERT@|$(sed_escape "$tls_cert")|g" \
    -e "s|@TLS_KEY@|$(sed_escape "$tls_key")|g" \
    -e "s|@USER_DIRECTIVE@|$user_directive|g" \
    -e "s|@HEADER_TIMEOUT_S@|$header_timeout_s|g" \
    -e "s|@H2_STREAMS@|$h2_streams|g" \
    "$here/nginx.conf.template" > "$workdir/nginx.conf"

# 20,000 concurrent clients need descriptors: take the hard limit, which workers inherit.
ulimit -n "$(ulimit -Hn)"
exec "$nginx" -p "$workdir" -c "$workdir/nginx.conf" -e stderr
