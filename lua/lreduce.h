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
extern const luaL_Reg lgr_pending_methods[], lgr_pending_meta[];

#endif
