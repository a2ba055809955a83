#!/bin/sh
# Writes rsyslog.conf for this run into the workdir and runs rsyslogd in the foreground.
# Usage: start.sh SYSLOG_PORT WORKDIR MAX_SESSIONS
set -eu
syslog_port=$1 workdir=$2 max_sessions=$3
here=$(cd "$(dirname "$0")" && pwd)
rsyslogd=$(command -v rsyslogd || echo /usr/sbin/rsyslogd)

mkdir -p "$workdir"
workdir=$(cd "$workdir" && pwd -P)
# The count file exists from the start, so syslog_count reads 0 before the first message.
: > "$workdir/received.count"

# Escapes a value for the right-hand side of a sed s||| command.
sed_escape() { printf '%s' "$1" | sed -e 's/[\\&|]/\\&/g'; }

sed -e "s|@SYSLOG_PORT@|$(sed_escape "$syslog_port")|g" \
    -e "s|@WORKDIR@|$(sed_escape "$workdir")|g" \
    -e "s|@MAX_SESSIONS@|$(sed_escape "$max_sessions")|g" \
    "$here/rsyslog.conf.template" > "$workdir/rsyslog.conf"

ulimit -n "$(ulimit -Hn)"
exec "$rsyslogd" -n -f "$workdir/rsyslog.conf" -i "$workdir/rsyslog.pid"
