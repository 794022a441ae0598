/*
 * lby_key.c -- gr.reduce_by_key(keys, values, opts) from Lua (engine/core/by_key.c): the distinct keys in
 * ascending order and one result per key -- a buffer, two for argmin/argmax/minmax, or with opts.ops a
 * table keyed by op name. opts.sorted says equal keys are already consecutive; opts.out = {keys, result
 * [, second]} gives the buffers to fill, and the call returns views of their first elements. The other
 * options are gr.reduce's (lrequest.c reads them); an operator's segments kernels, or its cpu functions,
 * are prepared there (LGR_FOR_KEYS).
 */
#include "lby_key.h"
#include "lbuffer.h"
#include "lrequest.h"

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

/* A buffer of the engine's (a new one, or a view of a given one) pushed as a Buffer. */
static void push_buffer(lua_State *L, gr_buffer *b) {
    lbuffer *u = lgr_new_buffer_ud(L);
    u->b = b;
    lgr_track(L, gr_buffer_size(b) * gr_dtype_size(gr_buffer_dtype(b)));
}

/* One op's one or two results: pushed as they are, or as a table {first, second} where `as_table`. */
static void push_results(lua_State *L, gr_buffer *out[2], int as_table) {
    int count = out[1] ? 2 : 1;
    if (as_table && count == 2) lua_createtable(L, 2, 0);
    for (int i = 0; i < count; i++) {
        push_buffer(L, out[i]);
        if (as_table && count == 2) lua_rawseti(L, -2, i + 1);
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
    if (r.has_out) given_outs(L, &r, results, &keys_out, outs[0]);
    int given = r.has_out;
    size_t count;
    LGR_RETRY(L, st, gr_reduce_by_key(ctx, keys, values, &r.o, r.sorted, r.ops, r.nops, &keys_out, outs, &count));
    if (st != GR_OK) return lgr_fail(L, st, 3, "keys", 1, "values", 2, NULL);
    /* the caller's buffers come back as views of their first `count` elements */
    if (given) {
        gr_buffer *view;
        if ((st = gr_buffer_slice(ctx, keys_out, 0, count, &view)) != GR_OK) return lgr_fail(L, st, 3, NULL);
        keys_out = view;
        for (int i = 0; i < results; i++) {
            if ((st = gr_buffer_slice(ctx, outs[0][i], 0, count, &view)) != GR_OK) return lgr_fail(L, st, 3, NULL);
            outs[0][i] = view;
        }
    }
    push_buffer(L, keys_out);
    if (!r.nops) {
        push_results(L, outs[0], 0);
        return 1 + results;
    }
    lua_createtable(L, 0, r.nops);
    for (int k = 0; k < r.nops; k++) {
        push_results(L, outs[k], 1);
        lua_setfield(L, -2, gr_op_name(r.ops[k]));
    }
    return 2;
}
