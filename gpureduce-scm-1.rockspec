rockspec_format = "3.0"
package = "gpureduce"
version = "scm-1"
source = {
  url = "git+file://.",
}
description = {
  summary = "Reductions on the GPU from Lua: every classic kernel variant, CUB-class speed",
  detailed = [[
    A C engine with CUDA kernels, loaded as require "gpureduce": sum, product, min, max and
    logical and/or over device buffers, with a catalogue of kernel variants and finishing modes.
    Builds a CPU-only module where nvcc is not available.
  ]],
  license = "MIT",
}
dependencies = {
  "lua >= 5.4, < 5.5",
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
  },
}
