#!/usr/bin/env bash
# Starts one Java contestant in the foreground:
#   run.sh MODULE MIN_JAVA XMX XSS [--gc-log PATH] [server args...]
# (-Xmx/-Xss are the seed 004 §4.1.1 tunables). --gc-log PATH (the manifest's {signals_file})
# turns on the JVM's unified GC logging into PATH: each pause with the heap before and after,
# stamped in UTC, read by serverlab after the test. The JVM replaces this shell, so SIGTERM
# reaches it directly.
set -euo pipefail
cd "$(dirname "$0")"
source ./jvm.sh
module=$1 minimum=$2 xmx=$3 xss=$4
shift 4
gc_log=
if [[ ${1:-} == --gc-log ]]; then
    gc_log=$2
    shift 2
fi
home=$(jdk_home "$minimum") || { echo "$module: needs Java $minimum or newer" >&2; exit 1; }
jvm_options=(-Xmx"$xmx" -Xss"$xss" -XX:+ExitOnOutOfMemoryError)
# Spec §12: a TLS renegotiation started by the client is refused (JSSE accepts it in TLS 1.2
# unless told; it lets a client make the server pay for handshakes at will).
jvm_options+=(-Djdk.tls.rejectClientInitiatedRenegotiation=true)
# One file, never rotated (filecount=0): a test's whole log is read at its end.
[[ -n $gc_log ]] && jvm_options+=("-Xlog:gc*:file=$gc_log:utctime,uptime,level,tags:filecount=0")
# Netty still uses sun.misc.Unsafe for direct buffers; JDK 23+ warns about it on every start.
(( $(java_feature_version "$home") >= 23 )) && jvm_options+=(--sun-misc-unsafe-memory-access=allow)
exec "$home/bin/java" "${jvm_options[@]}" \
    -jar "$module/target/$module.jar" "$@"
