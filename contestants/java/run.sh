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
exec "$home/bin/java" -Xmx"$xmx" -Xss"$xss" -XX:+ExitOnOutOfMemoryError \
    -jar "$module/target/$module.jar" "$@"
