/*
 * lsharded.h -- reductions of sharded buffers (lsharded.c).
 */
#ifndef LGR_LSHARDED_H
#define LGR_LSHARDED_H

#include "lrequest.h"

#define SHARDED_MT "gpureduce.Sharded"

/* Whether the value at idx is a sharded buffer: a table whose metatable is SHARDED_MT's (its methods
 * are Lua, in gpureduce/sharded.lua; its shards the Buffers of its field `parts`, in order). */
int lgr_is_sharded(lua_State *L, int idx);
/* gr.reduce(s, opts) and the shortcuts for a sharded buffer at 1: every shard at once on its device. */
int lgr_reduce_sharded(lua_State *L, lgr_request *r);
/* gr.dot(a, b, opts) where a or b is a sharded buffer: both must be, of one split (r read from opts at 3). */
int lgr_dot_sharded(lua_State *L, lgr_request *r);

#endif
