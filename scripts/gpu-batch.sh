#!/usr/bin/env bash
# One batch on an offline GPU host: Lua and busted from .debs/, a build for the local GPU, the specs,
# the benchmarks, and (with SANITIZE=1) compute-sanitizer over every variant. Logs go under $OUT
# (default results/gpu); a short summary is printed last.
#   scripts/gpu-batch.sh [test] [fuzz] [memcheck-specs] [run] [bench] [sanitize]     (default: test bench)
#   fuzz: the differential fuzz with FUZZ_CASES cases (default 30000) and FUZZ_SEED (default the spec's);
#   memcheck-specs: compute-sanitizer memcheck over the specs of error paths (faults, hardening, and/or bits)
# A copy of the tree without .git can name its revision in GPUREDUCE_REV (the lab's headers carry it).
set -uo pipefail
OUT=${OUT:-results/gpu}
mkdir -p "$OUT"
steps=${*:-test bench}

. scripts/offline-env.sh .debs /tmp/gpureduce-prefix >/dev/null || exit 1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
start=$(date +%s)
if ! make -j"$(nproc)" CUDA_ARCH="${CUDA_ARCH:-90}" > "$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    echo "build FAILED"
    exit 1
fi
echo "build: $(( $(date +%s) - start )) s" > "$OUT/summary.txt"

for step in $steps; do
    t0=$(date +%s)
    case $step in
    test) make test > "$OUT/test.log" 2>&1; echo "test: $(tail -1 "$OUT/test.log") ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    run) make run SWEEP_ARGS="--out $OUT/sweep" > "$OUT/run.log" 2>&1
         echo "run (default sweep): exit $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt"
         # the catalogue's table: every variant at block 512, float32 sum, n = 2^24
         $LUA experiments/sweep.lua --sizes 2^24 --blocks 512 --no-progress --out "$OUT/sweep512" \
             > "$OUT/sweep512.log" 2>&1 ;;
    bench) make bench > "$OUT/bench.log" 2>&1; echo "bench: exit $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    sanitize) scripts/sanitize.sh > "$OUT/sanitize.log" 2>&1; echo "sanitize: $(tail -1 "$OUT/sanitize.log")" >> "$OUT/summary.txt" ;;
    fuzz) GPUREDUCE_FUZZ_CASES=${FUZZ_CASES:-30000} ${FUZZ_SEED:+GPUREDUCE_FUZZ_SEED=$FUZZ_SEED} \
              $LUA $BUSTED -o spec/support/summary_output.lua spec/fuzz_spec.lua > "$OUT/fuzz.log" 2>&1
          echo "fuzz: $(grep -E '^fuzz:' "$OUT/fuzz.log" | tail -1); $(tail -1 "$OUT/fuzz.log") ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    memcheck-specs)
          compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 $LUA $BUSTED \
              -o spec/support/summary_output.lua spec/faults_spec.lua spec/hardening_spec.lua \
              spec/logical_bits_spec.lua > "$OUT/memcheck-specs.log" 2>&1
          echo "memcheck-specs: exit $?; $(grep 'ERROR SUMMARY' "$OUT/memcheck-specs.log" | tail -1); $(grep -E '^[0-9]+ passed' "$OUT/memcheck-specs.log" | tail -1) ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    *) echo "unknown step $step" >> "$OUT/summary.txt" ;;
    esac
done

# failures first, then the summary
for log in test fuzz memcheck-specs; do
    grep -E "^[0-9]+\) (FAIL|ERROR)" -A6 "$OUT/$log.log" 2>/dev/null | head -60
done
[ -f "$OUT/run.log" ] && grep -A19 "n = 2^2[48]" "$OUT/run.log"
[ -f "$OUT/sweep512.log" ] && grep -A19 "n = 2^24" "$OUT/sweep512.log"
[ -f "$OUT/bench.log" ] && cat "$OUT/bench.log"
echo "== $(cat "$OUT/gpu.txt")"
cat "$OUT/summary.txt"
