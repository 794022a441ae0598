/*
 * linfo.h -- tables about the engine (linfo.c): variants, devices, plans, benchmarks, the pool, names,
 * the clock and the testing hooks.
 */
#ifndef LGR_LINFO_H
#define LGR_LINFO_H

#include "lcore.h"

int lgr_backend(lua_State *L);
int lgr_bench(lua_State *L);
int lgr_bench_read(lua_State *L);
int lgr_clock(lua_State *L);
int lgr_debug_events(lua_State *L);
int lgr_debug_fault(lua_State *L);
int lgr_debug_float_decode(lua_State *L);
int lgr_debug_float_device(lua_State *L);
int lgr_debug_float_encode(lua_State *L);
int lgr_device(lua_State *L);
int lgr_devices(lua_State *L);
int lgr_dtypes(lua_State *L);
int lgr_finishes(lua_State *L);
int lgr_memory_limit(lua_State *L);
int lgr_ops(lua_State *L);
int lgr_plan(lua_State *L);
int lgr_pool_stats(lua_State *L);
int lgr_pool_trim(lua_State *L);
int lgr_variants(lua_State *L);
/* The registry entry of variant i as gr.variants() lists it, pushed. */
void lgr_push_variant(lua_State *L, int i);

/* A bench result as gr.bench returns it: times, bandwidth, the buffer's size and bytes, the timer. */
void lgr_push_bench(lua_State *L, const gr_bench_result *r, gr_buffer *b, const char *timer);

#endif
