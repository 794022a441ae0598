#!/usr/bin/env bash
# compute-sanitizer over every kernel variant, at its default and its largest block size: memcheck and
# synccheck on every finishing mode, op and dtype at n = 100003; racecheck (much slower: it tracks every
# shared-memory access) on every variant's default finish, every op, three dtypes, at n = 20011. Prints each tool's summary line; exit 1 on any
# error. Run from the repository root after `make`.
set -u
LUA=${LUA:-lua5.4}
export LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" LUA_CPATH="build/?.so;${LUA_CPATH:-;}"
status=0
run() {
    local tool=$1; shift
    local log
    log=$(mktemp)
    local t0=$SECONDS
    compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 20 "$LUA" scripts/sanitize_all.lua "$@" > "$log" 2>&1
    local rc=$?
    grep -E "^(WRONG|=========)" "$log" | head -40
    echo "$tool: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$log" | tail -1 | sed 's/^=* *//'); $(grep sanitize_all: "$log" | tail -1); exit $rc; $((SECONDS - t0)) s"
    [ $rc -eq 0 ] || status=1
    rm -f "$log"
}
run memcheck 100003
run synccheck 100003
run racecheck 20011 --default-finish --dtypes float32,int8,float64
# The demonstration behind the catalogue's last warp: racecheck flags the textbook's volatile-only
# version and passes the volatile + __syncwarp one (experiments/tuning/volatile_race.cu).
if nvcc -std=c++17 -O3 -arch=sm_90 experiments/tuning/volatile_race.cu -o build/volatile_race 2>/dev/null; then
    for kind in classic synced; do
        echo "volatile_race $kind: $(compute-sanitizer --tool racecheck build/volatile_race $kind 2>&1 |
            grep -E "RACECHECK SUMMARY|last warp" | sed 's/^=* *//' | paste -sd ';' -)"
    done
fi
if [ $status -eq 0 ]; then echo "sanitize: no errors"; else echo "sanitize: ERRORS"; fi
exit $status
