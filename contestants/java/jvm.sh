# Finds a JDK for the Java contestants. One JVM runs all four (Temurin 25 when the machine has
# it), so comparing them changes only the request-handling model, not the runtime.
PREFERRED_JDKS=(/usr/lib/jvm/temurin-25-jdk-amd64)

java_feature_version() {
    "$1/bin/java" -XshowSettings:properties -version 2>&1 |
        sed -n 's/^ *java\.specification\.version = //p'
}

# Prints the home of a JDK with at least the given feature version, or fails.
jdk_home() {
    local minimum=$1 home
    local candidates=("${PREFERRED_JDKS[@]}")
    [[ -n ${JAVA_HOME:-} ]] && candidates+=("$JAVA_HOME")
    candidates+=("$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")")
    for home in "${candidates[@]}"; do
        if [[ -x $home/bin/java ]] && (( $(java_feature_version "$home") >= minimum )); then
            echo "$home"
            return 0
        fi
    done
    return 1
}
