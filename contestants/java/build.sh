#!/usr/bin/env bash
# Builds every Java contestant with one Maven reactor build. Each contestant's manifest calls
# this: a lock makes concurrent calls wait for one build, and a tree already newer than all of
# its sources is not rebuilt.
set -euo pipefail
cd "$(dirname "$0")"
source ./jvm.sh

JARS=(tomcat-blocking/target/tomcat-blocking.jar tomcat-async/target/tomcat-async.jar
      virtual-threads/target/virtual-threads.jar netty/target/netty.jar)

up_to_date() {
    local jar
    for jar in "${JARS[@]}"; do
        [[ -f $jar ]] || return 1
        # Any source or pom newer than this jar means a rebuild.
        [[ -z $(find pom.xml ./*/pom.xml ./*/src -newer "$jar" -print -quit) ]] || return 1
    done
}

exec 9>"${TMPDIR:-/tmp}/serverlab-java-build.lock"
flock 9
if up_to_date; then
    exit 0
fi
JAVA_HOME=$(jdk_home 21) || { echo "build: needs a JDK 21 or newer (virtual-threads module)" >&2; exit 1; }
export JAVA_HOME
# Offline first: after the first build every artifact is in the local repository.
mvn -q -B -o package 2>/dev/null || mvn -q -B package
