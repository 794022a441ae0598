/*
 * lreduce.c -- reductions from Lua: gr.reduce and its shortcuts (their options read by lrequest.c),
 * streamed host data, gr.reduce_many, and the Pending userdata of asynchronous work.
 *
 * A Pending keeps the buffer it reads (user value 1) and the stream it runs on (user value 2) alive
 * while the work is in flight; collecting an unfinished Pending waits for it. With opts.ops it holds one
 * engine pending per op (those the fused kernel answers share its one pass), and its wait gathers their
 * results into the table the synchronous call gives.
 */
#include "lreduce.h"
#include "laxes.h"
#include "lbuffer.h"
#include "linputs.h"
#include "lrequest.h"
#include "lsharded.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- reductions ---------------------------------------------------------------------------------- */

static int push_pending(lua_State *L, gr_buffer *b, const lgr_request *r);
static int push_ops_pending(lua_State *L, gr_buffer *b, const lgr_request *r);
static int push_axes_pending(lua_State *L, gr_buffer *b, const lgr_request *r);

/* The Pending on the top of the stack keeps the buffer (argument 1) and opts.stream alive while in
 * flight (user values 1 and 2). */
static void hold_while_in_flight(lua_State *L, const lgr_request *r) {
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    if (r->o.stream) {
        lua_getfield(L, 2, "stream");
        lua_setiuservalue(L, -2, 2);
    }
}

/* A table or byte string reduced as streamed host data: staged through pinned memory first. */
static int reduce_source(lua_State *L, lgr_request *r) {
    gr_context *ctx = lgr_ctx(L);
    gr_dtype t = r->dtype < 0 ? GR_FLOAT32 : (gr_dtype)r->dtype;
    void *data;
    size_t n = lgr_stage_source(L, 1, t, &data);
    lbuffer *u = lgr_new_buffer_ud(L);       /* collected, and so freed, even if a step below raises */
    gr_status st;
    LGR_RETRY(L, st, gr_buffer_new(ctx, n, t, GR_HOST, &u->b));
    if (st == GR_OK) st = gr_buffer_write(ctx, u->b, 0, data, n);
    free(data);
    if (st == GR_OK) lgr_request_prepare(L, r, LGR_FOR_RUN, &u->b, 1);    /* its kernels, or its cpu functions */
    gr_result v;
    if (st == GR_OK) LGR_RETRY(L, st, gr_reduce_streamed(ctx, u->b, &r->o, r->chunk, r->streams, &v));
    gr_buffer_free(ctx, u->b);
    u->b = NULL;
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    return lgr_push_result(L, &v);
}

/* Segmented: the results in buffers on the input's side, opts.out's or new ones. */
static int reduce_segments(lua_State *L, gr_buffer *b, const lgr_request *r) {
    gr_context *ctx = lgr_ctx(L);
    gr_segments seg = {r->segment, r->offsets};
    gr_buffer *out[2];
    int count = lgr_request_outs(L, b, r, out);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_segments(ctx, b, &r->o, &seg, out));
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    return count;
}

/* opts.op of gr.reduce and reduce_many: a misspelt variable there is nil, which must not mean sum. */
static void require_op(lua_State *L, const lgr_request *r) {
    if (!r->op_given)
        luaL_argerror(L, 2, lua_pushfstring(L, "opts.op: required: an op's name (accepted: %s) or a gr.operator "
                                               "(gr.sum and the like name theirs)", gr_op_names()));
}

/* opts.ops: a table keyed by op name, each value what gr.reduce gives for that op ({value, index} and
 * {min, max} as tables). On the GPU the ops that fuse go through one kernel. */
static int reduce_ops(lua_State *L, gr_buffer *b, const lgr_request *r) {
    gr_context *ctx = lgr_ctx(L);
    const gr_image *fused = lgr_request_fused(L, r, gr_buffer_dtype(b), gr_buffer_where(b));
    gr_status st;
    gr_result res[GR_OP_COUNT];
    LGR_RETRY(L, st, gr_reduce_ops(ctx, b, &r->o, r->ops, r->nops, fused, res));
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    lua_createtable(L, 0, r->nops);
    for (int k = 0; k < r->nops; k++) {
        lgr_push_value(L, &res[k]);
        lua_setfield(L, -2, gr_op_name(r->ops[k]));
    }
    return 1;
}

/* opts.ops with opts.out: op k's entry opts.out.<op> pushed (nil where it has none), r set to reduce that
 * op into it (r->has_out, r->out_at) or into new buffers. Returns whether it has one. */
static int enter_op(lua_State *L, lgr_request *r, int outs, int k) {
    r->o.op = r->ops[k];
    if (outs) lua_getfield(L, outs, gr_op_name(r->ops[k]));
    else lua_pushnil(L);
    r->has_out = !lua_isnil(L, -1);
    r->out_at = r->has_out ? lua_gettop(L) : 0;
    return r->has_out;
}

/* Whether two buffers' elements share bytes (views of one memory). */
static int share_memory(const gr_buffer *a, const gr_buffer *b) {
    if (gr_buffer_where(a) != gr_buffer_where(b) || gr_buffer_device(a) != gr_buffer_device(b)) return 0;
    uintptr_t pa = (uintptr_t)gr_buffer_data(a), pb = (uintptr_t)gr_buffer_data(b);
    size_t na = gr_buffer_size(a) * gr_dtype_size(gr_buffer_dtype(a));
    size_t nb = gr_buffer_size(b) * gr_dtype_size(gr_buffer_dtype(b));
    return na && nb && pa < pb + nb && pb < pa + na;
}

/* The engine's failure over the op's entry (count buffers): its "out" and "out2" said as the entry. */
static int fail_entry(lua_State *L, const lgr_request *r, gr_status st, int count) {
    gr_context *ctx = lgr_ctx(L);
    const char *arg = gr_errarg(ctx), *msg = gr_errmsg(ctx);
    int second = strcmp(arg, "out2") == 0;
    size_t len = strlen(arg);
    if (st != GR_EINVAL || (!second && strcmp(arg, "out") != 0)) return lgr_fail(L, st, r->arg, NULL);
    if (strncmp(msg, arg, len) == 0 && msg[len] == ':') msg += len + (msg[len + 1] == ' ' ? 2 : 1);
    char name[LGR_OUT_NAME];
    lgr_request_out_name(r, second ? 2 : count > 1 ? 1 : 0, name);
    return luaL_argerror(L, r->arg, lua_pushfstring(L, "%s: %s", name, msg));
}

/* opts.ops with segment, offsets or axis and opts.out (the table at `outs`): every op checked before any
 * runs, so that a failed call writes nothing -- its plan, and its entry as its own call checks opts.out
 * (errors naming opts.out.<op>), no entry sharing memory with another's. */
static void check_entries(lua_State *L, gr_buffer *b, lgr_request *r, int outs) {
    gr_context *ctx = lgr_ctx(L);
    gr_buffer *given[GR_OP_COUNT][2] = {{NULL, NULL}};
    gr_segments seg = {r->segment, r->offsets};
    for (int k = 0; k < r->nops; k++) {
        int base = lua_gettop(L);
        gr_dtype dt[2];
        int count;
        gr_status st;
        if (!enter_op(L, r, outs, k)) {
            if ((st = gr_segment_result_dtypes(ctx, &r->o, gr_buffer_dtype(b), dt, &count)) != GR_OK)
                lgr_fail(L, st, r->arg, NULL);
            lua_settop(L, base);
            continue;
        }
        unsigned axes = 0;
        count = r->naxes ? lgr_axes_outs(L, b, r, &axes, given[k]) : lgr_request_outs(L, b, r, given[k]);
        if ((st = gr_segment_outs_ready(ctx, b, &r->o, r->naxes ? NULL : &seg, axes, given[k])) != GR_OK)
            fail_entry(L, r, st, count);
        for (int j = 0; j < k; j++)
            for (int i = 0; i < count; i++)
                for (int m = 0; m < 2 && given[j][m]; m++) {
                    if (!share_memory(given[k][i], given[j][m])) continue;
                    char name[LGR_OUT_NAME], other[LGR_OUT_NAME];
                    lgr_request_out_name(r, count > 1 ? i + 1 : 0, name);
                    r->o.op = r->ops[j];
                    lgr_request_out_name(r, given[j][1] ? m + 1 : 0, other);
                    luaL_argerror(L, r->arg, lua_pushfstring(L, "%s: shares memory with %s: give a buffer of its own",
                                                             name, other));
                }
        lua_settop(L, base);
    }
}

/* The segmented fused image for r's ops over b, where two or more of them may go in one launch along
 * these segments (seg) or rows (mask) (gr_reduce_ops_segments_fusable); NULL where each op takes a call
 * of its own (also without NVRTC: the same results). */
static const gr_image *fused_rows_image(lua_State *L, const lgr_request *r, gr_buffer *b, const gr_segments *seg,
                                        unsigned mask) {
    gr_context *ctx = lgr_ctx(L);
    const gr_image *img = NULL;
    if (!gr_reduce_ops_segments_fusable(ctx, b, &r->o, r->ops, r->nops, seg, mask)) return NULL;
    gr_status st = gr_fused_prepare_segments(ctx, lgr_operator_cache(L), r->ops, r->nops, gr_buffer_dtype(b),
                                             r->o.acc, &img);
    if (st != GR_OK && st != GR_ENODEV) lgr_fail(L, st, r->arg, NULL);
    return img;
}

/* opts.ops with segment, offsets or axis: first every op's result buffer(s), opts.out's entry or new ones,
 * under its name (two-result ops as a table of their two buffers); then on the GPU the ops that fuse
 * along these segments or rows by one launch, one read of the data (gr_reduce_ops_segments), and every
 * other op by a call of its own into its buffers. With opts.async (along axes) a Pending of one engine
 * pending per launch, whose wait returns the table. */
static int reduce_ops_many(lua_State *L, gr_buffer *b, lgr_request *r) {
    gr_context *ctx = lgr_ctx(L);
    int outs = 0;
    if (r->has_out) {
        lua_getfield(L, r->arg, "out");
        outs = lua_gettop(L);
        check_entries(L, b, r, outs);
    }
    lgr_pending *u = r->async ? lgr_new_pending(L, 1) : NULL;
    lua_createtable(L, 0, r->nops);
    int table = lua_gettop(L);
    gr_op asked = r->o.op;
    gr_buffer *out[GR_OP_COUNT][2];
    unsigned mask = 0;
    for (int k = 0; k < r->nops; k++) {
        enter_op(L, r, outs, k);
        out[k][0] = out[k][1] = NULL;
        int count = r->naxes ? lgr_axes_outs(L, b, r, &mask, out[k]) : lgr_request_outs(L, b, r, out[k]);
        if (count > 1) {
            lua_createtable(L, count, 0);
            lua_insert(L, -count - 1);
            for (int i = count; i >= 1; i--) lua_rawseti(L, -(i + 1), i);     /* the top is result i */
        }
        lua_setfield(L, table, gr_op_name(r->ops[k]));       /* the table keeps the buffers alive */
        lua_settop(L, table);                   /* the entry */
    }
    r->o.op = asked;
    r->has_out = outs != 0;
    r->out_at = 0;
    gr_segments seg = {r->segment, r->offsets};
    const gr_segments *along = r->naxes ? NULL : &seg;
    int done[GR_OP_COUNT] = {0};
    gr_pending **next = u ? u->p : NULL;
    const gr_image *fused = fused_rows_image(L, r, b, along, mask);
    gr_status st;
    if (fused) {
        LGR_RETRY(L, st, gr_reduce_ops_segments(ctx, b, &r->o, r->ops, r->nops, fused, along, mask, out, done, next));
        if (st != GR_OK) return lgr_fail(L, st, r->arg, NULL);
        if (next && *next) next++;
    }
    for (int k = 0; k < r->nops; k++) {
        if (done[k]) continue;
        gr_options one = r->o;
        one.op = r->ops[k];
        LGR_RETRY(L, st, next ? gr_reduce_axes_async(ctx, b, &one, mask, out[k], next)
                         : along ? gr_reduce_segments(ctx, b, &one, along, out[k])
                                 : gr_reduce_axes(ctx, b, &one, mask, out[k]));
        if (st != GR_OK) return lgr_fail(L, st, r->arg, NULL);
        if (next) next++;
    }
    if (!u) return 1;
    u->nops = (int)(next - u->p);
    lua_setiuservalue(L, table - 1, 3);         /* the table, which wait returns */
    hold_while_in_flight(L, r);
    return 1;
}

/* Whether r's whole-buffer result is the same whatever the elements' order but for rounding (opts.ops:
 * every op's). */
static int order_free(const lgr_request *r) {
    for (int k = 0; k < r->nops; k++)
        if (r->ops[k] == GR_ARGMIN || r->ops[k] == GR_ARGMAX) return 0;
    return lgr_request_order_free(r);
}

/* gr.reduce over a list of an operator's inputs: synchronously (linputs.c), or with opts.async a Pending
 * whose wait gives the value (the engine's pending holds the inputs' memory; the Pending keeps
 * opts.stream, user value 2). */
static int reduce_inputs(lua_State *L, lgr_request *r) {
    gr_buffer *bufs[GR_OPERATOR_INPUTS];
    int count = lgr_inputs_read(L, r, 0, bufs);
    if (!r->async) return lgr_reduce_inputs(L, r, bufs, count);
    lgr_pending *u = lgr_new_pending(L, 0);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_inputs_async(lgr_ctx(L), bufs, count, &r->o, &u->p[0]));
    if (st != GR_OK) return lgr_fail(L, st, 2, "bufs", 1, NULL);
    if (r->o.stream) {
        lua_getfield(L, 2, "stream");
        lua_setiuservalue(L, -2, 2);
    }
    return 1;
}

static int reduce_with(lua_State *L, int op) {
    lgr_request r;
    int is_buffer = luaL_testudata(L, 1, BUFFER_MT) != NULL;
    lgr_request_read(L, 2, op, op < 0 ? LGR_READ_OPS : 0, &r);
    if (op < 0 && !r.nops) require_op(L, &r);
    /* an operator's inputs: a list of buffers, or any table given with an operator (but a streamed source) */
    if (!is_buffer && !lgr_is_sharded(L, 1) &&
        (lgr_is_buffer_list(L, 1) || (lua_type(L, 1) == LUA_TTABLE && r.user_op && !r.streamed)))
        return reduce_inputs(L, &r);
    if (is_buffer && r.user_op && gr_operator_inputs(r.user_op) > 1)
        luaL_argerror(L, 1, lua_pushfstring(L, "operator %s reads %d inputs: give a list of %d buffers {b1, b2, ...}",
                                            gr_operator_get_spec(r.user_op)->name, gr_operator_inputs(r.user_op),
                                            gr_operator_inputs(r.user_op)));
    if (!is_buffer && lgr_is_sharded(L, 1)) return lgr_reduce_sharded(L, &r);
    if (!is_buffer && r.streamed && (lua_type(L, 1) == LUA_TTABLE || lua_type(L, 1) == LUA_TSTRING))
        return reduce_source(L, &r);
    if (r.naxes) {                                  /* along axes: the view as it is, strided or not */
        gr_buffer *v = lgr_check_buffer(L, 1);
        if (r.dtype >= 0)
            luaL_argerror(L, 2, "opts.dtype: only for a table or byte-string source (a buffer has its own dtype)");
        if (r.nops) return reduce_ops_many(L, v, &r);
        lgr_request_prepare(L, &r, LGR_FOR_RUN, &v, 1);
        return r.async ? push_axes_pending(L, v, &r) : lgr_reduce_axes(L, v, &r);
    }
    gr_buffer *b = lgr_check_reduced_buffer(L, 1, order_free(&r));
    if (r.dtype >= 0)
        luaL_argerror(L, 2, "opts.dtype: only for a table or byte-string source (a buffer has its own dtype)");
    if (r.nops && (r.segment || r.offsets)) return reduce_ops_many(L, b, &r);
    if (r.nops) return r.async ? push_ops_pending(L, b, &r) : reduce_ops(L, b, &r);
    lgr_request_prepare(L, &r, LGR_FOR_RUN, &b, 1);   /* its kernels, or its operator's cpu functions */
    if (r.segment || r.offsets) return reduce_segments(L, b, &r);
    if (r.async) return push_pending(L, b, &r);
    gr_context *ctx = lgr_ctx(L);
    gr_result v;
    gr_status st;
    LGR_RETRY(L, st, r.streamed ? gr_reduce_streamed(ctx, b, &r.o, r.chunk, r.streams, &v)
                                : gr_reduce(ctx, b, &r.o, &v));
    if (st == GR_EINVAL && r.streamed && strcmp(gr_errarg(ctx), "streamed") == 0)
        return luaL_argerror(L, 2, lua_pushfstring(L, "opts.%s, or pass a table or a byte string with opts.dtype",
                                                   gr_errmsg(ctx)));
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    return lgr_push_result(L, &v);
}

int lgr_reduce(lua_State *L) { return reduce_with(L, -1); }

/* bufs[where[j]] for j < m reduced with r's options (the cpu functions, or one dtype's kernels), the
 * values stored at those places of the results table. */
static void reduce_group(lua_State *L, lgr_request *r, gr_buffer **group, const size_t *where, size_t m,
                         gr_result *res, int results) {
    gr_context *ctx = lgr_ctx(L);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_many(ctx, group, m, &r->o, res));
    if (st != GR_OK) lgr_fail(L, st, 2, "bufs", 1, NULL);
    for (size_t j = 0; j < m; j++) {
        lgr_push_scalar(L, res[j].value[0]);
        lua_rawseti(L, results, (lua_Integer)where[j] + 1);
    }
}

/* gr.reduce_many with opts.op an operator: on the GPU the device buffers of each dtype in one launch of
 * the operator's kernels for that dtype (r->images); host data, and everything on the cpu backend,
 * through its cpu functions. Pushes the table of results. */
static int reduce_many_operator(lua_State *L, lgr_request *r, gr_buffer **bufs, size_t count) {
    lua_createtable(L, count < INT32_MAX ? (int)count : 0, 0);
    int results = lua_gettop(L);
    int gpu = gr_context_backend(lgr_ctx(L)) == GR_BACKEND_CUDA;
    size_t n = count ? count : 1;
    gr_buffer **group = lua_newuserdatauv(L, n * sizeof *group, 0);
    size_t *where = lua_newuserdatauv(L, n * sizeof *where, 0);
    gr_result *res = lua_newuserdatauv(L, n * sizeof *res, 0);
    for (int t = 0; t < GR_DTYPE_COUNT && gpu; t++) {
        size_t m = 0;
        for (size_t i = 0; i < count; i++)
            if (gr_buffer_dtype(bufs[i]) == (gr_dtype)t && gr_buffer_where(bufs[i]) == GR_DEVICE) {
                where[m] = i;
                group[m++] = bufs[i];
            }
        r->o.user = r->images[t];
        if (m) reduce_group(L, r, group, where, m, res, results);
    }
    size_t m = 0;
    for (size_t i = 0; i < count; i++)
        if (!gpu || gr_buffer_where(bufs[i]) != GR_DEVICE) {
            where[m] = i;
            group[m++] = bufs[i];
        }
    r->o.user = NULL;                           /* the engine runs the cpu functions over them all */
    r->o.fold = NULL;
    if (m || !gpu) reduce_group(L, r, group, where, m, res, results);
    lua_settop(L, results);
    return 1;
}

/* gr.reduce_many({b1, b2, ...}, opts): a table of results, one per buffer (a table {value, index} or
 * {min, max} for the ops with two). */
int lgr_reduce_many(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    lgr_request r;
    lgr_request_read(L, 2, -1, 0, &r);
    if (r.o.variant >= 0 && gr_variant_get(r.o.variant)->user)
        return luaL_argerror(L, 2, lua_pushfstring(L, "opts.variant: user kernel '%s' reduces one buffer per call "
                                                      "(its kernels are compiled for one dtype: call gr.reduce on "
                                                      "each)", gr_variant_get(r.o.variant)->name));
    if (r.async || r.streamed || r.segment || r.offsets || r.dtype >= 0 || r.o.stream)
        return luaL_argerror(L, 2, "opts: reduce_many takes the op and its options (op, acc, ddof, variant, block, "
                                   "finish, threshold), not async, streamed, segment, offsets, out, dtype or stream");
    lua_Integer len = lgr_list_len(L, 1, "");
    if (len < 0 || (lua_Unsigned)len > SIZE_MAX / sizeof(gr_result))
        return luaL_argerror(L, 1, lua_pushfstring(L, "a list of %I buffers", len));
    size_t count = (size_t)len;
    gr_buffer **bufs = lua_newuserdatauv(L, (count ? count : 1) * sizeof *bufs, 0);
    gr_result *res = lua_newuserdatauv(L, (count ? count : 1) * sizeof *res, 0);
    for (size_t i = 0; i < count; i++) {
        lua_geti(L, 1, (lua_Integer)i + 1);
        lbuffer *u = luaL_testudata(L, -1, BUFFER_MT);
        if (!u || !u->b)
            return luaL_argerror(L, 1, lua_pushfstring(L, "element %I: expected a gpureduce.Buffer, got %s",
                                                       (lua_Integer)i + 1, u ? "a freed buffer" : luaL_typename(L, -1)));
        bufs[i] = u->b;
        lua_pop(L, 1);
    }
    require_op(L, &r);
    lgr_request_prepare(L, &r, LGR_FOR_MANY, bufs, count);
    if (r.user_op) return reduce_many_operator(L, &r, bufs, count);
    gr_context *ctx = lgr_ctx(L);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_many(ctx, bufs, count, &r.o, res));
    if (st != GR_OK) return lgr_fail(L, st, 2, "bufs", 1, NULL);
    lua_createtable(L, count < INT32_MAX ? (int)count : 0, 0);
    for (size_t i = 0; i < count; i++) {
        lgr_push_value(L, &res[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* gr.sum, gr.argmin, ... : one closure per op of the engine's list, the op's id as upvalue 2. */
int lgr_reduce_op(lua_State *L) { return reduce_with(L, (int)lua_tointeger(L, lua_upvalueindex(2))); }

/* ---- pendings ------------------------------------------------------------------------------------ */

lgr_pending *lgr_new_pending(lua_State *L, int nout) {
    lgr_pending *u = lua_newuserdatauv(L, sizeof *u, 2 + nout);
    memset(u, 0, sizeof *u);
    u->nout = nout;
    luaL_setmetatable(L, PENDING_MT);
    return u;
}

static int push_pending(lua_State *L, gr_buffer *b, const lgr_request *r) {
    gr_context *ctx = lgr_ctx(L);
    lgr_pending *u = lgr_new_pending(L, 0);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_async(ctx, b, &r->o, &u->p[0]));
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    hold_while_in_flight(L, r);
    return 1;
}

/* opts.ops over a whole buffer: the ops started as the synchronous call runs them -- those the fused
 * kernel answers in one pass, one read of the buffer, the others each a call of its own -- an engine
 * pending per op (the values the synchronous call gives, bit for bit); wait gathers them into the table
 * keyed by op name. A failure to start raises with nothing left started. */
static int push_ops_pending(lua_State *L, gr_buffer *b, const lgr_request *r) {
    const gr_image *fused = lgr_request_fused(L, r, gr_buffer_dtype(b), gr_buffer_where(b));
    lgr_pending *u = lgr_new_pending(L, 0);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_ops_async(lgr_ctx(L), b, &r->o, r->ops, r->nops, fused, u->p));
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    u->nops = r->nops;
    memcpy(u->ops, r->ops, (size_t)r->nops * sizeof *u->ops);
    hold_while_in_flight(L, r);
    return 1;
}

/* Along axes, queued: the result buffers made (or opts.out's) and pushed, then the work started (*p);
 * returns how many results. */
static int queue_axes(lua_State *L, gr_buffer *b, const lgr_request *r, gr_pending **p) {
    unsigned mask;
    gr_buffer *out[2] = {NULL, NULL};
    int count = lgr_axes_outs(L, b, r, &mask, out);
    gr_status st;
    LGR_RETRY(L, st, gr_reduce_axes_async(lgr_ctx(L), b, &r->o, mask, out, p));
    if (st != GR_OK) return lgr_fail(L, st, 2, NULL);
    return count;
}

/* Along axes: a Pending whose wait returns the result buffers (user values 3 and on). */
static int push_axes_pending(lua_State *L, gr_buffer *b, const lgr_request *r) {
    lgr_pending *u = lgr_new_pending(L, 2);
    int at = lua_gettop(L);
    u->nout = queue_axes(L, b, r, &u->p[0]);
    for (int i = u->nout; i >= 1; i--) lua_setiuservalue(L, at, 2 + i);     /* the top is result i */
    hold_while_in_flight(L, r);
    return 1;
}

static lgr_pending *check_pending(lua_State *L, int arg) {
    lgr_pending *u = luaL_checkudata(L, arg, PENDING_MT);
    if (!u->p[0]) luaL_argerror(L, arg, "pending has been released");
    return u;
}

/* How many engine pendings u holds: one per op with opts.ops, else one. */
static int pendings(const lgr_pending *u) { return u->nops ? u->nops : 1; }

static int all_ready(gr_context *ctx, const lgr_pending *u) {
    for (int k = 0; k < pendings(u); k++)
        if (!gr_pending_ready(ctx, u->p[k])) return 0;
    return 1;
}

static int p_ready(lua_State *L) {
    lgr_pending *u = check_pending(L, 1);
    lua_pushboolean(L, all_ready(lgr_ctx(L), u));
    return 1;
}

static int p_wait(lua_State *L) {
    lgr_pending *u = check_pending(L, 1);
    gr_result v[GR_OP_COUNT];
    for (int k = 0; k < pendings(u); k++) {
        gr_status st = gr_pending_wait(lgr_ctx(L), u->p[k], &v[k]);
        if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
    }
    for (int i = 0; i < u->nout; i++) lua_getiuservalue(L, 1, 3 + i);
    if (u->nout) return u->nout;
    if (!u->nops) return lgr_push_result(L, &v[0]);
    lua_createtable(L, 0, u->nops);             /* as the synchronous call gives it (reduce_ops) */
    for (int k = 0; k < u->nops; k++) {
        lgr_push_value(L, &v[k]);
        lua_setfield(L, -2, gr_op_name(u->ops[k]));
    }
    return 1;
}

static int p_release(lua_State *L) {
    lgr_pending *u = luaL_checkudata(L, 1, PENDING_MT);
    gr_context *ctx = lgr_ctx_or_null(L);
    for (int k = 0; k < GR_OP_COUNT; k++) {
        if (u->p[k] && ctx) gr_pending_free(ctx, u->p[k]);
        u->p[k] = NULL;
    }
    return 0;
}

static int p_tostring(lua_State *L) {
    lgr_pending *u = luaL_checkudata(L, 1, PENDING_MT);
    gr_context *ctx = lgr_ctx_or_null(L);
    lua_pushstring(L, !u->p[0] || !ctx ? "gpureduce.Pending(released)"
                            : all_ready(ctx, u) ? "gpureduce.Pending(ready)" : "gpureduce.Pending(running)");
    return 1;
}

const luaL_Reg lgr_pending_methods[] = {{"free", p_release}, {"ready", p_ready}, {"wait", p_wait}, {NULL, NULL}};
const luaL_Reg lgr_pending_meta[] = {
    {"__close", p_release}, {"__gc", p_release}, {"__tostring", p_tostring}, {NULL, NULL}};
