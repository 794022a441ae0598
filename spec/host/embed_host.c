/*
 * embed_host.c -- a host application that embeds Lua and hands memory it owns to a script.
 *
 * It allocates a float32 array of its own (device memory when a GPU is usable, host memory otherwise),
 * passes the pointer to a Lua chunk as a light userdata, and the chunk wraps it with gr.wrap (no copy)
 * and reduces it with `require "gpureduce"`. The host checks the values, then checks that the module
 * neither changed nor freed its memory. Prints one line and exits 0 on success.
 */
#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef GR_WITH_CUDA
#include <cuda_runtime.h>
#endif

static const char *script =
    "local ptr, n, where = ...\n"
    "local gr = require 'gpureduce'\n"
    "local b = gr.wrap(ptr, n, 'float32', {where = where})\n"
    "local s, mx = gr.sum(b, {acc = 'float64'}), gr.max(b)\n"
    "local tail = gr.sum(b:slice(n - 9, 10), {acc = 'float64'})\n"
    "b:free()\n"
    "collectgarbage()\n"
    "return s, mx, tail, gr.backend()\n";

int main(void) {
    const size_t n = 1000003;
    float *host = malloc(n * sizeof *host);
    if (!host) return 1;
    double expect = 0, expect_tail = 0;
    for (size_t i = 0; i < n; i++) {
        host[i] = (float)((int)(i % 7) - 3) * 0.5f;   /* exact in float: the sum is exact too */
        expect += host[i];
        if (i >= n - 10) expect_tail += host[i];
    }
    void *mem = host;
    int on_device = 0;
#ifdef GR_WITH_CUDA
    const char *want = getenv("GPUREDUCE_BACKEND");
    int count = 0;
    if (!(want && strcmp(want, "cpu") == 0) && cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
        if (cudaMalloc(&mem, n * sizeof *host) != cudaSuccess ||
            cudaMemcpy(mem, host, n * sizeof *host, cudaMemcpyHostToDevice) != cudaSuccess) {
            fprintf(stderr, "embed_host: cannot set up device memory\n");
            return 1;
        }
        on_device = 1;
    }
    cudaGetLastError();
#endif

    lua_State *L = luaL_newstate();
    luaL_openlibs(L);
    int ok = 1;
    if (luaL_loadstring(L, script) != LUA_OK) {
        fprintf(stderr, "embed_host: %s\n", lua_tostring(L, -1));
        return 1;
    }
    lua_pushlightuserdata(L, mem);
    lua_pushinteger(L, (lua_Integer)n);
    lua_pushstring(L, on_device ? "device" : "host");
    if (lua_pcall(L, 3, 4, 0) != LUA_OK) {
        fprintf(stderr, "embed_host: script failed: %s\n", lua_tostring(L, -1));
        return 1;
    }
    double sum = lua_tonumber(L, -4), mx = lua_tonumber(L, -3), tail = lua_tonumber(L, -2);
    char backend[16];
    snprintf(backend, sizeof backend, "%s", lua_tostring(L, -1));
    if (sum != expect || mx != 1.5 || tail != expect_tail) {
        fprintf(stderr, "embed_host: got sum %.17g max %g tail %g, expected %.17g 1.5 %g\n", sum, mx, tail,
                expect, expect_tail);
        ok = 0;
    }
    if (strcmp(backend, on_device ? "cuda" : "cpu") != 0) {
        fprintf(stderr, "embed_host: backend %s with %s memory\n", backend, on_device ? "device" : "host");
        ok = 0;
    }
    lua_close(L);       /* the module is gone: the memory must still be ours, unchanged */

    float *back = host;
#ifdef GR_WITH_CUDA
    if (on_device) {
        back = malloc(n * sizeof *back);
        if (!back || cudaMemcpy(back, mem, n * sizeof *back, cudaMemcpyDeviceToHost) != cudaSuccess) ok = 0;
        if (cudaFree(mem) != cudaSuccess) ok = 0;
    }
#endif
    for (size_t i = 0; ok && i < n; i++)
        if (back[i] != (float)((int)(i % 7) - 3) * 0.5f) {
            fprintf(stderr, "embed_host: element %zu changed\n", i);
            ok = 0;
        }
    printf("embed_host: %s (backend %s, %s memory, sum %.17g)\n", ok ? "ok" : "FAILED", backend,
           on_device ? "device" : "host", sum);
    return ok ? 0 : 1;
}
