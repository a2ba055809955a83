#!/usr/bin/env bash
# Starts one Java contestant in the foreground: run.sh MODULE MIN_JAVA XMX XSS [server args...]
# (-Xmx/-Xss are the seed 004 §4.1.1 tunables). The JVM replaces this shell, so SIGTERM
# reaches it directly.
set -euo pipefail
cd "$(dirname "$0")"
source ./jvm.sh
module=$1 minimum=$2 xmx=$3 xss=$4
shift 4
home=$(jdk_home "$minimum") || { echo "$module: needs Java $minimum or newer" >&2; exit 1; }
jvm_options=(-Xmx"$xmx" -Xss"$xss" -XX:+ExitOnOutOfMemoryError)
# Netty still uses sun.misc.Unsafe for direct buffers; JDK 23+ warns about it on every start.
(( $(java_feature_version "$home") >= 23 )) && jvm_options+=(--sun-misc-unsafe-memory-access=allow)
exec "$home/bin/java" "${jvm_options[@]}" \
    -jar "$module/target/$module.jar" "$@"
