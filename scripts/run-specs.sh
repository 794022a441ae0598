#!/usr/bin/env bash
# Run busted in SPEC_SHARDS processes side by side (default 2), for make test and check-asan.
#
#   SPEC_SHARDS=2 SPEC_SPLIT=PATTERN scripts/run-specs.sh LUA BUSTED [busted options...]
#
# With 2, the first process runs the tests whose full names match the Lua pattern SPEC_SPLIT
# (--filter), the second all the others (--filter-out): every test runs in exactly one of them. The
# second one prints its progress live; the first one's output follows when both are done. Each busted
# prints its own "N passed, N failed, N skipped" line, which CI adds up; a process that fails without
# counting a failure (a crash, a sanitizer report) gets a "0 passed, 1 failed, 0 skipped" line of its
# own. With more than 2 (a GPU host: scripts/gpu-batch.sh), whole spec files are dealt out to the
# processes instead, largest first; with SPEC_LOG_DIR set, each process writes its log there as it runs
# (shardK.log, its files in filesK.txt), so a run cut short by a time limit still shows the shards that
# finished. The last line is the total, worded so that CI does not count it twice. Exit status 1 when any
# process failed.
set -uo pipefail
shards=${SPEC_SHARDS:-2}
split=${SPEC_SPLIT:-}
summary='^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$'

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# report LOG STATUS: the line CI needs when a failed run's own summary does not show a failure.
report() {
    local last
    last=$(grep -E "$summary" "$1" | tail -n 1)
    if [ "$2" -ne 0 ] && { [ -z "$last" ] || [ "$(echo "$last" | awk '{ print $3 }')" = 0 ]; }; then
        { [ -z "$(tail -c 1 "$1")" ] || echo
          echo "run-specs: busted exited with status $2 without reporting a failure (crash or sanitizer report)"
          echo "0 passed, 1 failed, 0 skipped"; } | tee -a "$1"
    fi
}

if [ "$shards" -gt 2 ]; then
    # Whole spec files to SPEC_SHARDS processes (a GPU host's cores): the largest file first, each to the
    # process with the fewest bytes of spec so far. Every file runs in exactly one process.
    # spec/compat/ too: its API cases run on every Lua, and on a GPU host they meet the cuda backend's
    # paths (host buffers beside device ones), which a CPU machine's run does not show
    mapfile -t files < <(ls -S spec/*_spec.lua spec/compat/*_spec.lua)
    load=() lists=()
    for ((k = 0; k < shards; k++)); do load[k]=0; lists[k]=""; done
    for f in "${files[@]}"; do
        best=0
        for ((k = 1; k < shards; k++)); do [ "${load[k]}" -lt "${load[best]}" ] && best=$k; done
        load[best]=$(( load[best] + $(stat -c %s "$f") ))
        lists[best]="${lists[best]} $f"
    done
    logdir=${SPEC_LOG_DIR:-$tmp}
    mkdir -p "$logdir"
    pids=()
    for ((k = 0; k < shards; k++)); do
        echo "${lists[k]# }" > "$logdir/files$k.txt"
        # shellcheck disable=SC2086 -- the list is file names without spaces (spec/*_spec.lua, spec/compat/)
        "$@" ${lists[k]} > "$logdir/shard$k.log" 2>&1 &
        pids[k]=$!
    done
    rc=0 logs=()
    for ((k = 0; k < shards; k++)); do
        wait "${pids[k]}"
        r=$?
        cat "$logdir/shard$k.log"
        report "$logdir/shard$k.log" "$r"
        [ "$r" -eq 0 ] || rc=1
        logs+=("$logdir/shard$k.log")
    done
elif [ "$shards" = 1 ] || [ -z "$split" ]; then
    "$@" 2>&1 | tee "$tmp/1.log"
    rc=${PIPESTATUS[0]}
    report "$tmp/1.log" "$rc"
    logs=("$tmp/1.log")
else
    "$@" --filter="$split" > "$tmp/1.log" 2>&1 &
    first=$!
    "$@" --filter-out="$split" 2>&1 | tee "$tmp/2.log"
    rc2=${PIPESTATUS[0]}
    report "$tmp/2.log" "$rc2"
    wait "$first"
    rc1=$?
    echo
    cat "$tmp/1.log"
    report "$tmp/1.log" "$rc1"
    rc=$(( rc1 != 0 || rc2 != 0 ))
    logs=("$tmp/1.log" "$tmp/2.log")
fi

cat "${logs[@]}" | grep -E "$summary" |
    awk -v n=${#logs[@]} '{ p += $1; f += $3; s += $5 }
        END { printf "specs, %d busted run%s: %d passed, %d failed, %d skipped\n", n, (n > 1 ? "s" : ""), p, f, s }'
[ "$rc" -eq 0 ] || exit 1
