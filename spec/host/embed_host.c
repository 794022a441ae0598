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
    /* Every exit below goes through `done`, which releases what is still held. */
    void *mem = host;
#ifdef GR_WITH_CUDA
    void *dev = NULL;                  /* device memory not yet freed */
#endif
    float *back = NULL;
    const float *seen = host;
    lua_State *L = NULL;
    int on_device = 0, ok = 0;
    double sum = 0, mx = 0, tail = 0;
    char backend[16] = "?";
#ifdef GR_WITH_CUDA
    const char *want = getenv("GPUREDUCE_BACKEND");
    int count = 0;
    if (!(want && strcmp(want, "cpu") == 0) && cudaGetDeviceCount(&count) == cudaSuccess && count > 0) {
        if (cudaMalloc(&dev, n * sizeof *host) != cudaSuccess ||
            cudaMemcpy(dev, host, n * sizeof *host, cudaMemcpyHostToDevice) != cudaSuccess) {
            fprintf(stderr, "embed_host: cannot set up device memory\n");
            goto done;
        }
        mem = dev;
        on_device = 1;
    }
    cudaGetLastError();
#endif

    L = luaL_newstate();
    if (!L) goto done;
    luaL_openlibs(L);
    if (luaL_loadstring(L, script) != LUA_OK) {
        fprintf(stderr, "embed_host: %s\n", lua_tostring(L, -1));
        goto done;
    }
    lua_pushlightuserdata(L, mem);
    lua_pushinteger(L, (lua_Integer)n);
    lua_pushstring(L, on_device ? "device" : "host");
    if (lua_pcall(L, 3, 4, 0) != LUA_OK) {
        fprintf(stderr, "embed_host: script failed: %s\n", lua_tostring(L, -1));
        goto done;
    }
    ok = 1;
    sum = lua_tonumber(L, -4);
    mx = lua_tonumber(L, -3);
    tail = lua_tonumber(L, -2);
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
    L = NULL;

#ifdef GR_WITH_CUDA
    if (on_device) {
        back = malloc(n * sizeof *back);
        if (!back || cudaMemcpy(back, dev, n * sizeof *back, cudaMemcpyDeviceToHost) != cudaSuccess) ok = 0;
        if (cudaFree(dev) != cudaSuccess) ok = 0;
        dev = NULL;
        seen = back;
    }
#endif
    for (size_t i = 0; ok && i < n; i++)
        if (seen[i] != (float)((int)(i % 7) - 3) * 0.5f) {
            fprintf(stderr, "embed_host: element %zu changed\n", i);
            ok = 0;
        }
    printf("embed_host: %s (backend %s, %s memory, sum %.17g)\n", ok ? "ok" : "FAILED", backend,
           on_device ? "device" : "host", sum);

done:
    if (L) lua_close(L);
#ifdef GR_WITH_CUDA
    if (dev) cudaFree(dev);
#endif
    free(back);
    free(host);
    return ok ? 0 : 1;
}
