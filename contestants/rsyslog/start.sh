#!/bin/sh
# Writes rsyslog.conf for this run into the workdir and runs rsyslogd in the foreground.
# Usage: start.sh SYSLOG_PORT WORKDIR MAX_SESSIONS [HOST [SYSLOG_TLS_PORT TLS_CERT TLS_KEY]]
# rsyslogd listens on 127.0.0.1 and also on HOST when it is another address; with a
# SYSLOG_TLS_PORT it takes RFC 5425 syslog over TLS there too (spec §15).
set -eu
syslog_port=$1 workdir=$2 max_sessions=$3 host=${4:-127.0.0.1}
syslog_tls_port=${5:-} tls_cert=${6:-} tls_key=${7:-}
here=$(cd "$(dirname "$0")" && pwd)
rsyslogd=$(command -v rsyslogd || echo /usr/sbin/rsyslogd)

mkdir -p "$workdir"
workdir=$(cd "$workdir" && pwd -P)
# The count file exists from the start, so syslog_count reads 0 before the first message.
: > "$workdir/received.count"

# HOST goes into rsyslog.conf as it is, so it must be an address and nothing else.
case $host in
    '' | *[!0-9A-Fa-f.:]*) echo "start.sh: host '$host' is not an IP address" >&2; exit 2 ;;
esac
addresses=127.0.0.1
[ "$host" = 127.0.0.1 ] || addresses="$addresses $host"

# Escapes a value for the right-hand side of a sed s||| command.
sed_escape() { printf '%s' "$1" | sed -e 's/[\\&|]/\\&/g'; }

# Fills in the @NAME@ fields of a template.
render() {
    sed -e "s|@SYSLOG_PORT@|$(sed_escape "$syslog_port")|g" \
        -e "s|@WORKDIR@|$(sed_escape "$workdir")|g" \
        -e "s|@MAX_SESSIONS@|$(sed_escape "$max_sessions")|g" \
        -e "s|@ADDRESS@|$(sed_escape "${address:-}")|g" \
        -e "s|@SYSLOG_TLS_PORT@|$(sed_escape "$syslog_tls_port")|g" \
        -e "s|@TLS_CERT@|$(sed_escape "$tls_cert")|g" \
        -e "s|@TLS_KEY@|$(sed_escape "$tls_key")|g" \
        "$here/$1"
}

{
    render rsyslog.conf.template
    for address in $addresses; do
        render inputs.conf.template
        [ -z "$syslog_tls_port" ] || render tls-inputs.conf.template
    done
} > "$workdir/rsyslog.conf"

ulimit -n "$(ulimit -Hn)"
exec "$rsyslogd" -n -f "$workdir/rsyslog.conf" -i "$workdir/rsyslog.pid"
