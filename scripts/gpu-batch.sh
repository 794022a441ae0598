#!/usr/bin/env bash
# One batch on an offline GPU host: Lua and busted from .debs/, a build for the local GPU, the specs,
# the benchmarks, and (with SANITIZE=1) compute-sanitizer over every variant. Logs go under $OUT
# (default results/gpu); a short summary is printed last.
# test: the specs in SPEC_SHARDS processes (default one per core: whole files dealt out, scripts/run-specs.sh;
#   16 on an H100 host run the suite in about 380 s), each shard's log under $OUT/shards as it runs.
#   scripts/gpu-batch.sh [test] [fuzz] [memcheck-specs] [run] [bench] [sanitize]     (default: test bench)
#   fuzz: the differential fuzz with FUZZ_CASES cases (default 30000) and FUZZ_SEED (default the spec's), then
#     gr.dot's fuzz (spec/dot_fuzz_spec.lua) with a tenth as many, the several-input operators' fuzz
#     (spec/several_inputs_spec.lua) with a hundredth as many per path, reductions by key's
#     (spec/reduce_by_key_spec.lua) with a hundredth as many, and several results in one pass
#     (spec/several_ops_fuzz_spec.lua: opts.ops against the single calls) with a tenth as many;
#   memcheck-specs: compute-sanitizer memcheck over the specs of error paths (faults, hardening, and/or bits),
#     of the segmented kernels (segments_spec) and of user operators' reductions (operator_reduce_spec);
#   compare: the tree in .baseline/ (a `git archive BASE` unpacked there, carried with the call) built too,
#     and bench.lua's large, small, streamed and 2^28 wall tables (COMPARE_ONLY to choose, e.g. with ops) run
#     A B A B (baseline, this tree; COMPARE_ROUNDS rounds, default 2), then experiments/compare_bench.lua over
#     them; the segments lab likewise (experiments/compare_segments.lua; COMPARE_SEGMENTS=0 skips it);
#   shapes: issue 23's table, experiments/shapes.lua (SHAPES_ARGS, default --ops sum,max,argmax,var) beside
#     experiments/peers/torch_shapes.py's times (SHAPES_TORCH=0: without); SHAPES_BASELINE=DIR runs the table
#     with DIR/gpureduce/core.so.xz (the module before a change) too, A B A B;
#   types: make bench-types (issue 22's table: the new dtypes against the read ceiling and PyTorch, whose
#     times experiments/peers/torch_types.py writes to $OUT/torch_types.txt); with PREBUILT, TYPES_BASELINE=DIR
#     runs the table with DIR/gpureduce/core.so.xz (the module before a change) too, A B A B;
#   dot: issue 24's table, experiments/dot_bench.lua (gr.dot against the read ceiling of both inputs)
#     beside experiments/peers/torch_dot.py's times (torch.dot, torch.vdot);
#   by_key: issue 25's table, experiments/by_key_bench.lua (reductions by key against the read ceiling) beside
#     build/cub_by_key (CUB's SortPairs + ReduceByKey; PREBUILT/bin/cub_by_key where carried) and
#     experiments/peers/torch_by_key.py's times (index_add_, scatter_reduce_, default and deterministic);
#   several: issue 24's several-results table, experiments/several_bench.lua (opts.ops and gr.describe
#     against one read and six calls) beside experiments/peers/torch_several.py's times;
#   ops: bench.lua's tables of the new ops and of reduce_many; segments: experiments/segments.lua (the lab);
#   operators: bench.lua's tables of user operators (speed beside the built-in sum, call overhead, compile
#     and disk-cache times);
#   exact: bench.lua's gpu_to_gpu table (the exact kernel at 2^28 beside auto, CUB and the read ceiling),
#     then spec/exact_gpu_spec.lua and spec/determinism_spec.lua
#   accuracy: experiments/accuracy.lua (every variant, level and accumulator against the exact result, float32
#     and float64, all its ops, 2^20 and 2^24; ACCURACY_ARGS adds options), then spec/accuracy_lab_spec.lua
#   lab: the sweep's validation over every op and dtype (--quick), the issue's var case, and a kernel that
#     drops an element (experiments/kernels/drop_first.lua), which must fail;
#   multi: the several-GPU specs (multi_gpu_spec, sharded_reduce_spec), the two-process example and the multi-GPU
#     benchmark (experiments/multi_gpu/: sharded sum speed-up, c:allreduce against ncclAllReduce, c:reduce
#     latency); MULTI_SHARD_N sets the sharded sum's size (default 2^32)
#   multi-all: issue 28's communicator checks on the host's N GPUs (nvidia-smi counts them), each item's log
#     under $OUT/multi-*.log and one summary line: the communicator specs (multi_gpu_spec, comm_env_spec,
#     comm_reduce_spec; the dead-rank spec left to its own item); launch.lua with 2 ranks, every style
#     (torchrun, mpirun, agent-store, and the network transport against the default ones, with their bus
#     bandwidths); launch.lua with 4 ranks where there are 4 GPUs; a rank that dies (dead_rank.lua 5 all:
#     mid all-reduce and mid c:reduce); real torchrun over env_rank.lua where python3 has torch;
#     bench.lua's communicator parts (bfloat16 c:allreduce of 2^28 bytes against ncclAllReduce's bus
#     bandwidth, one-value c:reduce against a 1-element ncclAllReduce) on 2 and N ranks, through the
#     mailboxes and with GPUREDUCE_COMM_ONESHOT=0. NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
#   sharded: issue 28's sharded buffers on the host's GPUs: the sharded specs (every layout the GPUs allow,
#     the buffer pool's two-GPU case), the sharded fuzz over every GPU (spec/sharded_fuzz_spec.lua;
#     SHARDED_FUZZ_CASES cases, default 300 (2000 ran past 7 minutes on four H100s), and FUZZ_SEED; with its
#     timed gr.dot along axes on 1 and N GPUs), the column-sum target of a (2^30, 4) float32 split by rows
#     (GPUREDUCE_SHARDED_TARGETS=1: fails below 1.8x on 2 GPUs, 3.4x on 4), and bench.lua's sharded
#     bfloat16 sum of SHARDED_N elements (default 2^33) on 1 .. N GPUs.
# PREBUILT=build-cuda: use that folder's prebuilt.tar.xz (scripts/pack-prebuilt.sh: the module and the host
#   programs in one stream, about 46 MB of the 64 MiB a call may carry), or its gpureduce/core.so.xz or
#   gpureduce/core.so (with hosts.tar.xz beside it, if any), carried with the call, instead of building
#   on the host (234 s of device time with every dtype).
#   Without PREBUILT, where the tree holds results/carry or results/mod (a prebuilt module carried, as
#   pack-prebuilt.sh leaves one), the batch stops before building and says so: a forgotten PREBUILT
#   would spend those minutes. BUILD_ON_DEVICE=1 builds anyway.
# A copy of the tree without .git can name its revision in GPUREDUCE_REV (the lab's headers carry it).
set -uo pipefail
OUT=${OUT:-results/gpu}
if [ -z "${PREBUILT:-}" ] && [ "${BUILD_ON_DEVICE:-0}" != 1 ]; then
    for carried in results/carry results/mod; do
        if [ -d "$carried" ]; then
            echo "gpu-batch: PREBUILT is not set, but $carried is here (a prebuilt module, carried): building on" \
                 "the device costs minutes of GPU time. Run with PREBUILT=$carried to use it, or" \
                 "BUILD_ON_DEVICE=1 to build anyway." >&2
            exit 2
        fi
    done
fi
mkdir -p "$OUT"
steps=${*:-test bench}

. scripts/offline-env.sh .debs /tmp/gpureduce-prefix >/dev/null || exit 1

# unxz_to SRC DST: an xz file (a carried module, xz -k) unpacked with Python's lzma (the host has no xz)
unxz_to() {
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$1" "$2"
}
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader > "$OUT/gpu.txt" 2>&1
start=$(date +%s)
if [ -n "${PREBUILT:-}" ]; then
    # A module built elsewhere for sm_90 (make CUDA=1 CUDA_ARCH=90 BUILD=build-cuda, its gpureduce/ folder
    # carried with the call): the build on the host, minutes of device time, is skipped; the specs then
    # run through run-specs.sh, not make test (which would build all), and the host programs' specs
    # (c_api_host, ...) find no programs.
    mkdir -p build/gpureduce
    if [ -f "$PREBUILT/prebuilt.tar.xz" ]; then             # the module and the host programs, into build/
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
            "$PREBUILT/prebuilt.tar.xz" build || exit 1
    elif [ -f "$PREBUILT/gpureduce/core.so.xz" ]; then
        unxz_to "$PREBUILT/gpureduce/core.so.xz" build/gpureduce/core.so || exit 1
    else
        cp "$PREBUILT/gpureduce/core.so" build/gpureduce/ || exit 1
    fi
    # the host programs and the C library beside a module packed alone (hosts.tar.xz, as an earlier
    # pack-prebuilt.sh wrote them), which the host programs' specs (host_spec, environment_spec, ...) run
    if [ -f "$PREBUILT/hosts.tar.xz" ]; then
        python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
            "$PREBUILT/hosts.tar.xz" build || exit 1
    fi
    export GPUREDUCE_PREBUILT=$PREBUILT       # host_spec's check of the objects' layers has no objects
    echo "build: prebuilt module from $PREBUILT" > "$OUT/summary.txt"
elif ! make -j"$(nproc)" CUDA_ARCH="${CUDA_ARCH:-90}" all $(command -v nvcc >/dev/null && echo build/cub_yardsticks) \
        > "$OUT/build.log" 2>&1; then
    tail -40 "$OUT/build.log"
    echo "build FAILED"
    exit 1
else
    echo "build: $(( $(date +%s) - start )) s" > "$OUT/summary.txt"
fi

for step in $steps; do
    t0=$(date +%s)
    case $step in
    test) export SPEC_SHARDS=${SPEC_SHARDS:-$(nproc)} SPEC_LOG_DIR="$OUT/shards"
          if [ -n "${PREBUILT:-}" ]; then
              bash scripts/run-specs.sh $LUA $BUSTED -o spec/support/summary_output.lua --cpath="$PWD/build/?.so" \
                  > "$OUT/test.log" 2>&1
          else
              make test > "$OUT/test.log" 2>&1
          fi; echo "test: $(tail -1 "$OUT/test.log") ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    shapes) # issue 23's table (experiments/shapes.lua) with PyTorch's times; SHAPES_ARGS go to both scripts.
            # SHAPES_BASELINE=DIR: DIR/gpureduce/core.so.xz (the module before a change) measured too, A B A B
            # (shapes-A1.log, shapes-B1.log, ...; B is this tree's module); SHAPES_TORCH=0 skips PyTorch
            args=${SHAPES_ARGS:---ops sum,max,argmax,var}
            torch=()
            if [ "${SHAPES_TORCH:-1}" != 0 ]; then
                python3 experiments/peers/torch_shapes.py $args > "$OUT/torch_shapes.txt" 2>&1
                torch=(--torch "$OUT/torch_shapes.txt")
            fi
            runs="B:build:shapes"
            if [ -n "${SHAPES_BASELINE:-}" ]; then
                mkdir -p /tmp/shapes-baseline/gpureduce
                unxz_to "$SHAPES_BASELINE/gpureduce/core.so.xz" /tmp/shapes-baseline/gpureduce/core.so
                runs="A:/tmp/shapes-baseline:shapes-A1 B:build:shapes-B1 A:/tmp/shapes-baseline:shapes-A2 B:build:shapes-B2"
            fi
            rc=0
            for r in $runs; do
                IFS=: read -r _ dir log <<< "$r"
                LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" LUA_CPATH="$dir/?.so;${LUA_CPATH:-;}" \
                    $LUA experiments/shapes.lua $args "${torch[@]}" > "$OUT/$log.log" 2>&1 || rc=$?
            done
            echo "shapes: exit $rc ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    run) make run SWEEP_ARGS="--out $OUT/sweep" > "$OUT/run.log" 2>&1
         echo "run (default sweep): exit $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt"
         # the catalogue's table: every variant at block 512, float32 sum, n = 2^24
         $LUA experiments/sweep.lua --sizes 2^24 --blocks 512 --no-progress --out "$OUT/sweep512" \
             > "$OUT/sweep512.log" 2>&1 ;;
    types) if [ -n "${PREBUILT:-}" ]; then        # make bench-types would build all first
               python3 experiments/peers/torch_types.py > "$OUT/torch_types.txt" 2>&1
               # TYPES_BASELINE=DIR: DIR/gpureduce/core.so.xz, the module before a change, measured too,
               # A B A B (types-A1.log, types-B1.log, ...; B is this tree)
               rounds=1; [ -n "${TYPES_BASELINE:-}" ] && rounds=2
               if [ -n "${TYPES_BASELINE:-}" ]; then
                   mkdir -p /tmp/types-baseline/gpureduce
                   unxz_to "$TYPES_BASELINE/gpureduce/core.so.xz" /tmp/types-baseline/gpureduce/core.so
               fi
               for i in $(seq $rounds); do
                   for side in A B; do
                       dir=build; log="$OUT/types.log"
                       if [ -n "${TYPES_BASELINE:-}" ]; then
                           log="$OUT/types-$side$i.log"; [ $side = A ] && dir=/tmp/types-baseline
                       elif [ $side = A ]; then continue; fi
                       LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" LUA_CPATH="$dir/?.so;${LUA_CPATH:-;}" \
                           TORCH_TIMES="$OUT/torch_types.txt" $LUA experiments/types_bench.lua > "$log" 2>&1
                   done
               done
           else
               make bench-types TORCH_TIMES="$OUT/torch_types.txt" > "$OUT/types.log" 2>&1
           fi
           echo "types: exit $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    dot) python3 experiments/peers/torch_dot.py > "$OUT/torch_dot.txt" 2>&1
         LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" LUA_CPATH="build/?.so;${LUA_CPATH:-;}" \
             TORCH_TIMES="$OUT/torch_dot.txt" $LUA experiments/dot_bench.lua > "$OUT/dot.log" 2>&1
         echo "dot: exit $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    several) python3 experiments/peers/torch_several.py > "$OUT/torch_several.txt" 2>&1
         LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" LUA_CPATH="build/?.so;${LUA_CPATH:-;}" \
             TORCH_TIMES="$OUT/torch_several.txt" $LUA experiments/several_bench.lua > "$OUT/several.log" 2>&1
         echo "several: exit $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    by_key) # issue 25's table: CUB's SortPairs + ReduceByKey and PyTorch's scatter reductions, then gr's
         cub=build/cub_by_key; [ -x "$cub" ] || cub=${PREBUILT:-build}/bin/cub_by_key
         [ -x "$cub" ] || make build/cub_by_key > "$OUT/cub_by_key-build.log" 2>&1
         "$cub" 26 20 > "$OUT/cub_by_key.txt" 2>&1
         python3 experiments/peers/torch_by_key.py 26 5 > "$OUT/torch_by_key.txt" 2>&1
         LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" LUA_CPATH="build/?.so;${LUA_CPATH:-;}" \
             CUB_TIMES="$OUT/cub_by_key.txt" TORCH_TIMES="$OUT/torch_by_key.txt" BY_KEY_LOG2N=26 \
             $LUA experiments/by_key_bench.lua > "$OUT/by_key.log" 2>&1
         echo "by_key: exit $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    bench) make bench > "$OUT/bench.log" 2>&1; echo "bench: exit $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    multi) export NCCL_NVLS_ENABLE=0
           $LUA $BUSTED -o spec/support/summary_output.lua spec/multi_gpu_spec.lua spec/sharded_reduce_spec.lua \
               > "$OUT/multi-spec.log" 2>&1
           echo "multi specs: $(tail -1 "$OUT/multi-spec.log")" >> "$OUT/summary.txt"
           export LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" LUA_CPATH="build/?.so;${LUA_CPATH:-;}"
           $LUA experiments/multi_gpu/allreduce_demo.lua > "$OUT/multi-demo.log" 2>&1
           echo "multi demo: exit $?" >> "$OUT/summary.txt"
           GPUREDUCE_SHARD_N=${MULTI_SHARD_N:-} $LUA experiments/multi_gpu/bench.lua > "$OUT/multi-bench.md" 2>&1
           echo "multi bench: exit $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    multi-all)
           export NCCL_NVLS_ENABLE=0
           export LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" LUA_CPATH="build/?.so;${LUA_CPATH:-;}"
           ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
           echo "multi-all: $ngpu GPU(s)" >> "$OUT/summary.txt"
           # one item: its log, then "name: exit N (S s)" and the log's last line or its lines matching $3
           item() {    # item NAME GREP COMMAND...
               local name=$1 pattern=$2 t=$(date +%s); shift 2
               "$@" > "$OUT/multi-$name.log" 2>&1
               local rc=$?
               echo "multi $name: exit $rc ($(( $(date +%s) - t )) s); $(grep -E "$pattern" "$OUT/multi-$name.log" \
                   | tr '\n' ' ' | cut -c1-400)" >> "$OUT/summary.txt"
           }
           item specs '^[0-9]+ passed' $LUA $BUSTED -o spec/support/summary_output.lua --exclude-tags=fault \
               spec/multi_gpu_spec.lua spec/comm_env_spec.lua spec/comm_reduce_spec.lua
           item launch2 ': rank 0 |transports|^net:|skipped|launch:' \
               $LUA experiments/multi_gpu/launch.lua 2 all 65536
           [ "$ngpu" -ge 4 ] && item launch4 ': rank 0 |launch:' $LUA experiments/multi_gpu/launch.lua 4 both 65536
           item dead-rank '^dead_rank' $LUA experiments/multi_gpu/dead_rank.lua 5 all
           if python3 -c 'import torch.distributed.run' 2>/dev/null; then
               item torchrun 'rank 0 |[Ee]rror' env -u RANK -u WORLD_SIZE -u LOCAL_RANK -u MASTER_ADDR -u MASTER_PORT \
                   python3 -m torch.distributed.run --nproc-per-node=2 --master-addr=127.0.0.1 \
                   --master-port=$(( 20000 + RANDOM % 30000 )) --no-python $LUA experiments/multi_gpu/env_rank.lua
           fi
           for way in 1 0; do      # the one-value c:reduce through the mailboxes, then through ncclAllReduce
               item bench-oneshot$way '^\| [0-9]|^#' env GPUREDUCE_COMM_ONESHOT=$way GPUREDUCE_BENCH_ONLY=comm \
                   GPUREDUCE_COMM_DTYPE=bfloat16 GPUREDUCE_COMM_BYTES=2^28 GPUREDUCE_RANKS="2,$ngpu" \
                   GPUREDUCE_SHARD_N=2^20 $LUA experiments/multi_gpu/bench.lua
           done
           echo "multi-all: $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt" ;;
    sharded)
           export NCCL_NVLS_ENABLE=0
           export LUA_PATH="lua/?.lua;lua/?/init.lua;${LUA_PATH:-;}" LUA_CPATH="build/?.so;${LUA_CPATH:-;}"
           $LUA $BUSTED -o spec/support/summary_output.lua spec/sharded_axes_spec.lua spec/sharded_reduce_spec.lua \
               spec/sharded_dot_ops_spec.lua spec/buffer_pool_spec.lua > "$OUT/sharded-specs.log" 2>&1
           echo "sharded specs: $(tail -1 "$OUT/sharded-specs.log")" >> "$OUT/summary.txt"
           env GPUREDUCE_SHARDED_FUZZ_CASES=${SHARDED_FUZZ_CASES:-300} \
               ${FUZZ_SEED:+GPUREDUCE_FUZZ_SEED=$FUZZ_SEED} $LUA $BUSTED -o spec/support/summary_output.lua \
               spec/sharded_fuzz_spec.lua > "$OUT/sharded-fuzz.log" 2>&1
           echo "sharded fuzz: exit $?; $(grep -E '^sharded fuzz:|^  axis [12]: 1 GPU' "$OUT/sharded-fuzz.log" | tr '\n' ' ')" \
               "$(tail -1 "$OUT/sharded-fuzz.log")" >> "$OUT/summary.txt"
           GPUREDUCE_SHARDED_TARGETS=1 $LUA $BUSTED -o spec/support/summary_output.lua --filter="scale over 2 and 4" \
               spec/sharded_axes_spec.lua > "$OUT/sharded-column.log" 2>&1
           echo "sharded column sum: exit $?; $(grep -E 'GPUs?' "$OUT/sharded-column.log" | tr '\n' ' ' | cut -c1-300)" \
               >> "$OUT/summary.txt"
           GPUREDUCE_BENCH_ONLY=sharded GPUREDUCE_SHARD_DTYPE=bfloat16 GPUREDUCE_SHARD_N=${SHARDED_N:-2^33} \
               $LUA experiments/multi_gpu/bench.lua > "$OUT/sharded-bf16.md" 2>&1
           echo "sharded bfloat16 sum: exit $?; $(grep -E '^\| [0-9]' "$OUT/sharded-bf16.md" | tr '\n' ' ' | cut -c1-400)" \
               >> "$OUT/summary.txt"
           echo "sharded: $(( $(date +%s) - t0 )) s" >> "$OUT/summary.txt" ;;
    sanitize) scripts/sanitize.sh > "$OUT/sanitize.log" 2>&1; echo "sanitize: $(tail -1 "$OUT/sanitize.log")" >> "$OUT/summary.txt" ;;
    fuzz) env GPUREDUCE_FUZZ_CASES=${FUZZ_CASES:-30000} ${FUZZ_SEED:+GPUREDUCE_FUZZ_SEED=$FUZZ_SEED} \
              $LUA $BUSTED -o spec/support/summary_output.lua spec/fuzz_spec.lua > "$OUT/fuzz.log" 2>&1
          echo "fuzz: $(grep -E '^fuzz:' "$OUT/fuzz.log" | tail -1); $(tail -1 "$OUT/fuzz.log") ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt"
          # gr.dot's fuzz (spec/dot_fuzz_spec.lua), a tenth as many cases, the same seed
          env GPUREDUCE_DOT_FUZZ_CASES=$(( ${FUZZ_CASES:-30000} / 10 )) ${FUZZ_SEED:+GPUREDUCE_FUZZ_SEED=$FUZZ_SEED} \
              $LUA $BUSTED -o spec/support/summary_output.lua spec/dot_fuzz_spec.lua > "$OUT/dot-fuzz.log" 2>&1
          echo "dot fuzz: $(grep -E '^dot fuzz:' "$OUT/dot-fuzz.log" | tail -1); $(tail -1 "$OUT/dot-fuzz.log")" >> "$OUT/summary.txt"
          # several-input operators' fuzz (spec/several_inputs_spec.lua), a hundredth as many cases per path
          env GPUREDUCE_INPUTS_FUZZ_CASES=$(( ${FUZZ_CASES:-30000} / 100 )) ${FUZZ_SEED:+GPUREDUCE_FUZZ_SEED=$FUZZ_SEED} \
              $LUA $BUSTED -o spec/support/summary_output.lua --filter=fuzz spec/several_inputs_spec.lua \
              > "$OUT/inputs-fuzz.log" 2>&1
          echo "inputs fuzz: $(tail -1 "$OUT/inputs-fuzz.log")" >> "$OUT/summary.txt"
          # reductions by key's fuzz (spec/reduce_by_key_spec.lua), a hundredth as many cases
          env GPUREDUCE_BY_KEY_FUZZ_CASES=$(( ${FUZZ_CASES:-30000} / 100 )) ${FUZZ_SEED:+GPUREDUCE_FUZZ_SEED=$FUZZ_SEED} \
              $LUA $BUSTED -o spec/support/summary_output.lua --filter=fuzz spec/reduce_by_key_spec.lua \
              > "$OUT/by-key-fuzz.log" 2>&1
          echo "by_key fuzz: $(tail -1 "$OUT/by-key-fuzz.log")" >> "$OUT/summary.txt"
          # several results in one pass (spec/several_ops_fuzz_spec.lua), a tenth as many cases
          env GPUREDUCE_OPS_FUZZ_CASES=$(( ${FUZZ_CASES:-30000} / 10 )) ${FUZZ_SEED:+GPUREDUCE_FUZZ_SEED=$FUZZ_SEED} \
              $LUA $BUSTED -o spec/support/summary_output.lua spec/several_ops_fuzz_spec.lua > "$OUT/ops-fuzz.log" 2>&1
          echo "ops fuzz: $(grep -E '^several ops fuzz:' "$OUT/ops-fuzz.log" | tail -1); $(tail -1 "$OUT/ops-fuzz.log")" \
              >> "$OUT/summary.txt" ;;
    memcheck-specs)
          compute-sanitizer --tool memcheck --error-exitcode 99 --print-limit 20 $LUA $BUSTED \
              -o spec/support/summary_output.lua spec/faults_spec.lua spec/hardening_spec.lua \
              spec/logical_bits_spec.lua spec/segments_spec.lua spec/operator_reduce_spec.lua > "$OUT/memcheck-specs.log" 2>&1
          echo "memcheck-specs: exit $?; $(grep 'ERROR SUMMARY' "$OUT/memcheck-specs.log" | tail -1); $(grep -E '^[0-9]+ passed' "$OUT/memcheck-specs.log" | tail -1) ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    compare)
          if ! make -C .baseline -j"$(nproc)" CUDA_ARCH="${CUDA_ARCH:-90}" build/gpureduce/core.so \
                  > "$OUT/baseline-build.log" 2>&1; then
              echo "compare: the baseline did not build" >> "$OUT/summary.txt"
          else
              for i in $(seq "${COMPARE_ROUNDS:-2}"); do
                  for side in A B; do
                      tree=.; [ $side = A ] && tree=.baseline
                      LUA_CPATH="$tree/build/?.so;$LUA_CPATH" LUA_PATH="$tree/lua/?.lua;$tree/lua/?/init.lua;$LUA_PATH" \
                          BENCH_ONLY=${COMPARE_ONLY:-large,small,streamed,wall} \
                          BENCH_REPS=${BENCH_REPS:-30} $LUA experiments/bench.lua > "$OUT/compare-$side$i.log" 2>&1
                  done
              done
              $LUA experiments/compare_bench.lua $(ls "$OUT"/compare-A*.log | sort -V) -- $(ls "$OUT"/compare-B*.log | sort -V) \
                  > "$OUT/compare.log" 2>&1
              # the segments lab, A B A B likewise (COMPARE_SEGMENTS=0 leaves it out)
              if [ "${COMPARE_SEGMENTS:-1}" = 1 ]; then
                  for i in $(seq "${COMPARE_ROUNDS:-2}"); do
                      for side in A B; do
                          tree=.; [ $side = A ] && tree=.baseline
                          LUA_CPATH="$tree/build/?.so;$LUA_CPATH" LUA_PATH="$tree/lua/?.lua;$tree/lua/?/init.lua;$LUA_PATH" \
                              $LUA experiments/segments.lua --reps "${BENCH_REPS:-30}" --out "$OUT/seg-$side$i" \
                              > "$OUT/seg-$side$i.log" 2>&1
                      done
                  done
                  $LUA experiments/compare_segments.lua $(ls "$OUT"/seg-A*/segments.json | sort -V) -- \
                      $(ls "$OUT"/seg-B*/segments.json | sort -V) >> "$OUT/compare.log" 2>&1
              fi
              echo "compare: ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt"
          fi ;;
    ops) BENCH_ONLY=ops,many $LUA experiments/bench.lua > "$OUT/ops.log" 2>&1
         echo "ops: exit $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    exact) BENCH_ONLY=exact $LUA experiments/bench.lua > "$OUT/exact.log" 2>&1
         s1=$?
         $LUA $BUSTED -o spec/support/summary_output.lua spec/exact_gpu_spec.lua spec/determinism_spec.lua \
             > "$OUT/exact-specs.log" 2>&1
         echo "exact: bench exit $s1; specs $(tail -1 "$OUT/exact-specs.log") ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    accuracy) $LUA experiments/accuracy.lua --ops all --out "$OUT/accuracy" ${ACCURACY_ARGS:-} > "$OUT/accuracy.log" 2>&1
         s1=$?
         $LUA $BUSTED -o spec/support/summary_output.lua spec/accuracy_lab_spec.lua > "$OUT/accuracy-spec.log" 2>&1
         echo "accuracy: lab exit $s1; spec $(tail -1 "$OUT/accuracy-spec.log") ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    operators) BENCH_ONLY=operators BENCH_REPS=${BENCH_REPS:-30} $LUA experiments/bench.lua > "$OUT/operators.log" 2>&1
         echo "operators: exit $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    segments) $LUA experiments/segments.lua > "$OUT/segments.log" 2>&1
              s1=$?
              $LUA experiments/segments.lua --offsets --sizes 2^2,2^8,2^14 --n 2^26 >> "$OUT/segments.log" 2>&1
              echo "segments: exit $s1 $? ($(( $(date +%s) - t0 )) s)" >> "$OUT/summary.txt" ;;
    lab) # the lab's validation: every op and dtype must pass (exit 0), a wrong kernel must not (exit 1)
         $LUA experiments/sweep.lua --quick --ops all --dtypes all --no-progress --out "$OUT/lab-all" \
             > "$OUT/lab.log" 2>&1
         s1=$?
         $LUA experiments/sweep.lua --quick --ops var --dtypes float64 --no-progress --out "$OUT/lab-var" \
             >> "$OUT/lab.log" 2>&1
         s2=$?
         $LUA experiments/sweep.lua --kernels experiments/kernels/drop_first.lua --variants warp_shuffle \
             --ops sum,max --dtypes float64,int32 --sizes 2^20+3 --no-progress --out "$OUT/lab-wrong" \
             >> "$OUT/lab.log" 2>&1
         s3=$?
         echo "lab: all ops x dtypes exit $s1, var exit $s2, a wrong kernel exit $s3 (expected 0 0 1) ($(( $(date +%s) - t0 )) s)" \
             >> "$OUT/summary.txt" ;;
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
[ -f "$OUT/compare.log" ] && cat "$OUT/compare.log"
[ -f "$OUT/ops.log" ] && cat "$OUT/ops.log"
[ -f "$OUT/segments.log" ] && cat "$OUT/segments.log"
# the accuracy lab's sum tables at 2^24 and its failures (the whole log and JSON are under $OUT)
[ -f "$OUT/accuracy.log" ] && awk '/^== float(32|64) sum, n = 2\^24/ {p = 1} /^$/ {p = 0} p || /^accuracy: / || /^# accuracy/' \
    "$OUT/accuracy.log"
echo "== $(cat "$OUT/gpu.txt")"
cat "$OUT/summary.txt"
