# gpureduce -- build the Lua module (build/gpureduce/core.so), run the main job and the specs.
#
#   make                 the module, the C library and the host programs the specs run; CUDA kernels when
#                        nvcc is on the PATH and a GPU is present (or CUDA=1), a CPU-only module otherwise.
#                        Parallel on every core unless you give -j.
#   make module          the module only (what `luarocks make` builds)
#   make lib             the engine as a C library: build/libgpureduce.so and .a, build/gpureduce.pc
#   make install         the module and the library under PREFIX (default /usr/local), DESTDIR=staging
#   make dist, make rock the committed tree as a tarball, and as a source rock for luarocks (build/)
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

# The Lua to build for and to run the specs with: lua5.4 (the default), lua5.3, lua5.1 or luajit, by
# Debian's names (a path works too: /usr/bin/lua5.3), or one built from its sources, such as 5.5 (a name
# that does not say the version, plain `lua`, is asked for it; scripts/lua55.sh builds 5.5 and runs the
# specs with LUA, LUA_INCDIR and LUA_LIBDIR in its folder). It decides the headers (LUA_INCDIR), the
# library the host programs link (LUA_LIB), where make install puts the module (LUA_ABI), the build
# folder (build/ for 5.4, build-lua5.3/ and so on for the others, after the headers' folder, so that
# builds for several Luas live side by side) and which specs make test runs (SPEC_ROOT: spec/compat/ on
# 5.1 and LuaJIT, whose numbers are doubles and whose syntax the main specs outgrew; see docs/api.md,
# "Lua versions").
LUA        ?= lua5.4
LUA_NAME   := $(notdir $(LUA))
LUA_ABI    := $(if $(filter luajit%,$(LUA_NAME)),5.1,$(or $(patsubst lua%,%,$(filter lua5.%,$(LUA_NAME))),$(shell \
                $(LUA) -e 'io.write((_VERSION:match("%d+%.%d+")))' 2>/dev/null),5.4))
LUA_INCDIR ?= $(if $(filter luajit%,$(LUA_NAME)),/usr/include/luajit-2.1,/usr/include/lua$(LUA_ABI))
LUA_LIB    ?= $(if $(filter luajit%,$(LUA_NAME)),luajit-5.1,lua$(LUA_ABI))
LUA_LIBDIR ?=
BUSTED     ?= $(shell command -v busted 2>/dev/null)
CC         ?= cc

# The build folder follows the headers, not the name alone: luarocks names the Lua by LUA_INCDIR only,
# and objects compiled against one Lua's headers must never go into another's module (build/ for 5.4's,
# build-lua5.3/, build-lua5.1/, build-luajit-2.1/ for the others').
LUA_HEADERS := $(notdir $(patsubst %/,%,$(LUA_INCDIR)))
BUILD   ?= $(if $(filter lua5.4,$(LUA_HEADERS)),build,build-$(LUA_HEADERS))
OBJ     := $(BUILD)/obj
MODULE  := $(BUILD)/gpureduce/core.so

# Where make install puts things (DESTDIR, if given, is put in front of each: a staging folder).
PREFIX       ?= /usr/local
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
INST_LIBDIR  ?= $(PREFIX)/lib/lua/$(LUA_ABI)
INST_LUADIR  ?= $(PREFIX)/share/lua/$(LUA_ABI)

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
  NVCC_CHOSEN := yes
endif
TOOLKIT_NVCC := $(or $(NVCC),$(NVCC_FOUND))

# Goals that never touch CUDA, and so do not need a working toolkit.
CPU_GOALS := clean deps check-asan dist rock

# CUDA=1 asks for the kernels: without nvcc that is an error, not a quiet CPU-only build (a compile
# check that compiles nothing would pass).
ifeq ($(CUDA)$(NVCC_CHOSEN)$(NVCC_FOUND),1yes)
  ifneq ($(filter-out $(CPU_GOALS),$(or $(MAKECMDGOALS),all)),)
    $(error CUDA=1: there is no nvcc on the PATH to compile the kernels with (add the toolkit's bin folder, e.g. PATH=/usr/local/cuda/bin:$$PATH, or give NVCC=/path/to/nvcc))
  endif
endif

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
# -MMD -MP: each object's .d lists the headers it includes, so that a header touched rebuilds only the
# objects that include it (the .d files are read at the end of this file).
DEPFLAGS       = -MMD -MP
GR_CFLAGS      = -std=c11 -D_GNU_SOURCE -fPIC -Wall -Wextra -Iengine $(CFLAGS) $(FILE_CFLAGS) $(SANITIZE)
HIGHEST_ARCH  := $(lastword $(shell printf '%s\n' $(CUDA_ARCH) | sort -n))
GENCODE       := $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
                 -gencode arch=compute_$(HIGHEST_ARCH),code=compute_$(HIGHEST_ARCH)
NVCCFLAGS     += -std=c++17 -O3 $(GENCODE) -Xcompiler -fPIC,-Wall -Iengine

ENGINE_SRC  := $(filter-out engine/base/device_none.c,$(wildcard engine/*/*.c))
# The NVRTC-clean device headers (cuda/device/: the folder is the contract) and the engine headers
# they may include (the lists, GR_HD, the small floats' conversions, the ops' arithmetic shared with the
# host: scripts/check_layers.lua's DEVICE_SEES), embedded in the module for operators compiled at run
# time (engine/jit/nvrtc.h).
NVRTC_HEADERS := $(wildcard cuda/device/*.cuh) engine/lists.h engine/base/hostdev.h engine/base/small_floats.h \
                 engine/ops/op_math.h
EMBED_OBJ   := $(OBJ)/gen/embedded_headers.o
ENGINE_OBJ  := $(ENGINE_SRC:%.c=$(OBJ)/%.o) $(EMBED_OBJ)
BINDING_SRC := $(wildcard lua/*.c)
BINDING_OBJ := $(BINDING_SRC:%.c=$(OBJ)/%.o)

# The slowest kernels first, so that make -j starts them first (seconds for sm_90 on 2 cores: v16 67,
# v15 44, v11 23, v10 v12 v13 v14 8-9, the rest 3-7; exact about 80, columns about 240); any other .cu follows
# in name order.
CUDA_SLOW  := variants/v16_thrust kernels/exact kernels/columns kernels/segmented variants/v15_cub variants/v11_template_unroll8 \
              variants/v10_complete_unroll8 variants/v12_warp_shuffle variants/v14_pipelined \
              variants/v13_grid_stride_atomic
CUDA_SRC   := $(wildcard cuda/*/*.cu)
CUDA_FIRST := $(foreach s,$(CUDA_SLOW),$(filter cuda/$(s).cu,$(CUDA_SRC)))
CUDA_OBJ   := $(patsubst %.cu,$(OBJ)/%.o,$(CUDA_FIRST) $(filter-out $(CUDA_FIRST),$(CUDA_SRC)))

# LINKER_OPT: how the linking command hands an option to the linker. nvcc links the CUDA runtime
# statically; a program that links libgpureduce.a with another compiler names it (ARCHIVE_LIBS, which
# gpureduce.pc gives as Libs.private).
empty :=
space := $(empty) $(empty)
ifeq ($(NVCC),)
  DEVICE_OBJ := $(OBJ)/engine/base/device_none.o
  LINK       := $(CC) -shared $(SANITIZE)
  LINK_LIBS  := -lpthread -lm -ldl
  HOST_LINK  := $(CC) $(SANITIZE)
  LINKER_OPT := -Wl,
  ARCHIVE_LIBS := $(LINK_LIBS)
else
  DEVICE_OBJ := $(CUDA_OBJ)
  LINK       := $(NVCC) -shared $(GENCODE)
  LINK_LIBS  := -lpthread -lm -ldl -lrt
  HOST_LINK  := $(NVCC) $(GENCODE)
  LINKER_OPT := -Xlinker$(space)
  ARCHIVE_LIBS := -L$(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/lib) $(CUDA_HOME)/lib64) \
                  -lcudart_static -lstdc++ $(LINK_LIBS)
endif

# liblua for the host program that embeds Lua (offline hosts find it through LD_LIBRARY_PATH)
LUA_LINK := $(if $(LUA_LIBDIR),-L$(LUA_LIBDIR)) -l$(LUA_LIB)

# The module and facade from this checkout, ahead of anything installed.
LUA_ENV := LUA_PATH="lua/?.lua;lua/?/init.lua;$${LUA_PATH:-;}" LUA_CPATH="$(BUILD)/?.so;$${LUA_CPATH:-;}"

.PHONY: all module lib run demo test check-asan check-valgrind bench bench-types bench-cpu accuracy clean deps readme \
        install install-lua install-lib dist rock bench-shapes
HOST_PROGRAMS := $(BUILD)/embed_host $(BUILD)/c_api_host $(BUILD)/comm_env_host $(BUILD)/nvrtc_compile $(BUILD)/kcache_host \
                 $(if $(wildcard $(CUDA_INCDIR)/nvrtc.h),$(BUILD)/nvrtc_headers)
all: module lib $(HOST_PROGRAMS)
module: $(MODULE)

# The device objects first: under -j the slow kernels start before everything else.
$(MODULE): $(DEVICE_OBJ) $(ENGINE_OBJ) $(BINDING_OBJ)
	@mkdir -p $(dir $@)
	$(LINK) -o $@ $^ $(LINK_LIBS)

# The engine as a C library for programs that use gr.h, without the Lua binding: shared (soname
# libgpureduce.so.0, which libgpureduce.so links to; a CUDA build's holds the CUDA runtime) and static,
# and gpureduce.pc, which says how to link either (make install rewrites its paths).
LIB_SONAME := libgpureduce.so.0
LIB_SO     := $(BUILD)/$(LIB_SONAME)
LIB_A      := $(BUILD)/libgpureduce.a
LIB_PC     := $(BUILD)/gpureduce.pc
lib: $(LIB_SO) $(BUILD)/libgpureduce.so $(LIB_A) $(LIB_PC)

# --no-undefined: a symbol that no object defines fails here, not when a program loads the library.
$(LIB_SO): $(DEVICE_OBJ) $(ENGINE_OBJ)
	@mkdir -p $(dir $@)
	$(LINK) -o $@ $^ $(LINKER_OPT)-soname=$(LIB_SONAME) $(LINKER_OPT)--no-undefined $(LINK_LIBS)

$(BUILD)/libgpureduce.so: | $(LIB_SO)
	ln -sf $(LIB_SONAME) $@

$(LIB_A): $(DEVICE_OBJ) $(ENGINE_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@
	$(AR) rcs $@ $^

# Made with the archive, so that it follows the build (CPU-only or CUDA) that the archive holds.
GR_VERSION := $(shell sed -n 's/^\#define GR_VERSION "\(.*\)"/\1/p' engine/gr.h)
$(LIB_PC): scripts/gpureduce.pc.in $(LIB_A)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e 's|@VERSION@|$(GR_VERSION)|' -e 's|@LIBS_PRIVATE@|$(strip $(ARCHIVE_LIBS))|' $< > $@

# The host backend's loops are written to vectorise, which gcc does at -O3, and for the float compares
# and selects (NaN, norm's three sums) only without -ftrapping-math (nothing reads the FP exception
# flags); without contraction, so that a product is rounded before it is added, as host_ops.c and the
# kernels round it (-march=native would otherwise fuse them).
CPU_LOOP_OBJ := $(addprefix $(OBJ)/engine/ops/,cpu_backend.o cpu_convert.o cpu_exact.o cpu_kernels.o cpu_pairwise.o \
                cpu_trees.o)
$(CPU_LOOP_OBJ): FILE_CFLAGS = -O3 -fno-trapping-math -ffp-contract=off

# -Wswitch-enum: a switch over an axis (gr_dtype, gr_op, an op's kinds) names every value and has no
# default:, so that a new dtype or op is a warning at each switch that must learn it (docs/extending.md).

$(OBJ)/engine/%.o: engine/%.c $(OBJ)/engine/%.d
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) -Wswitch-enum $(DEPFLAGS) -c $< -o $@

# Where engine/jit/nvrtc.c looks for NVRTC after GPUREDUCE_NVRTC: the toolkit found here, when it has one.
NVRTC_LIB := $(if $(TOOLKIT_NVCC),$(firstword $(wildcard $(CUDA_HOME)/lib64/libnvrtc.so $(CUDA_HOME)/lib/libnvrtc.so)))
$(OBJ)/engine/jit/nvrtc.o: FILE_CFLAGS = $(if $(NVRTC_LIB),-DGR_NVRTC_DEFAULT='"$(NVRTC_LIB)"')
# Where engine/multi/comm.c looks for NCCL after GPUREDUCE_NCCL: the toolkit's lib64, then lib (NCCL ships in
# either), when it has one.
NCCL_LIB := $(if $(TOOLKIT_NVCC),$(firstword $(wildcard $(CUDA_HOME)/lib64/libnccl.so.2 $(CUDA_HOME)/lib/libnccl.so.2)))
$(OBJ)/engine/multi/comm.o: FILE_CFLAGS = $(if $(NCCL_LIB),-DGR_NCCL_DEFAULT='"$(NCCL_LIB)"')

$(BUILD)/gen/embedded_headers.c: scripts/embed_headers.sh $(NVRTC_HEADERS)
	@mkdir -p $(dir $@)
	sh scripts/embed_headers.sh $@ $(NVRTC_HEADERS)

$(EMBED_OBJ): $(BUILD)/gen/embedded_headers.c $(EMBED_OBJ:.o=.d)
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(OBJ)/lua/%.o: lua/%.c $(OBJ)/lua/%.d
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) $(DEPFLAGS) -I$(LUA_INCDIR) -c $< -o $@

$(OBJ)/cuda/%.o: cuda/%.cu $(OBJ)/cuda/%.d
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(DEPFLAGS) -MF $(@:.o=.d) -c $< -o $@

# Host programs for the specs: one embeds Lua and hands its own memory to a script, one uses the C API,
# one tries the kernel cache alone. The C API's and NVRTC's link the engine's archive. (spec/host_spec.lua
# also builds the C API host from an installation, with pkg-config.)
$(OBJ)/spec/host/embed_host.o: spec/host/embed_host.c $(OBJ)/spec/host/embed_host.d
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) $(DEPFLAGS) $(if $(NVCC),-DGR_WITH_CUDA -I$(CUDA_INCDIR)) -I$(LUA_INCDIR) -include lua/lcompat.h -c $< -o $@

# Compiles the NVRTC-clean device headers with NVRTC (no GPU needed): links libnvrtc of the toolkit.
$(BUILD)/nvrtc_headers: spec/host/nvrtc_headers.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -I$(CUDA_INCDIR) $< -o $@ -L$(CUDA_HOME)/lib64 -lnvrtc -Wl,-rpath,$(CUDA_HOME)/lib64

# The C API host, the launcher's C host (comm_env_host.c: gr_comm_from_env) and the NVRTC layer's test
# (spec/host/nvrtc_compile.c): NVRTC and NCCL are opened at run time, so they build with or without a
# toolkit. The kernel cache's test (kcache_host.c) links kcache.o with the base modules it uses (env, hash).
C_HOSTS := $(BUILD)/c_api_host $(BUILD)/comm_env_host $(BUILD)/nvrtc_compile
$(C_HOSTS:$(BUILD)/%=$(OBJ)/spec/host/%.o) $(OBJ)/spec/host/kcache_host.o: $(OBJ)/spec/host/%.o: spec/host/%.c $(OBJ)/spec/host/%.d
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) $(DEPFLAGS) -c $< -o $@

$(BUILD)/embed_host: $(OBJ)/spec/host/embed_host.o
	$(HOST_LINK) -o $@ $^ $(LUA_LINK) $(LINK_LIBS)

$(C_HOSTS): $(BUILD)/%: $(OBJ)/spec/host/%.o $(LIB_A)
	$(HOST_LINK) -o $@ $^ $(LINK_LIBS)

# The kernel cache alone: plain C and the file system, no device and no engine module above base/.
$(BUILD)/kcache_host: $(OBJ)/spec/host/kcache_host.o $(OBJ)/engine/jit/kcache.o $(OBJ)/engine/base/env.o \
                      $(OBJ)/engine/base/hash.o
	$(CC) $(SANITIZE) -o $@ $^ -lpthread

# CUB on the lab's shapes (ArgMin/ArgMax, DeviceSegmentedReduce): the yardsticks of make bench and
# experiments/segments.lua. Not part of `all`: only the benchmarks need it.
$(BUILD)/cub_yardsticks: experiments/tuning/cub_yardsticks.cu experiments/tuning/timing.cuh
	@mkdir -p $(dir $@)
	$(NVCC) -std=c++17 -O3 $(GENCODE) $< -o $@

# CUB's sort and ReduceByKey: issue 25's yardstick for reductions by key. Not part of `all` either.
$(BUILD)/cub_by_key: experiments/tuning/cub_by_key.cu experiments/tuning/timing.cuh
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
# prints their total last. The specs load $(BUILD)'s module, named by its absolute path.
SPEC_SHARDS ?= 2
SPEC_SPLIT  ?= %f[%w][sm][uia][mnx]%f[%W]
RUN_SPECS    = SPEC_SHARDS='$(SPEC_SHARDS)' SPEC_SPLIT='$(SPEC_SPLIT)' bash scripts/run-specs.sh
BUSTED_ARGS := -o spec/support/summary_output.lua

SPEC_ROOT   ?= $(if $(filter 5.1,$(LUA_ABI)),spec/compat)

test: deps all
	@$(RUN_SPECS) $(LUA) $(BUSTED) $(BUSTED_ARGS) --cpath='$(abspath $(BUILD))/?.so' $(SPEC_ROOT)

# The specs against a CPU-only module built with ASan and UBSan, in its own folder. Lua is not built
# with ASan, so the runtimes are loaded before it (ASan's first), into the Lua processes alone:
# scripts/sanitized-lua runs busted, and the Lua processes the specs start, with them; the other programs
# they start (the shell, gnuplot behind the sweep) run as they are. malloc may return NULL: specs ask
# for absurd sizes to test the out-of-memory errors. Leak checking is on (the interpreter and busted
# free everything today; scripts/lsan.supp says what the loader keeps); ASAN_OPTS=...detect_leaks=0
# turns it off. host_spec.lua and kcache_host_spec.lua are left out (the pattern matches both): they
# run build/'s programs, which make check-valgrind covers. The build folder is given by its absolute
# path, as docs/extending.md suggests for another folder.
ASAN_BUILD := build-asan
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g
ASAN_OPTS  ?= detect_leaks=1:halt_on_error=1:allocator_may_return_null=1
ASAN_ENV    = SANITIZER_PRELOAD='$(shell $(CC) -print-file-name=libasan.so) $(shell $(CC) -print-file-name=libubsan.so)' \
              SANITIZED_LUA=$(LUA) ASAN_OPTIONS=$(ASAN_OPTS) UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
              LSAN_OPTIONS=suppressions=$(CURDIR)/scripts/lsan.supp:print_suppressions=0 \
              GPUREDUCE_BACKEND=cpu LUA_CPATH='$(CURDIR)/$(ASAN_BUILD)/?.so;;' GPUREDUCE_FUZZ_CASES=$(ASAN_FUZZ_CASES)
# make test runs the fuzz's 10,000 cases; under ASan a third of them still reach every op and dtype
ASAN_FUZZ_CASES ?= 3000
check-asan: deps
	@$(MAKE) --no-print-directory NVCC= BUILD=$(ASAN_BUILD) SANITIZE='$(ASAN_FLAGS)' module
	@$(RUN_SPECS) env $(ASAN_ENV) bash scripts/sanitized-lua $(BUSTED) $(BUSTED_ARGS) \
	    --cpath='$(CURDIR)/$(ASAN_BUILD)/?.so' --exclude-pattern=host_spec

# The host programs under valgrind, on the CPU backend: one test in CI's count, passed or failed.
# kcache_host without arguments runs its scenarios that need only a fresh directory (under /tmp).
VALGRIND := valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite
check-valgrind: all
	@ok=1; command -v valgrind >/dev/null || { echo "check-valgrind: no valgrind (apt-get install valgrind)"; ok=0; }; \
	for p in embed_host c_api_host kcache_host; do \
	    [ $$ok = 1 ] && { $(LUA_ENV) GPUREDUCE_BACKEND=cpu $(VALGRIND) $(BUILD)/$$p || ok=0; }; \
	done; \
	if [ $$ok = 1 ]; then echo "1 passed, 0 failed, 0 skipped"; else echo "0 passed, 1 failed, 0 skipped"; exit 1; fi

bench: deps all $(if $(NVCC),$(BUILD)/cub_yardsticks $(BUILD)/cub_by_key)
	$(LUA_ENV) $(LUA) experiments/bench.lua

# Issue 22's table: the new dtypes against the read ceiling and PyTorch (python3 with torch, if there is one)
TORCH_TIMES ?= $(BUILD)/torch_types.txt
bench-types: deps all
	-python3 experiments/peers/torch_types.py > $(TORCH_TIMES) 2>&1
	$(LUA_ENV) TORCH_TIMES=$(TORCH_TIMES) $(LUA) experiments/types_bench.lua

# Issue 23's table: reductions along axes against the read ceiling and PyTorch; SHAPES_ARGS go to both
SHAPES_TORCH ?= $(BUILD)/torch_shapes.txt
SHAPES_ARGS  ?= --ops sum,max,argmax,var
bench-shapes: deps all
	-python3 experiments/peers/torch_shapes.py $(SHAPES_ARGS) > $(SHAPES_TORCH) 2>&1
	$(LUA_ENV) $(LUA) experiments/shapes.lua $(SHAPES_ARGS) --torch $(SHAPES_TORCH)

readme: $(MODULE)
	$(LUA_ENV) $(LUA) scripts/update_readme.lua README.md

# make install [PREFIX=/usr/local] [DESTDIR=staging]: the Lua module (install-lua: core.so and the
# facade, where lua5.4 looks under PREFIX; luarocks, build.type = "make", runs this one alone with its
# INST_LIBDIR and INST_LUADIR) and the C library (install-lib: libgpureduce.so and .a, gr.h with the
# headers it includes under include/gpureduce, and gpureduce.pc for pkg-config).
install: install-lua install-lib

install-lua: $(MODULE)
	install -d $(DESTDIR)$(INST_LIBDIR)/gpureduce $(DESTDIR)$(INST_LUADIR)/gpureduce
	install -m 755 $(MODULE) $(DESTDIR)$(INST_LIBDIR)/gpureduce/core.so
	install -m 644 lua/gpureduce/*.lua $(DESTDIR)$(INST_LUADIR)/gpureduce/

# The public headers: gr.h and what it includes, as the preprocessor finds them.
PUBLIC_H = $(filter-out h: \\,$(shell $(CC) -MM -MT h -Iengine engine/gr.h))
install-lib: $(LIB_SO) $(BUILD)/libgpureduce.so $(LIB_A) $(LIB_PC)
	install -d $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR)/gpureduce $(DESTDIR)$(PKGCONFIGDIR)
	install -m 755 $(LIB_SO) $(DESTDIR)$(LIBDIR)/
	ln -sf $(LIB_SONAME) $(DESTDIR)$(LIBDIR)/libgpureduce.so
	install -m 644 $(LIB_A) $(DESTDIR)$(LIBDIR)/
	install -m 644 $(PUBLIC_H) $(DESTDIR)$(INCLUDEDIR)/gpureduce/
	sed -e 's|^prefix=.*|prefix=$(PREFIX)|' -e 's|^libdir=.*|libdir=$(LIBDIR:$(PREFIX)/%=$${prefix}/%)|' \
	    -e 's|^includedir=.*|includedir=$(INCLUDEDIR:$(PREFIX)/%=$${prefix}/%)|' $(LIB_PC) \
	    > $(DESTDIR)$(PKGCONFIGDIR)/gpureduce.pc

# The committed tree as a source tarball (git archive of HEAD), where gpureduce-scm-1.rockspec's
# source.url says: `luarocks install gpureduce-scm-1.rockspec`, run from here, builds it.
DIST := build/gpureduce-scm-1.tar.gz
dist:
	@mkdir -p $(dir $(DIST))
	git archive --format=tar.gz --prefix=gpureduce-scm-1/ -o $(DIST) HEAD

# A source rock of the committed tree, build/gpureduce-scm-1.src.rock, that `luarocks install` takes on
# any machine. luarocks pack fetches the source from a temporary folder of its own, where the
# rockspec's relative source.url leads nowhere: it packs a copy that names the tarball by its absolute
# path (the rock carries the tarball, and installing it never looks at that path).
LUAROCKS ?= luarocks --lua-version 5.4
rock: dist
	sed 's|^  url = .*|  url = "file://$(CURDIR)/$(DIST)",|' gpureduce-scm-1.rockspec > build/gpureduce-scm-1.rockspec
	cd build && $(LUAROCKS) pack gpureduce-scm-1.rockspec

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)

# The headers each object included when it was last compiled (DEPFLAGS). Each object also depends on
# its .d, a target of no recipe: an object without one (a build from before, a deleted .d) is compiled
# again. Named here, the .d files are not intermediate files, which make would not bother to remake.
DEP_FILES := $(patsubst %.o,%.d,$(ENGINE_OBJ) $(BINDING_OBJ) $(CUDA_OBJ) $(OBJ)/engine/base/device_none.o \
               $(addprefix $(OBJ)/spec/host/,embed_host.o c_api_host.o comm_env_host.o nvrtc_compile.o kcache_host.o))
$(DEP_FILES):
include $(wildcard $(DEP_FILES))
