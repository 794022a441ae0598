# gpureduce -- build the Lua module (build/gpureduce/core.so), run the main job and the specs.
#
#   make                 the module; CUDA kernels when nvcc is on the PATH, a CPU-only module otherwise
#   make run             the main job: the sweep (experiments/sweep.lua), GPU if there is one, else CPU
#   make demo            every op on a large random buffer, results and timings
#   make test            the busted specs (GPU specs pending without a device)
#   make bench           the GPU benchmarks against CUB
#   make CUDA_ARCH=90    build for one architecture only (default: 80 and 90, plus PTX of the highest)

LUA        ?= lua5.4
BUSTED     ?= $(shell command -v busted 2>/dev/null)
LUA_INCDIR ?= /usr/include/lua5.4
LUA_LIBDIR ?=
NVCC       ?= $(shell command -v nvcc 2>/dev/null)
CUDA_ARCH  ?= 80 90
CC         ?= cc

BUILD   ?= build
OBJ     := $(BUILD)/obj
MODULE  := $(BUILD)/gpureduce/core.so

# Our flags live apart from CFLAGS, which luarocks and users set on the command line.
CFLAGS        ?= -O2
GR_CFLAGS      = -std=c11 -D_GNU_SOURCE -fPIC -Wall -Wextra -Iengine $(CFLAGS) $(FILE_CFLAGS)
HIGHEST_ARCH  := $(lastword $(sort $(CUDA_ARCH)))
GENCODE       := $(foreach a,$(CUDA_ARCH),-gencode arch=compute_$(a),code=sm_$(a)) \
                 -gencode arch=compute_$(HIGHEST_ARCH),code=compute_$(HIGHEST_ARCH)
NVCCFLAGS     += -std=c++17 -O3 $(GENCODE) -Xcompiler -fPIC,-Wall -Iengine

ENGINE_SRC := $(filter-out engine/device_none.c,$(wildcard engine/*.c))
ENGINE_OBJ := $(ENGINE_SRC:%.c=$(OBJ)/%.o)
BINDING_OBJ := $(patsubst %.c,$(OBJ)/%.o,$(wildcard lua/*.c))
CUDA_SRC   := $(wildcard cuda/*.cu)
CUDA_OBJ   := $(CUDA_SRC:%.cu=$(OBJ)/%.o)

ifeq ($(NVCC),)
  DEVICE_OBJ := $(OBJ)/engine/device_none.o
  LINK       := $(CC) -shared
  LINK_LIBS  := -lpthread -lm
  HOST_LINK  := $(CC)
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

.PHONY: all run demo test bench clean deps install readme
# The toolkit's own folders (NVRTC's header and library for the header check below).
CUDA_HOME ?= $(if $(NVCC),$(abspath $(dir $(NVCC))..))
HOST_PROGRAMS := $(BUILD)/embed_host $(BUILD)/c_api_host $(if $(NVCC),$(BUILD)/nvrtc_headers)

all: $(MODULE) $(HOST_PROGRAMS)

$(MODULE): $(ENGINE_OBJ) $(BINDING_OBJ) $(DEVICE_OBJ)
	@mkdir -p $(dir $@)
	$(LINK) -o $@ $^ $(LINK_LIBS)

# The host backend's loops are written to vectorise, which gcc does at -O3.
$(OBJ)/engine/cpu_backend.o: FILE_CFLAGS = -O3

$(OBJ)/engine/%.o: engine/%.c $(wildcard engine/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) -c $< -o $@

$(OBJ)/lua/%.o: lua/%.c lua/binding.h engine/gr.h
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) -I$(LUA_INCDIR) -c $< -o $@

$(OBJ)/cuda/%.o: cuda/%.cu $(wildcard cuda/*.cuh) engine/gr.h engine/launch.h engine/device.h engine/gen_element.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

# Host programs for the specs: one embeds Lua and hands its own memory to a script, one uses the C API.
HOST_CFLAGS := $(GR_CFLAGS) $(if $(NVCC),-DGR_WITH_CUDA -I$(dir $(NVCC))../include)
$(BUILD)/embed_host: spec/host/embed_host.c
	@mkdir -p $(dir $@)
	$(CC) $(HOST_CFLAGS) -I$(LUA_INCDIR) -c $< -o $(OBJ)/embed_host.o
	$(HOST_LINK) -o $@ $(OBJ)/embed_host.o $(LUA_LINK) $(LINK_LIBS)

# Compiles the NVRTC-clean device headers with NVRTC (no GPU needed): links libnvrtc of the toolkit.
$(BUILD)/nvrtc_headers: spec/host/nvrtc_headers.c
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -O2 -Wall -I$(CUDA_HOME)/include $< -o $@ -L$(CUDA_HOME)/lib64 -lnvrtc -Wl,-rpath,$(CUDA_HOME)/lib64

$(BUILD)/c_api_host: spec/host/c_api_host.c $(ENGINE_OBJ) $(DEVICE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(GR_CFLAGS) -c $< -o $(OBJ)/c_api_host.o
	$(HOST_LINK) -o $@ $(OBJ)/c_api_host.o $(ENGINE_OBJ) $(DEVICE_OBJ) $(LINK_LIBS)

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

test: deps all
	$(LUA) $(BUSTED) -o spec/support/summary_output.lua

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
	cp lua/gpureduce/init.lua $(INST_LUADIR)/gpureduce/init.lua

clean:
	rm -rf $(BUILD)
