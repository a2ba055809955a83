#!/bin/sh
# Writes nginx.conf for this run into the workdir and runs nginx in the foreground.
# Usage: start.sh PORT DOCROOT WORKDIR WORKER_PROCESSES WORKER_CONNECTIONS
set -eu
port=$1 docroot=$2 workdir=$3 worker_processes=$4 worker_connections=$5
here=$(cd "$(dirname "$0")" && pwd)
nginx=$(command -v nginx || echo /usr/sbin/nginx)

docroot=$(cd "$docroot" && pwd -P)
mkdir -p "$workdir"
workdir=$(cd "$workdir" && pwd -P)

# Workers run as nobody by default; under root they must be able to read any docroot.
user_directive=""
[ "$(id -u)" -eq 0 ] && user_directive="user root root;"

# Escapes a value for the right-hand side of a sed s||| command.
sed_escape() { printf '%s' "$1" | sed -e 's/[\\&|]/\\&/g'; }

sed -e "s|@PORT@|$(sed_escape "$port")|g" \
    -e "s|@DOCROOT@|$(sed_escape "$docroot")|g" \
    -e "s|@WORKDIR@|$(sed_escape "$workdir")|g" \
    -e "s|@WORKER_PROCESSES@|$(sed_escape "$worker_processes")|g" \
    -e "s|@WORKER_CONNECTIONS@|$(sed_escape "$worker_connections")|g" \
    -e "s|@USER_DIRECTIVE@|$user_directive|g" \
    "$here/nginx.conf.template" > "$workdir/nginx.conf"

# 20,000 concurrent clients need descriptors: take the hard limit, which workers inherit.
ulimit -n "$(ulimit -Hn)"
exec "$nginx" -p "$workdir" -c "$workdir/nginx.conf" -e stderr
