#!/usr/bin/env bash
# Builds every Java contestant with one Maven reactor build. Each contestant's manifest calls
# this: a lock makes concurrent calls wait for one build, and a tree already newer than all of
# its sources is not rebuilt.
set -euo pipefail
cd "$(dirname "$0")"
source ./jvm.sh

JARS=(tomcat-blocking/target/tomcat-blocking.jar tomcat-async/target/tomcat-async.jar
      virtual-threads/target/virtual-threads.jar netty/target/netty.jar)

# Maven leaves an unchanged jar untouched, so a stamp, not the jars, records the last build.
STAMP=target/build.stamp

up_to_date() {
    local jar
    [[ -f $STAMP ]] || return 1
    for jar in "${JARS[@]}"; do
        [[ -f $jar ]] || return 1
    done
    # Any source or pom newer than the last successful build means a rebuild.
    # The gRPC proto (spec §16) is generated into grpc-service and netty at build time.
    [[ -z $(find pom.xml ./*/pom.xml ./*/src ../../spec/grpc -newer "$STAMP" -print -quit) ]]
}

exec 9>"${TMPDIR:-/tmp}/serverlab-java-build.lock"
flock 9
if up_to_date; then
    exit 0
fi
JAVA_HOME=$(jdk_home 21) || { echo "build: needs a JDK 21 or newer (virtual-threads module)" >&2; exit 1; }
export JAVA_HOME
mkdir -p "$(dirname "$STAMP")"
# Offline first: after the first build every artifact is in the local repository. Its output
# is kept aside; the online retry shows any real error again.
mvn -q -B -Dstyle.color=never -o package >target/offline-build.log 2>&1 || mvn -q -B -Dstyle.color=never package
touch "$STAMP"
