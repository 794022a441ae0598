# gpureduce -- build the Lua module (build/gpureduce/core.so), run the main job and the specs.
#
#   make                 the module and the host programs the specs run; CUDA kernels when nvcc is on the
#                        PATH and a GPU is present (or CUDA=1), a CPU-only module otherwise. Parallel on
#                        every core unless you give -j.
#   make module          the module only (what `luarocks make` builds)
#   make run             the main job: the sweep (experiments/sweep.lua), GPU if there is one, else CPU
#   make demo            every op on a large random buffer, results and timings
#   make test            the busted specs, in two busted processes (GPU specs pending without a device)
#   make check-asan      the specs against a CPU-only module built with ASan + UBSan (in build-asan/)
#   make check-valgrind  the host programs under valgrind, on the CPU backend
#   make bench           the GPU benchmarks against CUB
#   make bench-cpu       the cpu backend: every op and dtype at 2^22 against sum (CPU_BENCH_ARGS)
#   make accuracy        the accuracy lab: every variant's error against the exact result (ACCURACY_ARGS)
#
# CUDA architectures: by default those of the GPUs present (nvidia-smi), else 90; PTX of the highest is
# embedded as well. make CUDA_ARCH=90 builds one; make CUDA_ARCH="80 90" a portable fat binary.
# The CUDA toolkit: CUDA_HOME (or CUDA_PATH) if set, else where nvcc says it lives, else /usr/local/cuda.

LUA        ?= lua5.4
BUSTED     ?= $(shell command -v busted 2>/dev/null)
LUA_INCDIR ?= /usr/include/lua5.4
LUA_LIBDIR ?=
CC         ?= cc

BUILD   ?= build
OBJ     := $(BUILD)/obj
MODULE  := $(BUILD)/gpureduce/core.so

# Parallel by default, on every core. A -j on the command line wins over this (GNU make 4.3); a parent
# make, or a -j in MAKEFLAGS from the environment, decides for itself; and `make clean all` stays
# serial, so that clean cannot race the build.
ifeq ($(MAKELEVEL)$(filter -j%,$(shell printenv MAKEFLAGS))$(filter clean,$(MAKECMDGOALS)),0)
  MAKEFLAGS += -j$(shell nproc)
endif

# nvcc from the PATH, looked up once. The kernels are built where they can run -- a machine with an
# NVIDIA GPU -- or when CUDA=1 asks for them (a build box, a compile check); elsewhere the module is the
# CPU-only one, which builds in seconds (the kernels take about a minute on 16 cores, several minutes
# on 2: the six slowest objects alone took 6 minutes). `make NVCC=` always builds the CPU-only module. The toolkit found either way serves the NVRTC header check.
NVCC_FOUND := $(shell command -v nvcc 2>/dev/null)
HAS_GPU    := $(if $(shell nvidia-smi -L 2>/dev/null | grep '^GPU'),1,0)
ifeq ($(origin NVCC),undefined)
  NVCC := $(if $(filter 1,$(HAS_GPU) $(CUDA)),$(NVCC_FOUND))
endif
TOOLKIT_NVCC := $(or $(NVCC),$(NVCC_FOUND))

# Goals that never touch CUDA, and so do not need a working toolkit.
CPU_GOALS := clean deps check-asan

ifneq ($(TOOLKIT_NVCC),)
  # The toolkit's root and headers. Not next to nvcc: the nvcc on the PATH may be a wrapper script.
  # nvcc --dryrun prints the settings of its own profile, among them "#$ TOP=<root>" and
  # "#$ INCLUDES="-I<include dir>"". (override: a CUDA_HOME= on the command line is also "not set".)
  override CUDA_HOME := $(strip $(or $(CUDA_HOME),$(CUDA_PATH)))
  CUDA_FROM := CUDA_HOME/CUDA_PATH
  ifeq ($(CUDA_HOME),)
    NVCC_SAYS := $(shell $(TOOLKIT_NVCC) --dryrun -x cu -c /dev/null -o /dev/null 2>&1 | \
                   sed -n -e 's/^\#\$$ TOP=/top=/p' -e 's/^\#\$$ INCLUDES="-I\([^"]*\)".*/inc=\1/p')
    override CUDA_HOME := $(abspath $(patsubst top=%,%,$(filter top=%,$(NVCC_SAYS))))
    NVCC_INCDIR := $(abspath $(patsubst inc=%,%,$(filter inc=%,$(NVCC_SAYS))))
    CUDA_FROM := $(TOOLKIT_NVCC) --dryrun
  endif
  ifeq ($(CUDA_HOME),)
    override CUDA_HOME := /usr/local/cuda
    CUDA_FROM := the default
  endif
  # $(CUDA_HOME)/include, else the folder that nvcc itself passes with -I.
  ifeq ($(strip $(CUDA_INCDIR)),)
    override CUDA_INCDIR := $(if $(wildcard $(CUDA_HOME)/include/cuda_runtime.h),$(CUDA_HOME)/include,$(or \
                              $(NVCC_INCDIR),$(CUDA_HOME)/include))
  endif

  # Fail now, not after minutes of compiling, when nvcc does not run or the headers are not there.
  ifneq ($(if $(NVCC),$(filter-out $(CPU_GOALS),$(or $(MAKECMDGOALS),all))),)
    ifneq ($(shell $(NVCC) --version >/dev/null 2>&1 && echo ok),ok)
      $(error '$(NVCC) --version' fails: repair that nvcc or take it off the PATH (make NVCC= builds the CPU-only module))
    endif
    ifeq ($(wildcard $(CUDA_INCDIR)/cuda_runtime.h),)
      $(error No CUDA headers: $(CUDA_INCDIR)/cuda_runtime.h does not exist (CUDA_HOME=$(CUDA_HOME), from $(CUDA_FROM); nvcc is $(NVCC)). Set CUDA_HOME to the toolkit's root, the folder with include/cuda_runtime.h, e.g. make CUDA_HOME=/usr/local/cuda (or CUDA_INCDIR to its include folder))
    endif
  endif

  # Default architectures: those of the GPUs present ("9.0" -> 90, each once), else 90.
  ifeq ($(origin CUDA_ARCH),undefined)
    CUDA_ARCH := $(or $(sort $(shell nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | \
                   sed -n 's/^ *\([0-9][0-9]*\)\.\([0-9]\) *$$/\1\2/p')),90)
  endif
endif
CUDA_ARCH ?= 90

# Our flags live apart from CFLAGS, which luarocks and users set on the command line. SANITIZE holds
# extra compile and link flags for a CPU-only build (make check-asan sets it).
CFLAGS        ?= -O2
GR_CFLAGS      = -std=c11 -D_GNU_SOURCE -fPIC -Wall -Wextra -Iengine $(CFLAGS) $(FILE_CFLAGS) $(SANITIZE)
HIGHEST_ARCH  := $(lastword $(shell printf '%s\n' $(CUDA_ARCH) | sort -n))
GENCODE       := $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
                 -gencode arch=compute_$(HIGHEST_ARCH),code=compute_$(HIGHEST_ARCH)
NVCCFLAGS     += -std=c++17 -O3 $(GENCODE) -Xcompiler -fPIC,-Wall -Iengine

ENGINE_H    := $(wildcard engine/*.h)
ENGINE_SRC  := $(filter-out engine/device_none.c,$(wildcard engine/*.c))
# The NVRTC-clean device headers (those whose opening comment says so) and the lists they include,
# embedded in the module for operators compiled at run time (engine/nvrtc.h).
NVRTC_HEADERS := $(shell for f in cuda/*.cuh; do sed -n '1,/\*\//p' $$f | grep -q NVRTC-clean && echo $$f; done) \
                 engine/lists.h
EMBED_OBJ   := $(OBJ)/gen/embedded_headers.o
ENGINE_OBJ  := $(ENGINE_SRC:%.c=$(OBJ)/%.o) $(EMBED_OBJ)
BINDING_SRC := $(wildcard lua/*.c)
BINDING_OBJ := $(BINDING_SRC:%.c=$(OBJ)/%.o)

# The slowest kernels first, so that make -j starts them first (seconds for sm_90 on 2 cores: v16 67,
# v15 44, v11 23, v10 v12 v13 v14 8-9, the rest 3-7; exact about 80); any other .cu follows in name order.
CUDA_SLOW  := v16_thrust exact segmented v15_cub v11_template_unroll8 v10_complete_unroll8 v12_warp_shuffle \
              v14_pipelined v13_grid_stride_atomic
CUDA_SRC   := $(wildcard cuda/*.cu)
CUDA_FIRST := $(foreach s,$(CUDA_SLOW),$(filter cuda/$(s).cu,$(CUDA_SRC)))
CUDA_OBJ   := $(patsubst %.cu,$(OBJ)/%.o,$(CUDA_FIRST) $(filter-out $(CUDA_FIRST),$(CUDA_SRC)))

ifeq ($(NVCC),)
  DEVICE_OBJ := $(OBJ)/engine/device_none.o
  LINK       := $(CC) -shared $(SANITIZE)
  LINK_LIBS  := -lpthread -lm -ldl
  HOST_LINK  := $(CC) $(SANITIZE)
else
  DEVICE_OBJ := $(CUDA_OBJ)
  LINK       := $(NVCC) -shared $(GENCODE)
  LINK_LIBS  := -lpthread -lm -ldl -lrt
  HOST_LINK  := $(NVCC) $(GENCODE)
endif

# liblua for the host program that embeds Lua (offline hosts find it through LD_LIBRARY_PATH)
LUA_LINK := $(if $(LUA_LIBDIR),-L$(LUA_LIBDIR)) -llua5.4

# The module and facade from this checkout, ahead of anything installed.
LUA_ENV := LUA_PATH="lua/?.lua;lua/?/init.lua;$${LUA_PATH:-;}" LUA_CPATH="$(BUILD)/?.so;$${LUA_CPATH:-;}"

.PHONY: all module run demo test check-asan check-valgrind bench bench-cpu accuracy clean deps install readme
HOST_PROGRAMS := $(BUILD)/embed_host $(BUILD)/c_api_host $(BUILD)/nvrtc_compile $(BUILD)/kcache_host \
                 $(if $(wildcard $(CUDA_INCDIR)/nvrtc.h),$(BUILD)/nvrtc_headers)
all: module $(HOST_PROGRAMS)
module: $(MODULE)

# The device objects first: under -j the slow kernels start before everything else.
$(MODULE): $(DEVICE_OBJ) $(ENGINE_OBJ) $(BINDING_OBJ)
	@mkdir -p $(dir $@)
	$(LINK) -o $@ $^ $(LINK_LIBS)

# The host backend's loops are written to vectorise, which gcc does at -O3, and for the float compares
# and selects (NaN, norm's three sums) only without -ftrapping-math (nothing reads the FP exception
# flags); without contraction, so that a product is rounded before it is added, as host_ops.c and the
# kernels round it (-march=native would otherwise fuse them).
CPU_LOOP_OBJ := $(addprefix $(OBJ)/engine/,cpu_backend.o cpu_exact.o cpu_kernels.o cpu_pairwise.o cpu_trees.o)
$(CPU_LOOP_OBJ): FILE_CFLAGS = -O3 -fno-trapping-math -ffp-contract=off

$(OBJ)/engine/%.o: engine/%.c $(ENGINE_H)
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) -c $< -o $@

# Where engine/nvrtc.c looks for NVRTC after GPUREDUCE_NVRTC: the toolkit found here, when it has one.
NVRTC_LIB := $(if $(TOOLKIT_NVCC),$(firstword $(wildcard $(CUDA_HOME)/lib64/libnvrtc.so $(CUDA_HOME)/lib/libnvrtc.so)))
$(OBJ)/engine/nvrtc.o: FILE_CFLAGS = $(if $(NVRTC_LIB),-DGR_NVRTC_DEFAULT='"$(NVRTC_LIB)"')
# Where engine/comm.c looks for NCCL after GPUREDUCE_NCCL: the toolkit's lib64, then lib (NCCL ships in
# either), when it has one.
NCCL_LIB := $(if $(TOOLKIT_NVCC),$(firstword $(wildcard $(CUDA_HOME)/lib64/libnccl.so.2 $(CUDA_HOME)/lib/libnccl.so.2)))
$(OBJ)/engine/comm.o: FILE_CFLAGS = $(if $(NCCL_LIB),-DGR_NCCL_DEFAULT='"$(NCCL_LIB)"')

$(BUILD)/gen/embedded_headers.c: scripts/embed_headers.sh $(NVRTC_HEADERS)
	@mkdir -p $(dir $@)
	sh scripts/embed_headers.sh $@ $(NVRTC_HEADERS)

$(EMBED_OBJ): $(BUILD)/gen/embedded_headers.c $(ENGINE_H)
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) -c $< -o $@

$(OBJ)/lua/%.o: lua/%.c $(ENGINE_H) $(wildcard lua/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) -I$(LUA_INCDIR) -c $< -o $@

$(OBJ)/cuda/%.o: cuda/%.cu $(wildcard cuda/*.cuh) $(ENGINE_H)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# Host programs for the specs: one embeds Lua and hands its own memory to a script, one uses the C API,
# one tries the kernel cache alone. The last two link the module's own objects rather than compiling
# anything again.
$(OBJ)/spec/host/embed_host.o: spec/host/embed_host.c
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) $(if $(NVCC),-DGR_WITH_CUDA -I$(CUDA_INCDIR)) -I$(LUA_INCDIR) -c $< -o $@

# Compiles the NVRTC-clean device headers with NVRTC (no GPU needed): links libnvrtc of the toolkit.
$(BUILD)/nvrtc_headers: spec/host/nvrtc_headers.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -I$(CUDA_INCDIR) $< -o $@ -L$(CUDA_HOME)/lib64 -lnvrtc -Wl,-rpath,$(CUDA_HOME)/lib64

# The C API host and the NVRTC layer's test (spec/host/nvrtc_compile.c): NVRTC is opened at run time,
# so they build with or without a toolkit. The kernel cache's test (kcache_host.c) links kcache.o alone.
C_HOSTS := $(BUILD)/c_api_host $(BUILD)/nvrtc_compile
$(C_HOSTS:$(BUILD)/%=$(OBJ)/spec/host/%.o) $(OBJ)/spec/host/kcache_host.o: $(OBJ)/spec/host/%.o: spec/host/%.c $(ENGINE_H)
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) -c $< -o $@

$(BUILD)/embed_host: $(OBJ)/spec/host/embed_host.o
	$(HOST_LINK) -o $@ $^ $(LUA_LINK) $(LINK_LIBS)

$(C_HOSTS): $(BUILD)/%: $(OBJ)/spec/host/%.o $(ENGINE_OBJ) $(DEVICE_OBJ)
	$(HOST_LINK) -o $@ $^ $(LINK_LIBS)

# The kernel cache alone: plain C and the file system, no device and no other engine module.
$(BUILD)/kcache_host: $(OBJ)/spec/host/kcache_host.o $(OBJ)/engine/kcache.o
	$(CC) $(SANITIZE) -o $@ $^ -lpthread

# CUB on the lab's shapes (ArgMin/ArgMax, DeviceSegmentedReduce): the yardsticks of make bench and
# experiments/segments.lua. Not part of `all`: only the benchmarks need it.
$(BUILD)/cub_yardsticks: experiments/tuning/cub_yardsticks.cu experiments/tuning/timing.cuh
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O3 $(GENCODE) $< -o $@

deps:
	@sh scripts/ensure-deps.sh

# The main job: the lab's default sweep (on the CPU backend, and says so, where there is no GPU).
run: deps all
	$(LUA_ENV) $(LUA) experiments/sweep.lua $(SWEEP_ARGS)

demo: deps all
	$(LUA_ENV) $(LUA) experiments/demo.lua

# The cpu backend's speed (experiments/cpu_bench.lua): every op and dtype as a ratio to sum's time.
bench-cpu: deps all
	GPUREDUCE_BACKEND=cpu $(LUA_ENV) $(LUA) experiments/cpu_bench.lua $(CPU_BENCH_ARGS)

# The accuracy lab (experiments/accuracy.lua): errors against the exact result, bits across variants.
accuracy: deps all
	$(LUA_ENV) $(LUA) experiments/accuracy.lua $(ACCURACY_ARGS)

# The specs in SPEC_SHARDS busted processes (1 or 2) side by side: the first runs the tests whose names
# match the Lua pattern SPEC_SPLIT, the second all the others, so every test runs exactly once whatever
# the names. The pattern (the words sum, min, max) splits the run time about in half (reduce_spec and
# finish_spec name every case by its op). Each process prints its own summary line; run-specs.sh
# prints their total last.
SPEC_SHARDS ?= 2
SPEC_SPLIT  ?= %f[%w][sm][uia][mnx]%f[%W]
RUN_SPECS    = SPEC_SHARDS='$(SPEC_SHARDS)' SPEC_SPLIT='$(SPEC_SPLIT)' bash scripts/run-specs.sh
BUSTED_ARGS := -o spec/support/summary_output.lua

test: deps all
	@$(RUN_SPECS) $(LUA) $(BUSTED) $(BUSTED_ARGS)

# The specs against a CPU-only module built with ASan and UBSan, in its own folder. Lua is not built
# with ASan, so the runtimes are preloaded (ASan's must come first). malloc may return NULL: specs ask
# for absurd sizes to test the out-of-memory errors. Leak checking is on (the interpreter and busted
# free everything today); ASAN_OPTS=...detect_leaks=0 turns it off. host_spec.lua is left out: it
# runs build/'s programs, which make check-valgrind covers.
ASAN_BUILD := build-asan
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g
ASAN_OPTS  ?= detect_leaks=1:halt_on_error=1:allocator_may_return_null=1
ASAN_ENV    = LD_PRELOAD='$(shell $(CC) -print-file-name=libasan.so) $(shell $(CC) -print-file-name=libubsan.so)' \
              ASAN_OPTIONS=$(ASAN_OPTS) UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
              GPUREDUCE_BACKEND=cpu LUA_CPATH='$(ASAN_BUILD)/?.so;;' GPUREDUCE_FUZZ_CASES=$(ASAN_FUZZ_CASES)
# make test runs the fuzz's 10,000 cases; under ASan a third of them still reach every op and dtype
ASAN_FUZZ_CASES ?= 3000
check-asan: deps
	@$(MAKE) --no-print-directory NVCC= BUILD=$(ASAN_BUILD) SANITIZE='$(ASAN_FLAGS)' module
	@$(RUN_SPECS) env $(ASAN_ENV) $(LUA) $(BUSTED) $(BUSTED_ARGS) --cpath='$(ASAN_BUILD)/?.so' \
	    --exclude-pattern=host_spec

# The host programs under valgrind, on the CPU backend: one test in CI's count, passed or failed.
# kcache_host without arguments runs its scenarios that need only a fresh directory (under /tmp).
VALGRIND := valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite
check-valgrind: all
	@ok=1; command -v valgrind >/dev/null || { echo "check-valgrind: no valgrind (apt-get install valgrind)"; ok=0; }; \
	for p in embed_host c_api_host kcache_host; do \
	    [ $$ok = 1 ] && { $(LUA_ENV) GPUREDUCE_BACKEND=cpu $(VALGRIND) $(BUILD)/$$p || ok=0; }; \
	done; \
	if [ $$ok = 1 ]; then echo "1 passed, 0 failed, 0 skipped"; else echo "0 passed, 1 failed, 0 skipped"; exit 1; fi

bench: deps all $(if $(NVCC),$(BUILD)/cub_yardsticks)
	$(LUA_ENV) $(LUA) experiments/bench.lua

readme: $(MODULE)
	$(LUA_ENV) $(LUA) scripts/update_readme.lua README.md

# luarocks (build.type = "make") installs with INST_LIBDIR and INST_LUADIR.
INST_LIBDIR ?= /usr/local/lib/lua/5.4
INST_LUADIR ?= /usr/local/share/lua/5.4
install: $(MODULE)
	mkdir -p $(INST_LIBDIR)/gpureduce $(INST_LUADIR)/gpureduce
	cp $(MODULE) $(INST_LIBDIR)/gpureduce/core.so
	cp lua/gpureduce/*.lua $(INST_LUADIR)/gpureduce/

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
