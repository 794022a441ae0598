/*
 * lbuffer.c -- Buffer userdata: construction (gr.buffer, gr.wrap), contents, views, conversions
 * (b:astype), element marshalling, and gr.copy.
 *
 * Indices are 1-based as in Lua and are checked here, in the script's own numbers, before the engine
 * sees them (the engine's own checks stay as a second line). A slice or a view keeps its parent userdata
 * as a user value, so the parent cannot be collected while the view lives.
 *
 * Shapes: b:view, b:permute, b:transpose, b:narrow and b:contiguous make views (engine/core/view.c);
 * axes are 1-based, negative ones count from the end, and are checked here in the script's numbers.
 */
#include "lbuffer.h"
#include "lopts.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- marshalling --------------------------------------------------------------------------------- */

/* One element of dtype t at p as a Lua value: the engine's reader, then the scalar's conversion. */
static void push_element(lua_State *L, const void *p, gr_dtype t) { lgr_push_scalar(L, gr_scalar_load(p, t)); }

size_t lgr_stage_source(lua_State *L, int arg, gr_dtype t, void **out) {
    size_t es = gr_dtype_size(t);
    *out = NULL;
    if (lua_type(L, arg) == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, arg, &len);
        if (len % es)
            luaL_argerror(L, arg, lua_pushfstring(L, "byte string of length %I is not a whole number of %s "
                                                 "elements (%d bytes each)", (lua_Integer)len, gr_dtype_name(t), (int)es));
        /* a bool element is the byte 0 or 1: any other byte is refused, not read as true */
        for (size_t i = 0; t == GR_BOOL && i < len; i++)
            if ((unsigned char)s[i] > 1)
                luaL_argerror(L, arg, lua_pushfstring(L, "byte %I of the string is %d: a bool element is the byte 0 "
                                                     "or 1", (lua_Integer)i + 1, (int)(unsigned char)s[i]));
        *out = malloc(len ? len : 1);
        if (!*out) luaL_error(L, "gpureduce: out of host memory");
        memcpy(*out, s, len);
        return len / es;
    }
    luaL_checktype(L, arg, LUA_TTABLE);
    size_t n = (size_t)lua_rawlen(L, arg);
    if (n > SIZE_MAX / es) luaL_argerror(L, arg, "table too long");
    char *data = malloc(n ? n * es : 1);
    if (!data) luaL_error(L, "gpureduce: out of host memory");
    gr_context *ctx = lgr_ctx(L);
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, arg, (lua_Integer)i + 1);
        gr_scalar s = {0};
        int type = lua_type(L, -1);
        if (lua_isinteger(L, -1)) {
            s.kind = GR_SCALAR_INT;
            s.v.i = lua_tointeger(L, -1);
        } else if (type == LUA_TBOOLEAN && t == GR_BOOL) {
            s.kind = GR_SCALAR_BOOL;
            s.v.b = lua_toboolean(L, -1);
        } else if (type == LUA_TNUMBER) {
            s.kind = GR_SCALAR_FLOAT;
            s.v.f = lua_tonumber(L, -1);
        } else {
            free(data);
            luaL_argerror(L, arg, lua_pushfstring(L, "element %I: expected a number, got %s", (lua_Integer)i + 1,
                                                  lua_typename(L, type)));
        }
        char what[48];
        snprintf(what, sizeof what, "element %zu", i + 1);
        if (gr_scalar_store(ctx, s, t, data + i * es, what) != GR_OK) {
            free(data);
            luaL_argerror(L, arg, gr_errmsg(ctx));
        }
        lua_pop(L, 1);
    }
    *out = data;
    return n;
}

/* ---- construction -------------------------------------------------------------------------------- */

/* ---- the collector and device memory -------------------------------------------------------------
 *
 * A buffer is a few bytes of Lua's heap: the collector cannot see the device (or pinned) memory behind
 * it, so a loop that drops large buffers could hold garbage until the device is full -- and with the
 * buffer pool (engine/base/memory.c) the process keeps whatever that garbage once took. lgr_track's step
 * in proportion to each new buffer's size answers that in incremental mode, but in generational mode
 * (lua.c's, and so busted's) that step is a minor collection, which never frees a buffer that survived
 * two of them: with two results made per loop iteration, one of them leaked each time until a major
 * collection, which only the Lua heap's own growth starts.
 *
 * So each new buffer userdata (every buffer the binding makes comes through here) first compares what
 * the context holds (live device + pinned bytes, gr_pool_stats_get: a copy of a few counters) with a mark,
 * and runs a full collection when it is past it: the mark is twice what was held after the last one, and
 * at least 64 MiB more (Lua's own pause for its heap is 200%). Garbage then stays below the live set held
 * after the last such collection (or 64 MiB) -- a mark a larger working set left stays until the next
 * one -- and the collections are paid for by the growth they clean up, not once per call. The mark is
 * the Lua state's (its registry); a collector stopped by the script (collectgarbage("stop")) is left
 * stopped. */
#define PACE_FLOOR ((size_t)64 << 20)

static const char pace_key = 0;     /* its address keys the mark in the registry */

static size_t held_bytes(lua_State *L) {
    gr_pool_stats s;
    gr_pool_stats_get(lgr_ctx(L), &s);
    return s.live_device_bytes + s.live_pinned_bytes;
}

static void pace_collector(lua_State *L) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &pace_key);
    size_t mark = lua_isinteger(L, -1) ? (size_t)lua_tointeger(L, -1) : PACE_FLOOR;
    lua_pop(L, 1);
    if (held_bytes(L) <= mark || !lua_gc(L, LUA_GCISRUNNING)) return;
    lua_gc(L, LUA_GCCOLLECT);
    size_t held = held_bytes(L);
    mark = held < PACE_FLOOR ? held + PACE_FLOOR : 2 * held;
    lua_pushinteger(L, (lua_Integer)(mark < (size_t)LUA_MAXINTEGER ? mark : (size_t)LUA_MAXINTEGER));
    lua_rawsetp(L, LUA_REGISTRYINDEX, &pace_key);
}

lbuffer *lgr_new_buffer_ud(lua_State *L) {
    pace_collector(L);
    lbuffer *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->b = NULL;
    luaL_setmetatable(L, BUFFER_MT);
    return u;
}

gr_buffer *lgr_check_buffer(lua_State *L, int arg) {
    lbuffer *u = luaL_checkudata(L, arg, BUFFER_MT);
    if (!u->b) luaL_argerror(L, arg, "buffer has been freed");
    return u->b;
}

static const char *const where_names[] = {"device", "host", NULL};

typedef struct { int where, device; } buffer_opts;
static const lgr_opt buffer_opt_specs[] = {
    {"device", lgr_read_int, offsetof(buffer_opts, device), 1, INT32_MAX, NULL},
    {"where", lgr_read_choice, offsetof(buffer_opts, where), 0, 0, where_names},
    {NULL, NULL, 0, 0, 0, NULL}};

/* Where a new buffer goes: *device 0 for the default device. */
static gr_where read_where(lua_State *L, int arg, int *device) {
    buffer_opts bo = {0};
    lgr_parse_opts(L, arg, buffer_opt_specs, &bo);
    *device = bo.device;
    return bo.where == 1 ? GR_HOST : GR_DEVICE;
}

static gr_status buffer_new(gr_context *ctx, size_t n, gr_dtype t, gr_where where, int device, gr_buffer **out) {
    return device ? gr_buffer_new_on(ctx, n, t, where, device, out) : gr_buffer_new(ctx, n, t, where, out);
}

/* gr.buffer(n | table | bytes, dtype = "float32", {where = "device" | "host", device = k}) */
int lgr_buffer(lua_State *L) {
    int source = lua_type(L, 1);
    if (source != LUA_TNUMBER && source != LUA_TTABLE && source != LUA_TSTRING)
        return luaL_argerror(L, 1, lua_pushfstring(L, "expected a size, a table or a byte string, got %s",
                                                   luaL_typename(L, 1)));
    gr_dtype t = lgr_check_dtype(L, 2, "float32");
    int device;
    gr_where where = read_where(L, 3, &device);
    gr_context *ctx = lgr_ctx(L);
    size_t n = 0;
    void *data = NULL;
    if (source == LUA_TNUMBER) n = (size_t)lgr_check_integer(L, 1, "size", 0, LUA_MAXINTEGER);
    else n = lgr_stage_source(L, 1, t, &data);
    lbuffer *u = lgr_new_buffer_ud(L);
    gr_status st;
    LGR_RETRY(L, st, buffer_new(ctx, n, t, where, device, &u->b));
    if (st == GR_OK && data) st = gr_buffer_write(ctx, u->b, 0, data, n);
    free(data);
    if (st != GR_OK) return lgr_fail(L, st, 3, "size", 1, "values", 1, NULL);
    lgr_track(L, n * gr_dtype_size(t));
    return 1;
}

/* gr.wrap(ptr, n, dtype, {where=}) -- memory the host application owns, handed over as a light
 * userdata; never freed by the module. */
int lgr_wrap(lua_State *L) {
    luaL_checktype(L, 1, LUA_TLIGHTUSERDATA);
    void *ptr = lua_touserdata(L, 1);
    lua_Integer n = lgr_check_integer(L, 2, "size", 0, LUA_MAXINTEGER);
    gr_dtype t = lgr_check_dtype(L, 3, NULL);
    int device;
    gr_where where = read_where(L, 4, &device);
    gr_context *ctx = lgr_ctx(L);
    if (device && device != gr_device_default(ctx))
        return luaL_argerror(L, 4, lua_pushfstring(L, "opts.device: gr.wrap hands over memory of the default "
                                                   "device (%d), not of device %d", gr_device_default(ctx), device));
    lbuffer *u = lgr_new_buffer_ud(L);
    gr_status st = gr_buffer_wrap(ctx, ptr, (size_t)n, t, where, &u->b);
    if (st != GR_OK) return lgr_fail(L, st, 4, "ptr", 1, "size", 2, NULL);
    return 1;
}

/* ---- interoperation (docs/api.md "Interoperation"; gr.from_dlpack is ldlpack.c's) -------------------- */

/* b:ptr() -- the address of the view's first element, as a light userdata (b:where() says which side) */
static int b_ptr(lua_State *L) {
    lua_pushlightuserdata(L, gr_buffer_data(lgr_check_buffer(L, 1)));
    return 1;
}

/* b:to_dlpack() -- a new DLManagedTensorVersioned* as a light userdata, which holds b's memory until its
 * consumer calls the deleter (before the Lua state closes: the context goes then) */
static int b_to_dlpack(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    void *managed;
    gr_status st = gr_buffer_to_dlpack(lgr_ctx(L), b, &managed);
    if (st != GR_OK) return lgr_fail(L, st, 0, "b", 1, NULL);
    lua_pushlightuserdata(L, managed);
    return 1;
}

static int b_release(lua_State *L) {
    lbuffer *u = luaL_checkudata(L, 1, BUFFER_MT);
    gr_context *ctx = lgr_ctx_or_null(L);
    if (u->b && ctx) gr_buffer_free(ctx, u->b);
    u->b = NULL;
    lua_pushnil(L);                     /* let go of the parent of a slice, too */
    lua_setiuservalue(L, 1, 1);
    return 0;
}

/* The buffer at arg, made compact in place on the stack (see lbuffer.h). */
gr_buffer *lgr_check_compact_buffer(lua_State *L, int arg) {
    gr_buffer *b = lgr_check_buffer(L, arg);
    if (gr_buffer_is_compact(b)) return b;
    arg = lua_absindex(L, arg);
    gr_context *ctx = lgr_ctx(L);
    lbuffer *u = lgr_new_buffer_ud(L);
    gr_status st;
    LGR_RETRY(L, st, gr_buffer_contiguous(ctx, b, &u->b));
    if (st != GR_OK) lgr_fail(L, st, 0, NULL);
    lgr_track(L, gr_buffer_size(b) * gr_dtype_size(gr_buffer_dtype(b)));
    lua_replace(L, arg);
    return u->b;
}

gr_buffer *lgr_check_reduced_buffer(lua_State *L, int arg, int order_free) {
    gr_buffer *b = lgr_check_buffer(L, arg);
    if (gr_buffer_is_compact(b) || !order_free) return lgr_check_compact_buffer(L, arg);
    arg = lua_absindex(L, arg);
    lbuffer *u = lgr_new_buffer_ud(L);
    gr_status st = gr_buffer_dense(lgr_ctx(L), b, &u->b);
    if (st != GR_OK) lgr_fail(L, st, 0, NULL);
    if (!u->b) {
        lua_pop(L, 1);
        return lgr_check_compact_buffer(L, arg);
    }
    lua_replace(L, arg);
    return u->b;
}

/* ---- plain facts --------------------------------------------------------------------------------- */

static int b_size(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)gr_buffer_size(lgr_check_buffer(L, 1)));
    return 1;
}

static int b_dtype(lua_State *L) {
    lua_pushstring(L, gr_dtype_name(gr_buffer_dtype(lgr_check_buffer(L, 1))));
    return 1;
}

static int b_device(lua_State *L) {
    lua_pushinteger(L, gr_buffer_device(lgr_check_buffer(L, 1)));
    return 1;
}

static int b_where(lua_State *L) {
    lua_pushstring(L, gr_buffer_where(lgr_check_buffer(L, 1)) == GR_HOST ? "host" : "device");
    return 1;
}

static int b_ndim(lua_State *L) {
    lua_pushinteger(L, gr_buffer_ndim(lgr_check_buffer(L, 1)));
    return 1;
}

/* b:shape() and b:strides(): tables of ndim integers (strides in elements) */
static int push_layout(lua_State *L, int strides) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    size_t shape[GR_MAX_DIMS];
    int64_t stride[GR_MAX_DIMS];
    int nd = gr_buffer_ndim(b);
    gr_buffer_layout(b, shape, stride);
    lua_createtable(L, nd, 0);
    for (int d = 0; d < nd; d++) {
        lua_pushinteger(L, strides ? (lua_Integer)stride[d] : (lua_Integer)shape[d]);
        lua_rawseti(L, -2, d + 1);
    }
    return 1;
}
static int b_shape(lua_State *L) { return push_layout(L, 0); }
static int b_strides(lua_State *L) { return push_layout(L, 1); }

static int b_tostring(lua_State *L) {
    lbuffer *u = luaL_checkudata(L, 1, BUFFER_MT);
    if (!u->b) lua_pushstring(L, "gpureduce.Buffer(freed)");
    else
        lua_pushfstring(L, "gpureduce.Buffer(%s, %I, %s)", gr_dtype_name(gr_buffer_dtype(u->b)),
                        (lua_Integer)gr_buffer_size(u->b), gr_buffer_where(u->b) == GR_HOST ? "host" : "device");
    return 1;
}

/* ---- generated contents -------------------------------------------------------------------------- */

static int b_fill(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    gr_scalar v = lgr_check_value(L, 2, "value", gr_buffer_dtype(b));
    gr_status st = gr_buffer_fill(lgr_ctx(L), b, v);
    if (st != GR_OK) return lgr_fail(L, st, 0, "value", 2, NULL);
    lua_settop(L, 1);
    return 1;
}

/* The index a generator gives b[1] (argument `arg`, 1 when absent): b as a piece of a larger buffer. */
static uint64_t check_at(lua_State *L, int arg) {
    return lua_isnoneornil(L, arg) ? 0 : (uint64_t)(lgr_check_integer(L, arg, "at", 1, LUA_MAXINTEGER) - 1);
}

/* b:iota(start = 0, step = 1, at = 1): b[i] = start + (at + i - 2) * step */
static int b_iota(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    gr_scalar start = {GR_SCALAR_INT, {.i = 0}}, step = {GR_SCALAR_INT, {.i = 1}};
    if (!lua_isnoneornil(L, 2)) start = lgr_check_number(L, 2, "start");
    if (!lua_isnoneornil(L, 3)) step = lgr_check_number(L, 3, "step");
    gr_status st = gr_buffer_iota_at(lgr_ctx(L), b, check_at(L, 4), start, step);
    if (st != GR_OK) return lgr_fail(L, st, 0, "start", 2, "step", 3, NULL);
    lua_settop(L, 1);
    return 1;
}

/* b:random(seed = 0, lo, hi, at = 1): floats in [lo, hi) (default [0, 1)); integers in [lo, hi] (default
 * the dtype's whole range); b[i] gets the value of index at + i - 1 of the seed's sequence. */
static int b_random(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    gr_dtype t = gr_buffer_dtype(b);
    lua_Integer seed = lua_isnoneornil(L, 2) ? 0 : lgr_check_integer(L, 2, "seed", LUA_MININTEGER, LUA_MAXINTEGER);
    gr_scalar lo, hi;
    if (gr_dtype_is_float(t)) {
        lo = (gr_scalar){GR_SCALAR_FLOAT, {.f = 0.0}};
        hi = (gr_scalar){GR_SCALAR_FLOAT, {.f = 1.0}};
    } else {
        gr_dtype_limits(t, &lo, &hi);       /* the dtype list's lowest and highest */
    }
    if (!lua_isnoneornil(L, 3)) lo = lgr_check_value(L, 3, "lo", t);
    if (!lua_isnoneornil(L, 4)) hi = lgr_check_value(L, 4, "hi", t);
    gr_status st = gr_buffer_random_at(lgr_ctx(L), b, check_at(L, 5), (uint64_t)seed, lo, hi);
    if (st != GR_OK) return lgr_fail(L, st, 0, "lo", 3, "hi", 4, NULL);
    lua_settop(L, 1);
    return 1;
}

/* ---- ranges in the script's numbers -------------------------------------------------------------- */

/* "95..104", or, where the last index would not fit in a Lua integer, "95 and 2^63 - 1 after it". */
static const char *span(lua_State *L, lua_Integer first, lua_Integer count) {
    if (count > 0 && first > 0 && count - 1 <= LUA_MAXINTEGER - first)
        return lua_pushfstring(L, "%I..%I", first, first + count - 1);
    return lua_pushfstring(L, "of %I elements from %I", count, first);
}

/* The elements first .. first + count - 1 (1-based) must lie in a buffer of n; count defaults to the
 * rest. Returns the 0-based offset and sets *count. */
static size_t check_span(lua_State *L, lua_Integer n, int first_arg, int count_arg, const char *what,
                         size_t *count) {
    lua_Integer first = lua_isnoneornil(L, first_arg) ? 1
                      : lgr_check_integer(L, first_arg, "offset", 1, LUA_MAXINTEGER);
    if (first > n + 1)
        luaL_argerror(L, first_arg, lua_pushfstring(L, "offset %I is past the end of the buffer (size %I)", first, n));
    lua_Integer room = n - (first - 1);
    lua_Integer c = lua_isnoneornil(L, count_arg) ? room
                  : lgr_check_integer(L, count_arg, "count", 0, LUA_MAXINTEGER);
    if (c > room)
        luaL_argerror(L, count_arg, lua_pushfstring(L, "%s %s is outside the buffer (size %I)", what,
                                                    span(L, first, c), n));
    *count = (size_t)c;
    return (size_t)(first - 1);
}

/* ---- contents ------------------------------------------------------------------------------------ */

/* b:set(table | bytes, offset = 1) */
static int b_set(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    lua_Integer n = (lua_Integer)gr_buffer_size(b);
    if (lua_type(L, 2) != LUA_TTABLE && lua_type(L, 2) != LUA_TSTRING)
        return luaL_argerror(L, 2, lua_pushfstring(L, "expected a table or a byte string, got %s",
                                                   luaL_typename(L, 2)));
    lua_Integer offset = lua_isnoneornil(L, 3) ? 1 : lgr_check_integer(L, 3, "offset", 1, LUA_MAXINTEGER);
    if (offset > n + 1)
        return luaL_argerror(L, 3, lua_pushfstring(L, "offset %I is past the end of the buffer (size %I)", offset, n));
    void *data;
    size_t count = lgr_stage_source(L, 2, gr_buffer_dtype(b), &data);
    lua_Integer room = n - (offset - 1);
    if ((lua_Unsigned)count > (lua_Unsigned)room) {
        free(data);
        return luaL_argerror(L, 2, lua_pushfstring(L, "%I values from offset %I do not fit in a buffer of %I "
                                                   "(room for %I)", (lua_Integer)count, offset, n, room));
    }
    gr_status st = gr_buffer_write(lgr_ctx(L), b, (size_t)offset - 1, data, count);
    free(data);
    if (st != GR_OK) return lgr_fail(L, st, 0, "values", 2, "offset", 3, NULL);
    lua_settop(L, 1);
    return 1;
}

static int b_get(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    lua_Integer i = lgr_check_integer(L, 2, "index", LUA_MININTEGER, LUA_MAXINTEGER);
    lua_Integer n = (lua_Integer)gr_buffer_size(b);
    if (i < 1 || i > n)
        return luaL_argerror(L, 2, lua_pushfstring(L, "index %I out of range (1..%I)", i, n));
    uint64_t elem;
    gr_status st = gr_buffer_read(lgr_ctx(L), b, (size_t)i - 1, &elem, 1);
    if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
    push_element(L, &elem, gr_buffer_dtype(b));
    return 1;
}

/* b[i] = v: (buffer, index, value) on the stack. */
static int b_set_element(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    lua_Integer i = lgr_check_integer(L, 2, "index", LUA_MININTEGER, LUA_MAXINTEGER);
    lua_Integer n = (lua_Integer)gr_buffer_size(b);
    if (i < 1 || i > n)
        return luaL_argerror(L, 2, lua_pushfstring(L, "index %I out of range (1..%I)", i, n));
    gr_scalar v = lgr_check_value(L, 3, "value", gr_buffer_dtype(b));
    gr_context *ctx = lgr_ctx(L);
    uint64_t elem;
    gr_status st = gr_scalar_store(ctx, v, gr_buffer_dtype(b), &elem, "value");
    if (st == GR_OK) st = gr_buffer_write(ctx, b, (size_t)i - 1, &elem, 1);
    if (st != GR_OK) return lgr_fail(L, st, 0, "value", 3, NULL);
    return 0;
}

/* The elements of data (row-major, dtype t) as nested tables of shape[d..nd): the table on the top. */
static const char *push_nested(lua_State *L, const char *data, gr_dtype t, const size_t *shape, int d, int nd) {
    lua_createtable(L, shape[d] < (size_t)INT32_MAX ? (int)shape[d] : 0, 0);
    for (size_t i = 0; i < shape[d]; i++) {
        if (d == nd - 1) {
            push_element(L, data, t);
            data += gr_dtype_size(t);
        } else {
            luaL_checkstack(L, 2, "too many axes");
            data = push_nested(L, data, t, shape, d + 1, nd);
        }
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return data;
}

/* b:totable() of a buffer of several axes: nested tables, the last axis innermost */
static int totable_nested(lua_State *L, gr_buffer *b) {
    size_t shape[GR_MAX_DIMS], n = gr_buffer_size(b), es = gr_dtype_size(gr_buffer_dtype(b));
    gr_buffer_layout(b, shape, NULL);
    if (n > (size_t)INT32_MAX) return luaL_argerror(L, 1, "too many elements for Lua tables");
    char *data = malloc(n ? n * es : 1);
    if (!data) return luaL_error(L, "gpureduce: out of host memory");
    gr_status st = gr_buffer_read(lgr_ctx(L), b, 0, data, n);
    if (st != GR_OK) {
        free(data);
        return lgr_fail(L, st, 0, NULL);
    }
    push_nested(L, data, gr_buffer_dtype(b), shape, 0, gr_buffer_ndim(b));
    free(data);
    return 1;
}

/* b:totable(first = 1, count = rest): a flat table of elements first.. in row-major order; with no
 * range, a buffer of several axes gives nested tables. */
static int b_totable(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    if (gr_buffer_ndim(b) > 1 && lua_isnoneornil(L, 2) && lua_isnoneornil(L, 3)) return totable_nested(L, b);
    size_t count, es = gr_dtype_size(gr_buffer_dtype(b));
    size_t first = check_span(L, (lua_Integer)gr_buffer_size(b), 2, 3, "elements", &count);
    if (count > (size_t)INT32_MAX) return luaL_argerror(L, 3, "too many elements for one Lua table");
    char *data = malloc(count ? count * es : 1);
    if (!data) return luaL_error(L, "gpureduce: out of host memory");
    gr_status st = gr_buffer_read(lgr_ctx(L), b, first, data, count);
    if (st != GR_OK) {
        free(data);
        return lgr_fail(L, st, 0, NULL);
    }
    lua_createtable(L, (int)count, 0);
    for (size_t i = 0; i < count; i++) {
        push_element(L, data + i * es, gr_buffer_dtype(b));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    free(data);
    return 1;
}

/* b:tobytes(first = 1, count = rest) */
static int b_tobytes(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    size_t count, es = gr_dtype_size(gr_buffer_dtype(b));
    size_t first = check_span(L, (lua_Integer)gr_buffer_size(b), 2, 3, "elements", &count);
    luaL_Buffer lb;
    char *dst = luaL_buffinitsize(L, &lb, count * es);
    gr_status st = gr_buffer_read(lgr_ctx(L), b, first, dst, count);
    if (st != GR_OK) return lgr_fail(L, st, 0, NULL);
    luaL_pushresultsize(&lb, count * es);
    return 1;
}

/* b:slice(offset, count = rest) -- 1-based like string.sub; the view keeps its parent alive. */
static int b_slice(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    luaL_checkany(L, 2);
    size_t count;
    size_t first = check_span(L, (lua_Integer)gr_buffer_size(b), 2, 3, "slice", &count);
    gr_context *ctx = lgr_ctx(L);
    lbuffer *u = lgr_new_buffer_ud(L);
    gr_status st = gr_buffer_slice(ctx, b, first, count, &u->b);
    if (st != GR_OK) return lgr_fail(L, st, 0, "offset", 2, NULL);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

/* ---- shapes and views ---------------------------------------------------------------------------- */

/* A new view made by the engine (st, *out) from the buffer at 1: it keeps that buffer alive. */
static int push_view(lua_State *L, lbuffer *u, gr_status st, const char *param, int arg) {
    if (st != GR_OK) return lgr_fail(L, st, 0, param, arg, "b", 1, NULL);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    (void)u;
    return 1;
}

/* An axis argument of a buffer of nd axes: 1..nd, or -nd..-1 from the end; 0-based result. */
static int check_axis(lua_State *L, int arg, int nd, const char *what) {
    lua_Integer a = lgr_check_integer(L, arg, what, LUA_MININTEGER, LUA_MAXINTEGER);
    if (a == 0 || a > nd || a < -nd)
        luaL_argerror(L, arg, lua_pushfstring(L, "%s %I %s (accepted: 1 to %d, or -%d to -1 from the end)", what, a,
                                              a == 0 ? "is not an axis: axes are 1-based" : "is out of range",
                                              nd, nd));
    return (int)(a > 0 ? a - 1 : nd + a);
}

/* b:view{d1, d2, ...} -- the shape of a compact buffer, row-major; the product must be #b */
static int b_view(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    if (lua_type(L, 2) != LUA_TTABLE)
        return luaL_argerror(L, 2, lua_pushfstring(L, "shape: expected a table of lengths, got %s", luaL_typename(L, 2)));
    lua_Integer nd = (lua_Integer)lua_rawlen(L, 2);
    if (nd < 1 || nd > GR_MAX_DIMS)
        return luaL_argerror(L, 2, lua_pushfstring(L, "shape: %I axes (accepted: 1 to %d)", nd, GR_MAX_DIMS));
    size_t shape[GR_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        lua_rawgeti(L, 2, d + 1);
        int isint;
        lua_Integer len = lua_tointegerx(L, -1, &isint);
        if (!isint || len < 0)
            return luaL_argerror(L, 2, lua_pushfstring(L, "shape: length %d is %s (accepted: integers >= 0)", d + 1,
                                                       isint ? lua_pushfstring(L, "%I", len) : luaL_tolstring(L, -1, NULL)));
        shape[d] = (size_t)len;
        lua_pop(L, 1);
    }
    gr_context *ctx = lgr_ctx(L);
    lbuffer *u = lgr_new_buffer_ud(L);
    return push_view(L, u, gr_buffer_view(ctx, b, (int)nd, shape, &u->b), "shape", 2);
}

static int permuted(lua_State *L, gr_buffer *b, const int *perm) {
    gr_context *ctx = lgr_ctx(L);
    lbuffer *u = lgr_new_buffer_ud(L);
    return push_view(L, u, gr_buffer_permute(ctx, b, perm, &u->b), "perm", 2);
}

/* b:permute{p1, ..., pn} -- new axis k is old axis p[k]; each axis once */
static int b_permute(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    int nd = gr_buffer_ndim(b), perm[GR_MAX_DIMS], seen[GR_MAX_DIMS] = {0};
    if (lua_type(L, 2) != LUA_TTABLE)
        return luaL_argerror(L, 2, lua_pushfstring(L, "perm: expected a table of %d axes, got %s", nd,
                                                   luaL_typename(L, 2)));
    if ((lua_Integer)lua_rawlen(L, 2) != nd)
        return luaL_argerror(L, 2, lua_pushfstring(L, "perm: %I axes for a buffer of %d (accepted: a permutation "
                                                   "of 1..%d)", (lua_Integer)lua_rawlen(L, 2), nd, nd));
    for (int k = 0; k < nd; k++) {
        lua_rawgeti(L, 2, k + 1);
        int isint;
        lua_Integer a = lua_tointegerx(L, -1, &isint);
        lua_pop(L, 1);
        if (!isint || a == 0 || a > nd || a < -nd)
            return luaL_argerror(L, 2, lua_pushfstring(L, "perm: entry %d is not an axis of a buffer of %d (accepted: "
                                                       "a permutation of 1..%d)", k + 1, nd, nd));
        perm[k] = (int)(a > 0 ? a - 1 : nd + a);
        if (seen[perm[k]]++)
            return luaL_argerror(L, 2, lua_pushfstring(L, "perm: axis %d appears twice (accepted: a permutation of "
                                                       "1..%d)", perm[k] + 1, nd));
    }
    return permuted(L, b, perm);
}

/* b:transpose() -- the axes reversed (a matrix's transpose) */
static int b_transpose(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    int nd = gr_buffer_ndim(b), perm[GR_MAX_DIMS];
    for (int k = 0; k < nd; k++) perm[k] = nd - 1 - k;
    return permuted(L, b, perm);
}

/* b:narrow(axis, start, count = rest) -- positions start .. start + count - 1 (1-based) along axis */
static int b_narrow(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    size_t shape[GR_MAX_DIMS];
    gr_buffer_layout(b, shape, NULL);
    int axis = check_axis(L, 2, gr_buffer_ndim(b), "axis");
    lua_Integer len = (lua_Integer)shape[axis];
    lua_Integer start = lgr_check_integer(L, 3, "start", 1, LUA_MAXINTEGER);
    if (start > len + 1)
        return luaL_argerror(L, 3, lua_pushfstring(L, "start %I is past the end of axis %d (length %I; accepted: 1 "
                                                   "to %I)", start, axis + 1, len, len + 1));
    lua_Integer room = len - start + 1;
    lua_Integer count = lua_isnoneornil(L, 4) ? room : lgr_check_integer(L, 4, "count", 0, LUA_MAXINTEGER);
    if (count > room)
        return luaL_argerror(L, 4, lua_pushfstring(L, "count %I from %I does not fit axis %d (length %I; accepted: 0 "
                                                   "to %I)", count, start, axis + 1, len, room));
    gr_context *ctx = lgr_ctx(L);
    lbuffer *u = lgr_new_buffer_ud(L);
    return push_view(L, u, gr_buffer_narrow(ctx, b, axis, (size_t)start - 1, (size_t)count, &u->b), "axis", 2);
}

/* b:contiguous() -- b itself when compact, else a compact copy of its shape on its side */
static int b_contiguous(lua_State *L) {
    lua_settop(L, 1);
    lgr_check_compact_buffer(L, 1);
    return 1;
}

/* b:astype(dtype) -- a new buffer of b's elements converted, on b's side (gr_buffer_astype's rules). */
static int b_astype(lua_State *L) {
    gr_buffer *b = lgr_check_buffer(L, 1);
    gr_dtype t = lgr_check_dtype(L, 2, NULL);
    gr_context *ctx = lgr_ctx(L);
    lbuffer *u = lgr_new_buffer_ud(L);
    gr_status st;
    LGR_RETRY(L, st, gr_buffer_astype(ctx, b, t, &u->b));
    if (st != GR_OK) return lgr_fail(L, st, 0, "src", 1, "dtype", 2, NULL);
    lgr_track(L, gr_buffer_size(b) * gr_dtype_size(t));
    return 1;
}

/* gr.copy(dst, src): the same size, any mix of host and device buffers, converting where the dtypes
 * differ (dst unchanged when an element does not fit); overlapping views of one buffer copy as memmove
 * does. */
int lgr_copy(lua_State *L) {
    gr_buffer *dst = lgr_check_buffer(L, 1), *src = lgr_check_buffer(L, 2);
    gr_context *ctx = lgr_ctx(L);
    gr_status st;
    LGR_RETRY(L, st, gr_buffer_copy(ctx, dst, src));
    if (st != GR_OK) return lgr_fail(L, st, 0, "src", 2, NULL);
    lua_settop(L, 1);
    return 1;
}

/* ---- indexing ------------------------------------------------------------------------------------ */

/* __index: b[i] reads element i (1-based); b.name finds a method (upvalue 2: the methods table). As for
 * a table, any other number (0, past the end, 1.5) reads nil, so that ipairs(b) stops at the end;
 * b:get(i) raises there. */
int lgr_buffer_index(lua_State *L) {
    if (lua_type(L, 2) == LUA_TNUMBER) {
        gr_buffer *b = lgr_check_buffer(L, 1);
        int whole;
        lua_Integer i = lua_tointegerx(L, 2, &whole);
        if (!whole || i < 1 || (lua_Unsigned)i > gr_buffer_size(b)) return 0;
        lua_pushinteger(L, i);
        lua_replace(L, 2);
        lua_getfield(L, lua_upvalueindex(2), "get");
        lua_insert(L, 1);
        lua_call(L, 2, 1);
        return 1;
    }
    lua_pushvalue(L, 2);
    lua_rawget(L, lua_upvalueindex(2));
    return 1;
}

/* __newindex: b[i] = v writes element i; anything else is refused (a buffer has no fields to set). */
int lgr_buffer_newindex(lua_State *L) {
    if (lua_type(L, 2) != LUA_TNUMBER)
        return luaL_error(L, "gpureduce.Buffer: cannot set field '%s' (only elements b[1] to b[#b] can be "
                             "assigned)", luaL_tolstring(L, 2, NULL));
    return b_set_element(L);
}

const luaL_Reg lgr_buffer_methods[] = {
    {"astype", b_astype}, {"contiguous", b_contiguous}, {"device", b_device}, {"dtype", b_dtype}, {"fill", b_fill},
    {"free", b_release}, {"get", b_get}, {"iota", b_iota}, {"narrow", b_narrow}, {"ndim", b_ndim},
    {"permute", b_permute}, {"ptr", b_ptr}, {"random", b_random}, {"set", b_set}, {"shape", b_shape},
    {"size", b_size}, {"slice", b_slice}, {"strides", b_strides}, {"to_dlpack", b_to_dlpack}, {"tobytes", b_tobytes},
    {"totable", b_totable}, {"transpose", b_transpose}, {"view", b_view}, {"where", b_where}, {NULL, NULL}};
const luaL_Reg lgr_buffer_meta[] = {
    {"__close", b_release}, {"__gc", b_release}, {"__len", b_size}, {"__tostring", b_tostring}, {NULL, NULL}};
