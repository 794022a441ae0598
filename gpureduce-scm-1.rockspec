rockspec_format = "3.0"
package = "gpureduce"
version = "scm-1"
-- The committed tree as a tarball, made by `make dist` (git archive of HEAD, into build/), by a path from
-- the repository's root: `luarocks install gpureduce-scm-1.rockspec` run there fetches it. luarocks pack
-- looks for it in a temporary folder of its own: `make rock` packs a copy that names it by its absolute
-- path. `luarocks make` builds the checkout itself and needs none.
source = {
  url = "build/gpureduce-scm-1.tar.gz",
  dir = "gpureduce-scm-1",
}
description = {
  summary = "Reductions on the GPU from Lua: every classic kernel variant, CUB-class speed",
  detailed = [[
    A C engine with CUDA kernels, loaded as require "gpureduce". It reduces device buffers with 21 ops:
    sum, prod, min, max, and, or, count, mean, var, std, argmin, argmax, minmax, sumsq, norm, nansum,
    nanmin, nanmax, nanmean, absmax and asum; whole buffers, segments of one buffer or many buffers in one call, with a
    catalogue of kernel variants and finishing modes, operators of your own compiled at run time (NVRTC),
    and buffers sharded across GPUs. Builds a CPU-only module, with the same API, where nvcc is not
    available.
  ]],
  license = "MIT",
}
-- 5.1 covers LuaJIT 2.1; 5.5 passes the specs through scripts/lua55.sh (docs/api.md, "Lua versions").
dependencies = {
  "lua >= 5.1, < 5.6",
}
build = {
  type = "make",
  build_target = "module",   -- the module only: not the library or the spec host programs that `make` builds
  build_variables = {
    CFLAGS = "$(CFLAGS)",
    LUA_INCDIR = "$(LUA_INCDIR)",
  },
  install_target = "install-lua",   -- core.so and the facade; `make install` adds the C library
  install_variables = {
    INST_LIBDIR = "$(LIBDIR)",
    INST_LUADIR = "$(LUADIR)",
    LUA_INCDIR = "$(LUA_INCDIR)",   -- the build folder follows the headers: install the module built for them
  },
}
