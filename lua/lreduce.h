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

/* A Pending userdata: the engine's work -- p[0], or with opts.ops one pending per op (p[k] reduces ops[k],
 * nops of them), whose wait gives the table keyed by op name -- and nout results of a reduction along axes
 * (user values 3 and on: its buffers, or with opts.ops the table of them), which wait returns; user value 1
 * keeps the input alive, 2 opts.stream. */
typedef struct {
    gr_pending *p[GR_OP_COUNT];
    int nout, nops;
    gr_op ops[GR_OP_COUNT];
} lgr_pending;
/* A new Pending with room for nout results, on the top of the stack (p[k] NULL until the work starts). */
lgr_pending *lgr_new_pending(lua_State *L, int nout);
extern const luaL_Reg lgr_pending_methods[], lgr_pending_meta[];

#endif
