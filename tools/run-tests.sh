#!/usr/bin/env bash
# The whole test suite, in two parts (extra arguments go to both pytest runs):
#   1. every test not marked `serial`, on several pytest-xdist workers, one test file per worker
#      at a time (module fixtures such as a test file's broker stay within one worker). Most of
#      the suite waits on sockets, session timeouts and child processes rather than computing, so
#      three workers finish it in about half the time even on two cores;
#   2. the tests marked `serial`, alone: they compare timings with Kafka's (which other work on
#      the machine would distort) or build the container images once for the session (the
#      compose stacks: on xdist each worker would build the same tags at once).
# `python3 -m pytest` alone still runs everything, serially.
set -uo pipefail
cd "$(dirname "$0")/.."
workers="${KBROKER_TEST_WORKERS:-3}"

run() {
    python3 -m pytest "$@"
    local status=$?
    # 5: no test selected in this part (a narrower selection passed in "$@")
    [ "$status" -eq 5 ] && return 0
    return "$status"
}

status=0
run -m "not serial" -n "$workers" --dist loadfile "$@" || status=1
KBROKER_DURATIONS_APPEND=1 run -m serial -p no:xdist "$@" || status=1
exit "$status"
