#!/bin/sh
# Prints how many messages rsyslog has written: one byte each in received.count.
# rsyslog queues messages before the file action writes them, so this waits until the
# size has stopped changing for a quarter of a second (at most ten seconds in all).
# Usage: count.sh WORKDIR
set -eu
file=$1/received.count
size() { stat -c %s "$file"; }
previous=$(size)
for _ in $(seq 40); do
    sleep 0.25
    current=$(size)
    [ "$current" = "$previous" ] && break
    previous=$current
done
echo "$current"
