/*
 * linputs.c -- an operator of several inputs from Lua: the list of buffers of gr.reduce({a, w, ...},
 * {op = op}) and gr.bench read and prepared (one shape, the operator's inputs in order; its kernels for
 * their dtypes or its cpu functions, lrequest.c's LGR_FOR_INPUTS), and the synchronous reductions
 * (engine/core/inputs.c): a number, or with segment, offsets or axis the results' buffer. lreduce.c starts
 * the asynchronous one, linfo.c times them.
 */
#include "linputs.h"
#include "laxes.h"
#include "lbuffer.h"

int lgr_is_buffer_list(lua_State *L, int arg) {
    if (lua_type(L, arg) != LUA_TTABLE) return 0;
    if (lua_getmetatable(L, arg)) {             /* a sharded buffer, or another object: not a plain list */
        lua_pop(L, 1);
        return 0;
    }
    int first = lua_geti(L, arg, 1);
    int is = first == LUA_TUSERDATA && luaL_testudata(L, -1, BUFFER_MT) != NULL;
    lua_pop(L, 1);
    return is;
}

/* The list at argument 1: as many buffers as opts.op names inputs, into bufs. Returns the count. */
static int read_list(lua_State *L, const lgr_request *r, gr_buffer *bufs[GR_OPERATOR_INPUTS]) {
    if (!r->user_op)
        luaL_argerror(L, 1, "a list of buffers is the inputs of an operator of several inputs (opts.op = "
                            "gr.operator{inputs = {...}}); for a result per buffer use gr.reduce_many");
    const gr_operator_spec *s = gr_operator_get_spec(r->user_op);
    int want = gr_operator_inputs(r->user_op);
    lua_Integer n = lgr_list_len(L, 1, "");
    if (n != want)
        luaL_argerror(L, 1, lua_pushfstring(L, "operator %s reads %d input%s: give a list of %d buffer%s (got %I)",
                                            s->name, want, want > 1 ? "s" : "", want, want > 1 ? "s" : "", n));
    for (int k = 0; k < want; k++) {
        lua_geti(L, 1, k + 1);
        lbuffer *u = luaL_testudata(L, -1, BUFFER_MT);
        if (!u || !u->b)
            luaL_argerror(L, 1, lua_pushfstring(L, "element %d: expected a gpureduce.Buffer, got %s", k + 1,
                                                u ? "a freed buffer" : luaL_typename(L, -1)));
        bufs[k] = u->b;
        lua_pop(L, 1);          /* the list keeps the buffer alive for the call */
    }
    return want;
}

/* What a list of inputs is not reduced with. */
static void refuse_options(lua_State *L, const lgr_request *r) {
    if (r->nops) luaL_argerror(L, 2, "opts.ops: several ops go with one buffer (a list of buffers is an operator's "
                                     "inputs: opts.op)");
    if (r->streamed || r->dtype >= 0)
        luaL_argerror(L, 2, "opts.streamed: an operator of several inputs reduces buffers (not streamed host data, "
                            "chunk, streams or dtype)");
    if ((r->segment || r->offsets || r->naxes) && r->async)
        luaL_argerror(L, 2, "opts.async: an operator's inputs per segment or along axes are reduced synchronously");
    if (r->has_out && !(r->segment || r->offsets || r->naxes))
        luaL_argerror(L, 2, "opts.out: only with segment, offsets or axis (a whole reduction is a number)");
}

int lgr_inputs_read(lua_State *L, lgr_request *r, int bench, gr_buffer *bufs[GR_OPERATOR_INPUTS]) {
    refuse_options(L, r);
    if (bench && (r->segment || r->offsets || r->naxes || r->async))
        luaL_argerror(L, 2, "opts: gr.bench times an operator's inputs as whole buffers (not segment, offsets, axis "
                            "or async)");
    int count = read_list(L, r, bufs);
    r->o.ninputs = count;
    lgr_request_prepare(L, r, LGR_FOR_INPUTS, bufs, (size_t)count);
    return count;
}

int lgr_reduce_inputs(lua_State *L, lgr_request *r, gr_buffer *const *bufs, int count) {
    gr_context *ctx = lgr_ctx(L);
    gr_status st;
    if (r->segment || r->offsets || r->naxes) {
        gr_buffer *out[2];
        int results;
        if (r->naxes) {
            unsigned axes;
            results = lgr_axes_outs(L, bufs[0], r, &axes, out);
            LGR_RETRY(L, st, gr_reduce_inputs_axes(ctx, bufs, count, &r->o, axes, out));
        } else {
            results = lgr_request_outs(L, bufs[0], r, out);
            gr_segments seg = {r->segment, r->offsets};
            LGR_RETRY(L, st, gr_reduce_inputs_segments(ctx, bufs, count, &r->o, &seg, out));
        }
        if (st != GR_OK) return lgr_fail(L, st, 2, "bufs", 1, NULL);
        return results;
    }
    gr_result v;
    LGR_RETRY(L, st, gr_reduce_inputs(ctx, bufs, count, &r->o, &v));
    if (st != GR_OK) return lgr_fail(L, st, 2, "bufs", 1, NULL);
    return lgr_push_result(L, &v);
}
