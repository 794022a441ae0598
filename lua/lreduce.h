/*
 * lreduce.h -- reductions from Lua (lreduce.c): gr.reduce, the shortcuts, gr.reduce_many, and the
 * Pending userdata.
 */
#ifndef LGR_LREDUCE_H
#define LGR_LREDUCE_H

#include "lcore.h"

#define PENDING_MT "gpureduce.Pending"

int lgr_reduce(lua_State *L);
int lgr_reduce_op(lua_State *L);     /* upvalue 2: the op's id */
int lgr_reduce_many(lua_State *L);

/* A Pending userdata: the engine's work (p), and nout result buffers of a reduction along axes (user
 * values 3 and on), which wait returns; user value 1 keeps the input alive, 2 opts.stream. */
typedef struct { gr_pending *p; int nout; } lgr_pending;
/* A new Pending with room for nout results, on the top of the stack (p NULL until the work starts). */
lgr_pending *lgr_new_pending(lua_State *L, int nout);
extern const luaL_Reg lgr_pending_methods[], lgr_pending_meta[];

#endif
