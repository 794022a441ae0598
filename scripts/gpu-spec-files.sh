#!/usr/bin/env bash
# Spec files one by one on a GPU host, each under a time limit, with every failure's message kept:
# for a short device call that needs to know which specs fail and why (the whole suite is make test).
#   SPEC_TIMEOUT=90 [SPEC_FILTER=PATTERN] scripts/gpu-spec-files.sh spec/ops_spec.lua spec/reduce_spec.lua ...
# SPEC_FILTER: busted's --filter (a Lua pattern over the tests' full names), e.g. float16 for those cases.
# The module is the one in build/ (make all, or a build carried to the host); Lua and busted come from
# .debs/ (scripts/offline-env.sh). Logs go to $OUT/spec-NAME.log; one line per file is printed, then
# the first lines of each failure.
set -uo pipefail
OUT=${OUT:-results/gpu}
mkdir -p "$OUT"
. scripts/offline-env.sh .debs /tmp/gpureduce-prefix >/dev/null || exit 1
for f in "$@"; do
    name=$(basename "$f" .lua)
    t0=$(date +%s)
    timeout "${SPEC_TIMEOUT:-90}" $LUA $BUSTED -o spec/support/summary_output.lua --cpath="$PWD/build/?.so" \
        ${SPEC_FILTER:+--filter="$SPEC_FILTER"} "$f" \
        > "$OUT/spec-$name.log" 2>&1
    rc=$?
    echo "$name: rc $rc, $(grep -E '^[0-9]+ passed' "$OUT/spec-$name.log" | tail -1) ($(( $(date +%s) - t0 )) s)"
done
for f in "$@"; do
    name=$(basename "$f" .lua)
    grep -A3 -E "^[0-9]+\) " "$OUT/spec-$name.log" | head -${FAIL_LINES:-25}
done
