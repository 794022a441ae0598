/*
 * lcore.h -- what every file of the binding (module gpureduce.core) stands on (lcore.c): the module's
 * context, failures raised as Lua errors, the out-of-memory retry, and Lua values <-> engine values.
 *
 * No CUDA header here or in any header of the binding: everything goes through engine/gr.h. Every
 * function the module registers has the context userdata as upvalue 1, where lgr_ctx finds it.
 */
#ifndef LGR_LCORE_H
#define LGR_LCORE_H

#include "lcompat.h"

#include <stddef.h>

#include "../engine/gr.h"

/* ---- the context and failures ---------------------------------------------------------------------- */

/* The module's context userdata pushed: the Lua state's one, made on the first call (kept in the
 * registry: a module loaded twice shares it). */
void lgr_push_context(lua_State *L);

/* The context; raises a clear error once the Lua state's closing has destroyed it (a finalizer that
 * runs after the module's own may still call in). */
gr_context *lgr_ctx(lua_State *L);
/* The context or NULL when it is gone: for the release functions, which never raise. */
gr_context *lgr_ctx_or_null(lua_State *L);
/* The context's cache of compiled operators; raises when memory runs out. */
gr_operator_cache *lgr_operator_cache(lua_State *L);

/* Raises the engine's last failure. Misuse is blamed on an argument: `args` maps the parameter names
 * the engine reports (gr_errarg, e.g. "values") to argument positions, as pairs ending with NULL; any
 * other name is an option and is said "opts.<name>" of argument `opts_arg` (0: no options argument).
 * Failures of the environment raise "gpureduce: <message>" with the CUDA error's name. */
int lgr_fail(lua_State *L, gr_status st, int opts_arg, ...);

/* After an out-of-memory failure: runs a full collection (finalizers free unreachable buffers) and
 * returns 1 so that the caller tries once more; 0 for any other status. LGR_RETRY is how it is used. */
int lgr_retry_after_gc(lua_State *L, gr_status st);
/* st = call, and after an out-of-memory status one full collection and the call once more: the one
 * recovery of every binding call that may allocate. `call` is evaluated a second time on a retry. */
#define LGR_RETRY(L, st, call)                                   \
    do {                                                         \
        (st) = (call);                                           \
        if (lgr_retry_after_gc((L), (st))) (st) = (call);        \
    } while (0)
/* Tells the collector about `bytes` held outside the Lua heap by a new object (a buffer looks like a
 * few bytes to it otherwise, and a loop that drops large buffers would run out of device memory
 * before the collector thought of running). */
void lgr_track(lua_State *L, size_t bytes);

/* ---- values ---------------------------------------------------------------------------------------- */

/* A Lua number as an engine scalar (integers stay exact, floats stay floats); raises otherwise, booleans
 * included, naming `what` and the type given. */
gr_scalar lgr_check_number(lua_State *L, int arg, const char *what);
/* A value for an element of dtype t: lgr_check_number, and for bool a Lua boolean too. */
gr_scalar lgr_check_value(lua_State *L, int arg, const char *what, gr_dtype t);
void lgr_push_scalar(lua_State *L, gr_scalar s);
/* lgr_push_scalar that never raises for the value (an int64 beyond 2^53 that gr.int64's mode refuses on
 * 5.1 and LuaJIT): 1 pushed, or 0 with the message in err (errlen bytes) and nothing pushed. For code that
 * must not raise (an operator's cpu functions, called from the engine). */
int lgr_push_scalar_or(lua_State *L, gr_scalar s, char *err, size_t errlen);
/* gr.int64([mode]): what an int64/uint64 value beyond 2^53 becomes on a Lua without 64-bit integers
 * (lgr_push_scalar); returns the mode before. */
int lgr_int64(lua_State *L);
/* Pushes the values of a result (one or two); returns how many. */
int lgr_push_result(lua_State *L, const gr_result *r);
/* A result as one value (opts.ops' entries): the scalar, or a table {value, index} / {min, max} for the
 * ops with two. */
void lgr_push_value(lua_State *L, const gr_result *r);
/* Fields of the table on the top of the stack (a NULL string sets no field). */
static inline void lgr_set_int(lua_State *L, const char *k, lua_Integer v) {
    lua_pushinteger(L, v);
    lua_setfield(L, -2, k);
}
static inline void lgr_set_num(lua_State *L, const char *k, double v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}
static inline void lgr_set_str(lua_State *L, const char *k, const char *v) {
    lua_pushstring(L, v);
    lua_setfield(L, -2, k);
}
static inline void lgr_set_bool(lua_State *L, const char *k, int v) {
    lua_pushboolean(L, v);
    lua_setfield(L, -2, k);
}
/* The length of the list at arg as # gives it (its __len too; read its elements with lua_geti, which
 * honours __index), refusing holes: a raw integer key past that length raises "<prefix>a list with
 * holes (no element k of n)". */
lua_Integer lgr_list_len(lua_State *L, int arg, const char *prefix);
/* An integer argument within [min, max]; raises naming `what` and the value given. */
lua_Integer lgr_check_integer(lua_State *L, int arg, const char *what, lua_Integer min, lua_Integer max);
gr_dtype lgr_check_dtype(lua_State *L, int arg, const char *def);

#endif
