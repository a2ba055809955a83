#!/bin/sh
# Writes nginx.conf for this run into the workdir and runs nginx in the foreground.
# Usage: start.sh PORT DOCROOT WORKDIR WORKER_PROCESSES WORKER_CONNECTIONS [HOST]
# nginx listens on 127.0.0.1 and also on HOST when it is another address.
set -eu
port=$1 docroot=$2 workdir=$3 worker_processes=$4 worker_connections=$5 host=${6:-127.0.0.1}
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
listen="listen 127.0.0.1:$port backlog=4096;"
if [ "$host" != 127.0.0.1 ]; then
    case $host in *:*) host="[$host]" ;; esac  # an IPv6 address
    listen="$listen listen $host:$port backlog=4096;"
fi

# Escapes a value for the right-hand side of a sed s||| command.
sed_escape() { printf '%s' "$1" | sed -e 's/[\\&|]/\\&/g'; }

sed -e "s|@LISTEN@|$(sed_escape "$listen")|g" \
    -e "s|@DOCROOT@|$(sed_escape "$docroot")|g" \
    -e "s|@WORKDIR@|$(sed_escape "$workdir")|g" \
    -e "s|@WORKER_PROCESSES@|$(sed_escape "$worker_processes")|g" \
    -e "s|@WORKER_CONNECTIONS@|$(sed_escape "$worker_connections")|g" \
    -e "s|@USER_DIRECTIVE@|$user_directive|g" \
    "$here/nginx.conf.template" > "$workdir/nginx.conf"

# 20,000 concurrent clients need descriptors: take the hard limit, which workers inherit.
ulimit -n "$(ulimit -Hn)"
exec "$nginx" -p "$workdir" -c "$workdir/nginx.conf" -e stderr
