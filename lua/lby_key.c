/*
 * lby_key.c -- gr.reduce_by_key(keys, values, opts) from Lua (engine/core/by_key.c): the distinct keys in
 * ascending order and one result per key -- a buffer, two for argmin/argmax/minmax, or with opts.ops a
 * table keyed by op name. opts.sorted says equal keys are already consecutive; opts.out = {keys, result
 * [, second]} gives the buffers to fill (with opts.ops {keys = ..., <op> = buffer or {first, second}}, any of
 * them), and the call returns views of their first elements. The other
 * options are gr.reduce's (lrequest.c reads them); an operator's segments kernels, or its cpu functions,
 * are prepared there (LGR_FOR_KEYS).
 */
#include "lby_key.h"
#include "lbuffer.h"
#include "lrequest.h"

#include <string.h>

/* opts.out: {keys, result [, second]} into keys_out and results (as many results as the op has). */
static void given_outs(lua_State *L, const lgr_request *r, int results, gr_buffer **keys_out, gr_buffer *out[2]) {
    lua_getfield(L, r->arg, "out");
    int list = lua_gettop(L);
    if (!lua_istable(L, list) || luaL_testudata(L, list, BUFFER_MT) || lgr_list_len(L, list, "opts.out: ") != 1 + results)
        luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.out: a list of %d buffers {keys, %s}", 1 + results,
                                                 results > 1 ? "first result, second result" : "results"));
    for (int i = 0; i <= results; i++) {
        lua_geti(L, list, i + 1);
        lbuffer *u = luaL_testudata(L, -1, BUFFER_MT);
        if (!u || !u->b) luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.out[%d]: expected a gpureduce.Buffer", i + 1));
        if (i == 0) *keys_out = u->b;
        else out[i - 1] = u->b;
        lua_pop(L, 1);                          /* the options table keeps it alive */
    }
    lua_pop(L, 1);
}

/* A given result of the wrong dtype, refused before anything runs (the engine would find it only once it
 * came to that op, after writing the keys and the ops before it). */
static void check_dtype(lua_State *L, const lgr_request *r, const char *name, gr_buffer *b, gr_dtype want) {
    if (gr_buffer_dtype(b) != want)
        luaL_argerror(L, r->arg, lua_pushfstring(L, "%s: is %s; this result is %s", name,
                                                 gr_dtype_name(gr_buffer_dtype(b)), gr_dtype_name(want)));
}

/* opts.out with opts.ops: {keys = buffer, <op> = buffer or {first, second}, ...}, each entry what opts.out
 * takes for that op alone (its results), into keys_out and outs[k]; NULL where an entry is absent (a new
 * buffer). Their dtypes are checked here, naming the entry; their sizes (against the number of distinct
 * keys) by the engine. */
static void given_entries(lua_State *L, lgr_request *r, gr_buffer *keys, gr_buffer *values, gr_buffer **keys_out,
                          gr_buffer *outs[][2]) {
    gr_context *ctx = lgr_ctx(L);
    lua_getfield(L, r->arg, "out");
    int table = lua_gettop(L);
    lua_getfield(L, table, "keys");
    if (!lua_isnil(L, -1)) {
        lbuffer *u = luaL_testudata(L, -1, BUFFER_MT);
        if (!u) luaL_argerror(L, r->arg, lua_pushfstring(L, "opts.out.keys: expected a gpureduce.Buffer, got %s",
                                                         luaL_typename(L, -1)));
        if (!u->b) luaL_argerror(L, r->arg, "opts.out.keys: buffer has been freed");
        check_dtype(L, r, "opts.out.keys", u->b, gr_buffer_dtype(keys));
        *keys_out = u->b;
    }
    gr_op asked = r->o.op;
    for (int k = 0; k < r->nops; k++) {
        lua_settop(L, table);
        r->o.op = r->ops[k];
        gr_dtype dt[2];
        int count;         /* every op's own refusal before anything is written, with an entry or not */
        gr_status st = gr_segment_result_dtypes(ctx, &r->o, gr_buffer_dtype(values), dt, &count);
        if (st != GR_OK) lgr_fail(L, st, r->arg, "keys", 1, "values", 2, NULL);
        if (lua_getfield(L, table, gr_op_name(r->ops[k])) == LUA_TNIL) continue;
        r->out_at = lua_gettop(L);
        lgr_request_given_outs(L, r, count, outs[k]);
        for (int i = 0; i < count; i++) {
            char name[LGR_OUT_NAME];
            lgr_request_out_name(r, count > 1 ? i + 1 : 0, name);
            check_dtype(L, r, name, outs[k][i], dt[i]);
        }
    }
    r->o.op = asked;
    r->out_at = 0;
    lua_settop(L, table - 1);                   /* the options table keeps the buffers alive */
}

/* A result: a new buffer of the engine's, or where `given` the caller's buffer that the engine filled, as
 * a view of its first `count` elements (pushed as a Buffer either way). */
static void push_buffer(lua_State *L, gr_buffer *b, int given, size_t count) {
    lbuffer *u = lgr_new_buffer_ud(L);
    if (given) {
        gr_status st = gr_buffer_slice(lgr_ctx(L), b, 0, count, &u->b);
        if (st != GR_OK) lgr_fail(L, st, 3, NULL);
        return;
    }
    u->b = b;
    lgr_track(L, gr_buffer_size(b) * gr_dtype_size(gr_buffer_dtype(b)));
}

/* One op's one or two results: pushed as they are, or as a table {first, second} where `as_table`. */
static void push_results(lua_State *L, gr_buffer *out[2], gr_buffer *given[2], size_t count, int as_table) {
    int results = out[1] ? 2 : 1;
    if (as_table && results == 2) lua_createtable(L, 2, 0);
    for (int i = 0; i < results; i++) {
        push_buffer(L, out[i], given[i] != NULL, count);
        if (as_table && results == 2) lua_rawseti(L, -2, i + 1);
    }
}

int lgr_reduce_by_key(lua_State *L) {
    gr_buffer *keys = lgr_check_buffer(L, 1), *values = lgr_check_buffer(L, 2);
    lgr_request r;
    lgr_request_read(L, 3, -1, LGR_READ_OPS | LGR_READ_KEYS, &r);
    if (!r.op_given && !r.nops)
        luaL_argerror(L, 3, "opts.op: required: an op's name, a gr.operator, or opts.ops = {...}");
    if (r.async || r.streamed || r.segment || r.offsets || r.naxes || r.dtype >= 0)
        luaL_argerror(L, 3, "opts: gr.reduce_by_key takes the op (or ops), sorted, out, acc, ddof and determinism "
                            "(not async, streamed, segment, offsets, axis or dtype)");
    lgr_request_prepare(L, &r, LGR_FOR_KEYS, &values, 1);
    gr_context *ctx = lgr_ctx(L);
    gr_dtype dt[2];
    int results = 1;
    gr_status st = gr_segment_result_dtypes(ctx, &r.o, gr_buffer_dtype(values), dt, &results);
    if (st != GR_OK && !r.nops) return lgr_fail(L, st, 3, "keys", 1, "values", 2, NULL);
    gr_buffer *keys_out = NULL, *outs[GR_OP_COUNT][2] = {{NULL, NULL}};
    if (r.has_out && r.nops) given_entries(L, &r, keys, values, &keys_out, outs);
    else if (r.has_out) given_outs(L, &r, results, &keys_out, outs[0]);
    gr_buffer *given_keys = keys_out, *given[GR_OP_COUNT][2];     /* the caller's, which the engine keeps */
    memcpy(given, outs, sizeof given);
    size_t count;
    LGR_RETRY(L, st, gr_reduce_by_key(ctx, keys, values, &r.o, r.sorted, r.ops, r.nops, &keys_out, outs, &count));
    if (st != GR_OK) return lgr_fail(L, st, 3, "keys", 1, "values", 2, NULL);
    push_buffer(L, keys_out, given_keys != NULL, count);
    if (!r.nops) {
        push_results(L, outs[0], given[0], count, 0);
        return 1 + results;
    }
    lua_createtable(L, 0, r.nops);
    for (int k = 0; k < r.nops; k++) {
        push_results(L, outs[k], given[k], count, 1);
        lua_setfield(L, -2, gr_op_name(r.ops[k]));
    }
    return 2;
}
