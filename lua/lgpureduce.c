/*
 * lgpureduce.c -- the Lua 5.4 binding (module gpureduce.core): Buffer, Stream and Pending userdata
 * around the engine's C API. No CUDA header here: everything goes through engine/gr.h.
 *
 * Lifetime rules (STYLE.md): a userdata is created with a NULL handle and its metatable before anything
 * is allocated, so a failed allocation leaves a harmless object; one idempotent release function serves
 * __gc, __close and :free(); methods reach the handle through one accessor that rejects a freed object.
 * A slice keeps its parent userdata as a user value, a Pending its buffer and stream.
 *
 * Every function has the context userdata as upvalue 1.
 */
#include <lauxlib.h>
#include <lua.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../engine/gr.h"

#define CONTEXT_MT "gpureduce.Context"
#define BUFFER_MT "gpureduce.Buffer"
#define STREAM_MT "gpureduce.Stream"
#define PENDING_MT "gpureduce.Pending"

typedef struct { gr_context *ctx; } lcontext;
typedef struct { gr_buffer *b; } lbuffer;
typedef struct { gr_stream *s; } lstream;
typedef struct { gr_pending *p; } lpending;

static gr_context *ctx_of(lua_State *L) {
    return ((lcontext *)lua_touserdata(L, lua_upvalueindex(1)))->ctx;
}

/* Engine failures: misuse names the argument it came from; failures of the device are plain errors
 * that carry the CUDA error name. */
static int fail(lua_State *L, gr_status st, int arg) {
    const char *msg = gr_errmsg(ctx_of(L));
    if (st == GR_EINVAL && arg > 0) return luaL_argerror(L, arg, msg);
    return luaL_error(L, "gpureduce: %s", msg);
}

/* ---- small helpers ------------------------------------------------------------------------------- */

static lua_Integer check_count(lua_State *L, int arg, const char *what, lua_Integer min) {
    int isint;
    lua_Integer v = lua_tointegerx(L, arg, &isint);
    if (!isint) {
        const char *got = lua_type(L, arg) == LUA_TNUMBER ? "a non-integer number" : luaL_typename(L, arg);
        return luaL_argerror(L, arg, lua_pushfstring(L, "%s: expected an integer, got %s", what, got));
    }
    if (v < min)
        return luaL_argerror(L, arg, lua_pushfstring(L, "%s must be >= %d (got %d)", what, (int)min, (int)v));
    return v;
}

static gr_dtype check_dtype(lua_State *L, int arg, const char *def) {
    const char *name = def ? luaL_optstring(L, arg, def) : luaL_checkstring(L, arg);
    int t = gr_dtype_from_name(name);
    if (t < 0)
        luaL_argerror(L, arg, lua_pushfstring(L, "unknown dtype '%s' (accepted: %s)", name, gr_dtype_names()));
    return (gr_dtype)t;
}

/* A Lua value as an engine scalar: integers stay exact, floats stay floats. */
static int to_scalar(lua_State *L, int idx, gr_scalar *s) {
    if (lua_isinteger(L, idx)) { s->kind = GR_SCALAR_INT; s->v.i = lua_tointeger(L, idx); return 1; }
    if (lua_type(L, idx) == LUA_TNUMBER) { s->kind = GR_SCALAR_FLOAT; s->v.f = lua_tonumber(L, idx); return 1; }
    if (lua_isboolean(L, idx)) { s->kind = GR_SCALAR_BOOL; s->v.b = lua_toboolean(L, idx); return 1; }
    return 0;
}

static gr_scalar check_scalar(lua_State *L, int arg, const char *what) {
    gr_scalar s;
    if (!to_scalar(L, arg, &s))
        luaL_argerror(L, arg, lua_pushfstring(L, "%s: expected a number, got %s", what, luaL_typename(L, arg)));
    return s;
}

static void push_scalar(lua_State *L, gr_scalar s) {
    switch (s.kind) {
    case GR_SCALAR_INT: lua_pushinteger(L, (lua_Integer)s.v.i); break;
    case GR_SCALAR_UINT: lua_pushinteger(L, (lua_Integer)s.v.u); break;   /* two's-complement bits */
    case GR_SCALAR_FLOAT: lua_pushnumber(L, (lua_Number)s.v.f); break;
    default: lua_pushboolean(L, s.v.b); break;
    }
}

/* One element of dtype t at p as a Lua value. */
static void push_element(lua_State *L, const void *p, gr_dtype t) {
    switch (t) {
    case GR_INT8: lua_pushinteger(L, *(const int8_t *)p); break;
    case GR_UINT8: lua_pushinteger(L, *(const uint8_t *)p); break;
    case GR_INT32: lua_pushinteger(L, *(const int32_t *)p); break;
    case GR_UINT32: lua_pushinteger(L, *(const uint32_t *)p); break;
    case GR_INT64: lua_pushinteger(L, (lua_Integer) * (const int64_t *)p); break;
    case GR_UINT64: lua_pushinteger(L, (lua_Integer) * (const uint64_t *)p); break;
    case GR_FLOAT32: lua_pushnumber(L, *(const float *)p); break;
    default: lua_pushnumber(L, *(const double *)p); break;
    }
}

/* ---- buffers ------------------------------------------------------------------------------------- */

static lbuffer *new_buffer_ud(lua_State *L) {
    lbuffer *u = lua_newuserdatauv(L, sizeof *u, 1);
    u->b = NULL;
    luaL_setmetatable(L, BUFFER_MT);
    return u;
}

static gr_buffer *check_buffer(lua_State *L, int arg) {
    lbuffer *u = luaL_checkudata(L, arg, BUFFER_MT);
    if (!u->b) luaL_argerror(L, arg, "buffer has been freed");
    return u->b;
}

/* Host staging of a table or a byte string of elements of dtype t; the caller frees *out.
 * Returns the element count. Raises on a bad element, naming its index. */
static size_t stage_source(lua_State *L, int arg, gr_dtype t, void **out) {
    size_t es = gr_dtype_size(t);
    *out = NULL;
    if (lua_type(L, arg) == LUA_TSTRING) {
        size_t len;
        const char *s = lua_tolstring(L, arg, &len);
        if (len % es)
            luaL_argerror(L, arg, lua_pushfstring(L, "byte string of length %d is not a whole number of %s "
                                                 "elements (%d bytes each)", (int)len, gr_dtype_name(t), (int)es));
        *out = malloc(len ? len : 1);
        if (!*out) luaL_error(L, "gpureduce: out of host memory");
        memcpy(*out, s, len);
        return len / es;
    }
    luaL_checktype(L, arg, LUA_TTABLE);
    size_t n = (size_t)lua_rawlen(L, arg);
    char *data = malloc(n ? n * es : 1);
    if (!data) luaL_error(L, "gpureduce: out of host memory");
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, arg, (lua_Integer)i + 1);
        gr_scalar s;
        char what[48];
        snprintf(what, sizeof what, "element %zu", i + 1);
        if (!to_scalar(L, -1, &s)) {
            free(data);
            luaL_argerror(L, arg, lua_pushfstring(L, "%s: expected a number, got %s", what, luaL_typename(L, -1)));
        }
        if (s.kind == GR_SCALAR_BOOL) {
            free(data);
            luaL_argerror(L, arg, lua_pushfstring(L, "%s: expected a number, got boolean", what));
        }
        if (gr_scalar_store(ctx_of(L), s, t, data + i * es, what) != GR_OK) {
            free(data);
            fail(L, GR_EINVAL, arg);
        }
        lua_pop(L, 1);
    }
    *out = data;
    return n;
}

static gr_where check_where(lua_State *L, int arg) {
    if (lua_isnoneornil(L, arg)) return GR_DEVICE;
    luaL_checktype(L, arg, LUA_TTABLE);
    lua_getfield(L, arg, "where");
    const char *w = lua_isnil(L, -1) ? "device" : lua_tostring(L, -1);
    if (!w || (strcmp(w, "device") != 0 && strcmp(w, "host") != 0))
        luaL_argerror(L, arg, "opts.where: expected 'device' or 'host'");
    lua_pop(L, 1);
    return strcmp(w, "host") == 0 ? GR_HOST : GR_DEVICE;
}

/* gr.buffer(n | table | bytes, dtype = "float32", {where = "device" | "host"}) */
static int l_buffer(lua_State *L) {
    gr_context *ctx = ctx_of(L);
    gr_dtype t = check_dtype(L, 2, "float32");
    gr_where where = check_where(L, 3);
    lbuffer *u = new_buffer_ud(L);
    gr_status st;
    if (lua_type(L, 1) == LUA_TNUMBER) {
        lua_Integer n = check_count(L, 1, "size", 0);
        st = gr_buffer_new(ctx, (size_t)n, t, where, &u->b);
        if (st != GR_OK) return fail(L, st, 1);
        return 1;
    }
    if (lua_type(L, 1) != LUA_TTABLE && lua_type(L, 1) != LUA_TSTRING)
        return luaL_argerror(L, 1, lua_pushfstring(L, "expected a size, a table or a byte string, got %s",
                                                   luaL_typename(L, 1)));
    void *data;
    size_t n = stage_source(L, 1, t, &data);
    st = gr_buffer_new(ctx, n, t, where, &u->b);
    if (st == GR_OK) st = gr_buffer_write(ctx, u->b, 0, data, n);
    free(data);
    if (st != GR_OK) return fail(L, st, 1);
    return 1;
}

/* gr.wrap(ptr, n, dtype, {where=}) -- memory the host application owns, handed over as a light
 * userdata; never freed by the module. */
static int l_wrap(lua_State *L) {
    luaL_checktype(L, 1, LUA_TLIGHTUSERDATA);
    void *ptr = lua_touserdata(L, 1);
    lua_Integer n = check_count(L, 2, "size", 0);
    gr_dtype t = check_dtype(L, 3, NULL);
    gr_where where = check_where(L, 4);
    lbuffer *u = new_buffer_ud(L);
    gr_status st = gr_buffer_wrap(ctx_of(L), ptr, (size_t)n, t, where, &u->b);
    if (st != GR_OK) return fail(L, st, 1);
    return 1;
}

static int b_release(lua_State *L) {
    lbuffer *u = luaL_checkudata(L, 1, BUFFER_MT);
    if (u->b) {
        gr_buffer_free(ctx_of(L), u->b);
        u->b = NULL;
    }
    lua_pushnil(L);                     /* let go of the parent of a slice, too */
    lua_setiuservalue(L, 1, 1);
    return 0;
}

static int b_size(lua_State *L) {
    lua_pushinteger(L, (lua_Integer)gr_buffer_size(check_buffer(L, 1)));
    return 1;
}

static int b_dtype(lua_State *L) {
    lua_pushstring(L, gr_dtype_name(gr_buffer_dtype(check_buffer(L, 1))));
    return 1;
}

static int b_where(lua_State *L) {
    lua_pushstring(L, gr_buffer_where(check_buffer(L, 1)) == GR_HOST ? "host" : "device");
    return 1;
}

static int b_tostring(lua_State *L) {
    lbuffer *u = luaL_checkudata(L, 1, BUFFER_MT);
    if (!u->b) lua_pushstring(L, "gpureduce.Buffer(freed)");
    else
        lua_pushfstring(L, "gpureduce.Buffer(%s, %I, %s)", gr_dtype_name(gr_buffer_dtype(u->b)),
                        (lua_Integer)gr_buffer_size(u->b), gr_buffer_where(u->b) == GR_HOST ? "host" : "device");
    return 1;
}

static int b_fill(lua_State *L) {
    gr_buffer *b = check_buffer(L, 1);
    gr_status st = gr_buffer_fill(ctx_of(L), b, check_scalar(L, 2, "value"));
    if (st != GR_OK) return fail(L, st, 2);
    lua_settop(L, 1);
    return 1;
}

static int b_iota(lua_State *L) {
    gr_buffer *b = check_buffer(L, 1);
    gr_scalar start = {GR_SCALAR_INT, {.i = 0}}, step = {GR_SCALAR_INT, {.i = 1}};
    if (!lua_isnoneornil(L, 2)) start = check_scalar(L, 2, "start");
    if (!lua_isnoneornil(L, 3)) step = check_scalar(L, 3, "step");
    gr_status st = gr_buffer_iota(ctx_of(L), b, start, step);
    if (st != GR_OK) return fail(L, st, 2);
    lua_settop(L, 1);
    return 1;
}

/* b:random(seed = 0, lo, hi): floats in [lo, hi) (default [0, 1)); integers in [lo, hi] (default the
 * dtype's whole range). */
static int b_random(lua_State *L) {
    gr_buffer *b = check_buffer(L, 1);
    gr_dtype t = gr_buffer_dtype(b);
    lua_Integer seed = lua_isnoneornil(L, 2) ? 0 : check_count(L, 2, "seed", LUA_MININTEGER);
    gr_scalar lo, hi;
    if (gr_dtype_is_float(t)) {
        lo = (gr_scalar){GR_SCALAR_FLOAT, {.f = 0.0}};
        hi = (gr_scalar){GR_SCALAR_FLOAT, {.f = 1.0}};
    } else {
        static const int64_t smin[] = {[GR_INT8] = INT8_MIN, [GR_INT32] = INT32_MIN, [GR_INT64] = INT64_MIN};
        static const uint64_t umax[] = {[GR_UINT8] = UINT8_MAX, [GR_UINT32] = UINT32_MAX, [GR_UINT64] = UINT64_MAX,
                                        [GR_INT8] = INT8_MAX, [GR_INT32] = INT32_MAX, [GR_INT64] = INT64_MAX};
        int sgn = gr_dtype_is_signed(t);
        lo = sgn ? (gr_scalar){GR_SCALAR_INT, {.i = smin[t]}} : (gr_scalar){GR_SCALAR_UINT, {.u = 0}};
        hi = (gr_scalar){GR_SCALAR_UINT, {.u = umax[t]}};
    }
    if (!lua_isnoneornil(L, 3)) lo = check_scalar(L, 3, "lo");
    if (!lua_isnoneornil(L, 4)) hi = check_scalar(L, 4, "hi");
    gr_status st = gr_buffer_random(ctx_of(L), b, (uint64_t)seed, lo, hi);
    if (st != GR_OK) return fail(L, st, 3);
    lua_settop(L, 1);
    return 1;
}

/* b:set(table | bytes, offset = 1) */
static int b_set(lua_State *L) {
    gr_buffer *b = check_buffer(L, 1);
    lua_Integer offset = lua_isnoneornil(L, 3) ? 1 : check_count(L, 3, "offset", 1);
    if (lua_type(L, 2) != LUA_TTABLE && lua_type(L, 2) != LUA_TSTRING)
        return luaL_argerror(L, 2, lua_pushfstring(L, "expected a table or a byte string, got %s",
                                                   luaL_typename(L, 2)));
    void *data;
    size_t n = stage_source(L, 2, gr_buffer_dtype(b), &data);
    gr_status st = gr_buffer_write(ctx_of(L), b, (size_t)offset - 1, data, n);
    free(data);
    if (st != GR_OK) return fail(L, st, 3);
    lua_settop(L, 1);
    return 1;
}

static int b_get(lua_State *L) {
    gr_buffer *b = check_buffer(L, 1);
    lua_Integer i = check_count(L, 2, "index", LUA_MININTEGER);
    size_t n = gr_buffer_size(b);
    if (i < 1 || (size_t)i > n)
        return luaL_argerror(L, 2, lua_pushfstring(L, "index %I out of range (1..%I)", i, (lua_Integer)n));
    uint64_t elem;
    gr_status st = gr_buffer_read(ctx_of(L), b, (size_t)i - 1, &elem, 1);
    if (st != GR_OK) return fail(L, st, 2);
    push_element(L, &elem, gr_buffer_dtype(b));
    return 1;
}

/* The range (first = 1, count = rest) of totable/tobytes, checked. */
static void check_range(lua_State *L, gr_buffer *b, size_t *first, size_t *count) {
    size_t n = gr_buffer_size(b);
    lua_Integer f = lua_isnoneornil(L, 2) ? 1 : check_count(L, 2, "first", 1);
    lua_Integer c = lua_isnoneornil(L, 3) ? (lua_Integer)(n - (f <= (lua_Integer)n ? (size_t)f - 1 : n))
                                          : check_count(L, 3, "count", 0);
    if ((size_t)f - 1 > n || (size_t)c > n - ((size_t)f - 1))
        luaL_argerror(L, 2, lua_pushfstring(L, "elements %I..%I are outside the buffer (size %I)", f,
                                            f + c - 1, (lua_Integer)n));
    *first = (size_t)f - 1;
    *count = (size_t)c;
}

static int b_totable(lua_State *L) {
    gr_buffer *b = check_buffer(L, 1);
    size_t first, count, es = gr_dtype_size(gr_buffer_dtype(b));
    check_range(L, b, &first, &count);
    char *data = malloc(count ? count * es : 1);
    if (!data) return luaL_error(L, "gpureduce: out of host memory");
    gr_status st = gr_buffer_read(ctx_of(L), b, first, data, count);
    if (st != GR_OK) {
        free(data);
        return fail(L, st, 1);
    }
    lua_createtable(L, count < INT32_MAX ? (int)count : 0, 0);
    for (size_t i = 0; i < count; i++) {
        push_element(L, data + i * es, gr_buffer_dtype(b));
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    free(data);
    return 1;
}

static int b_tobytes(lua_State *L) {
    gr_buffer *b = check_buffer(L, 1);
    size_t first, count, es = gr_dtype_size(gr_buffer_dtype(b));
    check_range(L, b, &first, &count);
    luaL_Buffer lb;
    char *dst = luaL_buffinitsize(L, &lb, count * es);
    gr_status st = gr_buffer_read(ctx_of(L), b, first, dst, count);
    if (st != GR_OK) return fail(L, st, 1);
    luaL_pushresultsize(&lb, count * es);
    return 1;
}

/* b:slice(offset, count = rest) -- 1-based like string.sub; the view keeps its parent alive. */
static int b_slice(lua_State *L) {
    gr_buffer *b = check_buffer(L, 1);
    size_t n = gr_buffer_size(b);
    lua_Integer off = check_count(L, 2, "offset", 1);
    lua_Integer cnt = lua_isnoneornil(L, 3) ? (lua_Integer)n - off + 1 : check_count(L, 3, "count", 0);
    if ((size_t)off - 1 > n || cnt < 0 || (size_t)cnt > n - ((size_t)off - 1))
        return luaL_argerror(L, 2, lua_pushfstring(L, "slice %I..%I is outside the buffer (size %I)", off,
                                                   off + cnt - 1, (lua_Integer)n));
    lbuffer *u = new_buffer_ud(L);
    gr_status st = gr_buffer_slice(ctx_of(L), b, (size_t)off - 1, (size_t)cnt, &u->b);
    if (st != GR_OK) return fail(L, st, 2);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

/* ---- streams ------------------------------------------------------------------------------------- */

static gr_stream *check_stream(lua_State *L, int arg) {
    lstream *u = luaL_checkudata(L, arg, STREAM_MT);
    if (!u->s) luaL_argerror(L, arg, "stream has been freed");
    return u->s;
}

static int l_stream(lua_State *L) {
    lstream *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->s = NULL;
    luaL_setmetatable(L, STREAM_MT);
    gr_status st = gr_stream_new(ctx_of(L), &u->s);
    if (st != GR_OK) return fail(L, st, 0);
    return 1;
}

static int s_release(lua_State *L) {
    lstream *u = luaL_checkudata(L, 1, STREAM_MT);
    if (u->s) {
        gr_stream_free(ctx_of(L), u->s);
        u->s = NULL;
    }
    return 0;
}

static int s_sync(lua_State *L) {
    gr_status st = gr_stream_sync(ctx_of(L), check_stream(L, 1));
    if (st != GR_OK) return fail(L, st, 0);
    return 0;
}

static int s_tostring(lua_State *L) {
    lstream *u = luaL_checkudata(L, 1, STREAM_MT);
    lua_pushstring(L, u->s ? "gpureduce.Stream" : "gpureduce.Stream(freed)");
    return 1;
}

/* ---- options ------------------------------------------------------------------------------------- */

typedef struct {
    int async;
    int reps, warmup;
    int streamed, streams;   /* streamed host data: on/off, stream count (0 = default) */
    size_t chunk;            /* bytes per chunk (0 = default) */
    int dtype;               /* the dtype of a table or byte-string source, -1 = float32 */
} extra_opts;

static const char *const reduce_keys[] = {"acc", "async", "block", "chunk", "dtype", "finish", "grid", "op",
                                          "stream", "streamed", "streams", "threshold", "variant", NULL};
static const char *const bench_keys[] = {"acc", "block", "chunk", "finish", "grid", "op", "reps", "stream",
                                         "streamed", "streams", "threshold", "variant", "warmup", NULL};

static const char *accepted(lua_State *L, const char *const *keys) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; keys[i]; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, keys[i]);
    }
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

/* Pushes opts[key] and returns its type. */
static int field(lua_State *L, int arg, const char *key) { return lua_getfield(L, arg, key); }

static lua_Integer opt_integer(lua_State *L, int arg, const char *key, lua_Integer min) {
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: expected an integer, got %s", key,
                                              lua_type(L, -1) == LUA_TNUMBER ? "a non-integer number"
                                                                              : luaL_typename(L, -1)));
    if (v < min)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: must be >= %I (got %I)", key, min, v));
    return v;
}

static const char *opt_string(lua_State *L, int arg, const char *key) {
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: expected a string, got %s", key, luaL_typename(L, -1)));
    return lua_tostring(L, -1);
}

static void parse_opts(lua_State *L, int arg, int op, int bench, gr_options *o, extra_opts *x) {
    gr_options_init(o, (gr_op)op);
    memset(x, 0, sizeof *x);
    x->reps = 20;
    x->warmup = 3;
    x->dtype = -1;
    if (lua_isnoneornil(L, arg)) {
        if (op < 0) o->op = GR_SUM;
        return;
    }
    luaL_checktype(L, arg, LUA_TTABLE);
    const char *const *keys = bench ? bench_keys : reduce_keys;
    lua_pushnil(L);
    while (lua_next(L, arg)) {           /* reject misspelt options rather than ignore them */
        lua_pop(L, 1);
        const char *k = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
        int known = 0;
        for (int i = 0; k && keys[i] && !known; i++) known = strcmp(k, keys[i]) == 0;
        if (!known)
            luaL_argerror(L, arg, lua_pushfstring(L, "unknown option '%s' (accepted: %s)",
                                                  k ? k : luaL_typename(L, -1), accepted(L, keys)));
    }
    if (field(L, arg, "op") != LUA_TNIL) {
        const char *name = opt_string(L, arg, "op");
        int v = gr_op_from_name(name);
        if (v < 0)
            luaL_argerror(L, arg, lua_pushfstring(L, "opts.op: unknown op '%s' (accepted: %s)", name, gr_op_names()));
        if (op >= 0 && v != op)
            luaL_argerror(L, arg, lua_pushfstring(L, "opts.op: '%s' conflicts with this function's op '%s'",
                                                  name, gr_op_name((gr_op)op)));
        o->op = (gr_op)v;
    } else if (op < 0) {
        o->op = GR_SUM;
    }
    lua_pop(L, 1);
    if (field(L, arg, "variant") != LUA_TNIL) {
        const char *name = opt_string(L, arg, "variant");
        o->variant = strcmp(name, "auto") == 0 ? -1 : gr_variant_find(name);
        if (o->variant < 0 && strcmp(name, "auto") != 0)
            luaL_argerror(L, arg, lua_pushfstring(L, "opts.variant: unknown variant '%s' (accepted: %s)", name,
                                                  gr_variant_names()));
    }
    lua_pop(L, 1);
    if (field(L, arg, "block") != LUA_TNIL) o->block = (int)opt_integer(L, arg, "block", 1);
    lua_pop(L, 1);
    if (field(L, arg, "grid") != LUA_TNIL) o->grid = (size_t)opt_integer(L, arg, "grid", 1);
    lua_pop(L, 1);
    if (field(L, arg, "threshold") != LUA_TNIL) o->threshold = (size_t)opt_integer(L, arg, "threshold", 1);
    lua_pop(L, 1);
    if (field(L, arg, "finish") != LUA_TNIL) {
        const char *name = opt_string(L, arg, "finish");
        int f = gr_finish_from_name(name);
        if (f < 0)
            luaL_argerror(L, arg, lua_pushfstring(L, "opts.finish: unknown mode '%s' (accepted: %s)", name,
                                                  gr_finish_names()));
        o->finish = (gr_finish)f;
    }
    lua_pop(L, 1);
    if (field(L, arg, "acc") != LUA_TNIL) {
        const char *name = opt_string(L, arg, "acc");
        o->acc = gr_dtype_from_name(name);
        if (o->acc < 0)
            luaL_argerror(L, arg, lua_pushfstring(L, "opts.acc: unknown dtype '%s' (accepted: %s)", name,
                                                  gr_dtype_names()));
    }
    lua_pop(L, 1);
    if (field(L, arg, "stream") != LUA_TNIL) {
        lstream *u = luaL_testudata(L, -1, STREAM_MT);
        if (!u) luaL_argerror(L, arg, lua_pushfstring(L, "opts.stream: expected a gpureduce.Stream, got %s",
                                                      luaL_typename(L, -1)));
        if (!u->s) luaL_argerror(L, arg, "opts.stream: stream has been freed");
        o->stream = u->s;
    }
    lua_pop(L, 1);
    if (field(L, arg, "async") != LUA_TNIL) {
        if (!lua_isboolean(L, -1))
            luaL_argerror(L, arg, lua_pushfstring(L, "opts.async: expected a boolean, got %s", luaL_typename(L, -1)));
        x->async = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    if (field(L, arg, "streamed") != LUA_TNIL) {
        if (!lua_isboolean(L, -1))
            luaL_argerror(L, arg, lua_pushfstring(L, "opts.streamed: expected a boolean, got %s",
                                                  luaL_typename(L, -1)));
        x->streamed = lua_toboolean(L, -1);
    }
    lua_pop(L, 1);
    if (field(L, arg, "chunk") != LUA_TNIL) x->chunk = (size_t)opt_integer(L, arg, "chunk", 4096);
    lua_pop(L, 1);
    if (field(L, arg, "streams") != LUA_TNIL) x->streams = (int)opt_integer(L, arg, "streams", 1);
    lua_pop(L, 1);
    if (!bench && field(L, arg, "dtype") != LUA_TNIL) {
        const char *name = opt_string(L, arg, "dtype");
        x->dtype = gr_dtype_from_name(name);
        if (x->dtype < 0)
            luaL_argerror(L, arg, lua_pushfstring(L, "opts.dtype: unknown dtype '%s' (accepted: %s)", name,
                                                  gr_dtype_names()));
    }
    if (!bench) lua_pop(L, 1);
    if ((x->chunk || x->streams) && !x->streamed)
        luaL_argerror(L, arg, "opts.chunk and opts.streams go with opts.streamed = true");
    if (x->streamed && x->async)
        luaL_argerror(L, arg, "opts.async: streamed reductions are synchronous (they span several streams)");
    if (bench) {
        if (field(L, arg, "reps") != LUA_TNIL) x->reps = (int)opt_integer(L, arg, "reps", 1);
        lua_pop(L, 1);
        if (field(L, arg, "warmup") != LUA_TNIL) x->warmup = (int)opt_integer(L, arg, "warmup", 0);
        lua_pop(L, 1);
    }
}

/* ---- reductions ---------------------------------------------------------------------------------- */

static int push_pending(lua_State *L, gr_buffer *b, const gr_options *o);

/* A table or byte string reduced as streamed host data: staged through pinned memory first. */
static int reduce_source(lua_State *L, const gr_options *o, const extra_opts *x) {
    gr_context *ctx = ctx_of(L);
    gr_dtype t = x->dtype < 0 ? GR_FLOAT32 : (gr_dtype)x->dtype;
    void *data;
    size_t n = stage_source(L, 1, t, &data);
    lbuffer *u = new_buffer_ud(L);       /* collected, and so freed, even if a step below raises */
    gr_status st = gr_buffer_new(ctx, n, t, GR_HOST, &u->b);
    if (st == GR_OK) st = gr_buffer_write(ctx, u->b, 0, data, n);
    free(data);
    gr_scalar r;
    if (st == GR_OK) st = gr_reduce_streamed(ctx, u->b, o, x->chunk, x->streams, &r);
    gr_buffer_free(ctx, u->b);
    u->b = NULL;
    if (st != GR_OK) return fail(L, st, 2);
    push_scalar(L, r);
    return 1;
}

static int reduce_with(lua_State *L, int op) {
    gr_options o;
    extra_opts x;
    int is_buffer = luaL_testudata(L, 1, BUFFER_MT) != NULL;
    parse_opts(L, 2, op, 0, &o, &x);
    if (!is_buffer && x.streamed && (lua_type(L, 1) == LUA_TTABLE || lua_type(L, 1) == LUA_TSTRING))
        return reduce_source(L, &o, &x);
    gr_buffer *b = check_buffer(L, 1);
    if (x.dtype >= 0)
        luaL_argerror(L, 2, "opts.dtype: only for a table or byte-string source (a buffer has its own dtype)");
    if (x.async) return push_pending(L, b, &o);
    gr_scalar r;
    gr_status st = x.streamed ? gr_reduce_streamed(ctx_of(L), b, &o, x.chunk, x.streams, &r)
                              : gr_reduce(ctx_of(L), b, &o, &r);
    if (st != GR_OK) return fail(L, st, 2);
    push_scalar(L, r);
    return 1;
}

static int l_reduce(lua_State *L) { return reduce_with(L, -1); }
static int l_sum(lua_State *L) { return reduce_with(L, GR_SUM); }
static int l_prod(lua_State *L) { return reduce_with(L, GR_PROD); }
static int l_min(lua_State *L) { return reduce_with(L, GR_MIN); }
static int l_max(lua_State *L) { return reduce_with(L, GR_MAX); }
static int l_all(lua_State *L) { return reduce_with(L, GR_AND); }
static int l_any(lua_State *L) { return reduce_with(L, GR_OR); }

/* ---- pendings ------------------------------------------------------------------------------------ */

static int push_pending(lua_State *L, gr_buffer *b, const gr_options *o) {
    lpending *u = lua_newuserdatauv(L, sizeof *u, 2);
    u->p = NULL;
    luaL_setmetatable(L, PENDING_MT);
    gr_status st = gr_reduce_async(ctx_of(L), b, o, &u->p);
    if (st != GR_OK) return fail(L, st, 2);
    lua_pushvalue(L, 1);                 /* keep the buffer and the stream alive while in flight */
    lua_setiuservalue(L, -2, 1);
    if (o->stream) {
        lua_getfield(L, 2, "stream");
        lua_setiuservalue(L, -2, 2);
    }
    return 1;
}

static gr_pending *check_pending(lua_State *L, int arg) {
    lpending *u = luaL_checkudata(L, arg, PENDING_MT);
    if (!u->p) luaL_argerror(L, arg, "pending has been released");
    return u->p;
}

static int p_ready(lua_State *L) {
    lua_pushboolean(L, gr_pending_ready(ctx_of(L), check_pending(L, 1)));
    return 1;
}

static int p_wait(lua_State *L) {
    gr_scalar r;
    gr_status st = gr_pending_wait(ctx_of(L), check_pending(L, 1), &r);
    if (st != GR_OK) return fail(L, st, 0);
    push_scalar(L, r);
    return 1;
}

static int p_release(lua_State *L) {
    lpending *u = luaL_checkudata(L, 1, PENDING_MT);
    if (u->p) {
        gr_pending_free(ctx_of(L), u->p);
        u->p = NULL;
    }
    return 0;
}

static int p_tostring(lua_State *L) {
    lpending *u = luaL_checkudata(L, 1, PENDING_MT);
    lua_pushstring(L, !u->p ? "gpureduce.Pending(released)"
                            : gr_pending_ready(ctx_of(L), u->p) ? "gpureduce.Pending(ready)"
                                                                 : "gpureduce.Pending(running)");
    return 1;
}

/* ---- plan, bench, registry, device ---------------------------------------------------------------- */

static void set_int(lua_State *L, const char *k, lua_Integer v) { lua_pushinteger(L, v); lua_setfield(L, -2, k); }
static void set_num(lua_State *L, const char *k, double v) { lua_pushnumber(L, v); lua_setfield(L, -2, k); }
static void set_str(lua_State *L, const char *k, const char *v) { lua_pushstring(L, v); lua_setfield(L, -2, k); }

static void push_plan(lua_State *L, const gr_plan *p) {
    lua_createtable(L, 0, 6);
    set_str(L, "variant", gr_variant_get(p->variant)->name);
    set_str(L, "finish", gr_finish_name(p->finish));
    set_str(L, "acc", gr_dtype_name(p->acc));
    set_int(L, "threshold", (lua_Integer)p->threshold);
    lua_createtable(L, p->npasses, 0);
    for (int i = 0; i < p->npasses; i++) {
        const gr_pass *ps = &p->pass[i];
        lua_createtable(L, 0, 5);
        set_int(L, "elements", (lua_Integer)ps->elements);
        set_int(L, "blocks", (lua_Integer)ps->blocks);
        set_int(L, "block", ps->block);
        set_str(L, "dtype", gr_dtype_name(ps->in_dtype));
        set_str(L, "where", ps->on_host ? "host" : "device");
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "passes");
}

static int l_plan(lua_State *L) {
    gr_buffer *b = check_buffer(L, 1);
    gr_options o;
    extra_opts x;
    parse_opts(L, 2, -1, 0, &o, &x);
    gr_plan p;
    gr_status st = gr_plan_make(ctx_of(L), b, &o, &p);
    if (st != GR_OK) return fail(L, st, 2);
    push_plan(L, &p);
    return 1;
}

static void push_bench(lua_State *L, const gr_bench_result *r, gr_buffer *b, const char *timer) {
    lua_createtable(L, 0, 12);
    set_num(L, "ms", r->ms);
    set_num(L, "ms_min", r->ms_min);
    set_num(L, "ms_max", r->ms_max);
    set_num(L, "gbps", r->gbps);
    set_int(L, "reps", r->reps);
    set_int(L, "warmup", r->warmup);
    set_int(L, "n", (lua_Integer)gr_buffer_size(b));
    set_int(L, "bytes", (lua_Integer)(gr_buffer_size(b) * gr_dtype_size(gr_buffer_dtype(b))));
    set_str(L, "timer", timer);
}

/* gr.bench(b, opts): opts as for gr.reduce plus reps (20) and warmup (3); streamed host data too. */
static int l_bench(lua_State *L) {
    gr_buffer *b = check_buffer(L, 1);
    gr_options o;
    extra_opts x;
    parse_opts(L, 2, -1, 1, &o, &x);
    gr_bench_result r;
    if (x.streamed) {
        gr_status st = gr_bench_streamed(ctx_of(L), b, &o, x.chunk, x.streams, x.warmup, x.reps, &r);
        if (st != GR_OK) return fail(L, st, 2);
        push_bench(L, &r, b, "clock");
        return 1;
    }
    gr_plan p;
    gr_status st = gr_plan_make(ctx_of(L), b, &o, &p);
    if (st == GR_OK) st = gr_bench(ctx_of(L), b, &o, x.warmup, x.reps, &r);
    if (st != GR_OK) return fail(L, st, 2);
    push_bench(L, &r, b, p.npasses && !p.pass[0].on_host ? "events" : "clock");
    push_plan(L, &p);
    lua_setfield(L, -2, "plan");
    return 1;
}

/* gr.bench_read(b, {reps=, warmup=}): the read-bandwidth ceiling on this buffer. */
static int l_bench_read(lua_State *L) {
    gr_buffer *b = check_buffer(L, 1);
    gr_options o;
    extra_opts x;
    parse_opts(L, 2, -1, 1, &o, &x);
    gr_bench_result r;
    gr_status st = gr_bench_read(ctx_of(L), b, x.warmup, x.reps, &r);
    if (st != GR_OK) return fail(L, st, 1);
    push_bench(L, &r, b, "events");
    return 1;
}

/* gr.copy(dst, src): same dtype and size, any mix of host and device buffers. */
static int l_copy(lua_State *L) {
    gr_buffer *dst = check_buffer(L, 1), *src = check_buffer(L, 2);
    gr_status st = gr_buffer_copy(ctx_of(L), dst, src);
    if (st != GR_OK) return fail(L, st, 2);
    lua_settop(L, 1);
    return 1;
}

static int l_pool_stats(lua_State *L) {
    gr_pool_stats s;
    gr_pool_stats_get(ctx_of(L), &s);
    lua_createtable(L, 0, 3);
    set_int(L, "device_allocs", (lua_Integer)s.device_allocs);
    set_int(L, "host_allocs", (lua_Integer)s.host_allocs);
    set_int(L, "slots", s.slots);
    return 1;
}

static int l_variants(lua_State *L) {
    gr_context *ctx = ctx_of(L);
    int n = gr_variant_count();
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        const gr_variant *v = gr_variant_get(i);
        lua_createtable(L, 0, 10);
        set_str(L, "name", v->name);
        set_int(L, "ordinal", v->ordinal);
        set_str(L, "origin", v->origin);
        set_str(L, "summary", v->summary);
        lua_newtable(L);
        for (int f = 1, k = 0; f < GR_FINISH_COUNT; f++)
            if (v->finishes & (1u << f)) {
                lua_pushstring(L, gr_finish_name((gr_finish)f));
                lua_rawseti(L, -2, ++k);
            }
        lua_setfield(L, -2, "finishes");
        set_str(L, "default_finish", gr_finish_name(v->default_finish));
        lua_createtable(L, 0, 3);
        set_int(L, "min", v->block_min);
        set_int(L, "max", v->block_max);
        set_int(L, "default", v->block_default);
        lua_setfield(L, -2, "block");
        lua_newtable(L);
        int k = 0;
        if (v->needs & GR_NEEDS_CUDA) { lua_pushstring(L, "cuda"); lua_rawseti(L, -2, ++k); }
        if (v->needs & GR_NEEDS_POW2_BLOCK) { lua_pushstring(L, "power-of-two block"); lua_rawseti(L, -2, ++k); }
        lua_setfield(L, -2, "needs");
        lua_pushboolean(L, !(v->needs & GR_NEEDS_CUDA) || gr_context_backend(ctx) == GR_BACKEND_CUDA);
        lua_setfield(L, -2, "available");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int l_backend(lua_State *L) {
    lua_pushstring(L, gr_context_backend(ctx_of(L)) == GR_BACKEND_CUDA ? "cuda" : "cpu");
    return 1;
}

static int l_device(lua_State *L) {
    gr_device_info d;
    if (gr_device_info_get(ctx_of(L), &d) != GR_OK) {
        lua_pushnil(L);
        return 1;
    }
    lua_createtable(L, 0, 12);
    set_str(L, "name", d.name);
    set_int(L, "sms", d.sms);
    set_int(L, "memory", (lua_Integer)d.memory);
    lua_pushfstring(L, "%d.%d", d.cc_major, d.cc_minor);
    lua_setfield(L, -2, "cc");
    set_int(L, "cc_major", d.cc_major);
    set_int(L, "cc_minor", d.cc_minor);
    set_int(L, "l2", (lua_Integer)d.l2);
    set_int(L, "clock_khz", d.clock_khz);
    set_int(L, "mem_clock_khz", d.mem_clock_khz);
    set_int(L, "bus_width", d.bus_width);
    set_int(L, "max_threads_per_sm", d.max_threads_per_sm);
    lua_pushfstring(L, "%d.%d", d.runtime_version / 1000, (d.runtime_version % 1000) / 10);
    lua_setfield(L, -2, "cuda_runtime");
    lua_pushfstring(L, "%d.%d", d.driver_version / 1000, (d.driver_version % 1000) / 10);
    lua_setfield(L, -2, "cuda_driver");
    return 1;
}

static int push_names(lua_State *L, int count, const char *(*name)(int)) {
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        lua_pushstring(L, name(i));
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}
static const char *dtype_at(int i) { return gr_dtype_name((gr_dtype)i); }
static const char *op_at(int i) { return gr_op_name((gr_op)i); }
static const char *finish_at(int i) { return gr_finish_name((gr_finish)i); }
static int l_dtypes(lua_State *L) { return push_names(L, GR_DTYPE_COUNT, dtype_at); }
static int l_ops(lua_State *L) { return push_names(L, GR_OP_COUNT, op_at); }
static int l_finishes(lua_State *L) { return push_names(L, GR_FINISH_COUNT, finish_at); }

/* A monotonic clock in seconds, for wall-time measurements in scripts (os.clock is CPU time). */
static int l_clock(lua_State *L) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

/* ---- module -------------------------------------------------------------------------------------- */

static int ctx_gc(lua_State *L) {
    lcontext *u = luaL_checkudata(L, 1, CONTEXT_MT);
    gr_context_destroy(u->ctx);
    u->ctx = NULL;
    return 0;
}

static const luaL_Reg buffer_methods[] = {
    {"dtype", b_dtype}, {"fill", b_fill}, {"free", b_release}, {"get", b_get}, {"iota", b_iota},
    {"random", b_random}, {"set", b_set}, {"size", b_size}, {"slice", b_slice}, {"tobytes", b_tobytes},
    {"totable", b_totable}, {"where", b_where}, {NULL, NULL}};
static const luaL_Reg buffer_meta[] = {
    {"__close", b_release}, {"__gc", b_release}, {"__len", b_size}, {"__tostring", b_tostring}, {NULL, NULL}};
static const luaL_Reg stream_methods[] = {{"free", s_release}, {"sync", s_sync}, {NULL, NULL}};
static const luaL_Reg stream_meta[] = {
    {"__close", s_release}, {"__gc", s_release}, {"__tostring", s_tostring}, {NULL, NULL}};
static const luaL_Reg pending_methods[] = {{"free", p_release}, {"ready", p_ready}, {"wait", p_wait}, {NULL, NULL}};
static const luaL_Reg pending_meta[] = {
    {"__close", p_release}, {"__gc", p_release}, {"__tostring", p_tostring}, {NULL, NULL}};
static const luaL_Reg module_funcs[] = {
    {"all", l_all}, {"any", l_any}, {"backend", l_backend}, {"bench", l_bench}, {"bench_read", l_bench_read},
    {"buffer", l_buffer}, {"clock", l_clock}, {"copy", l_copy}, {"device", l_device}, {"dtypes", l_dtypes},
    {"finishes", l_finishes}, {"max", l_max}, {"min", l_min}, {"ops", l_ops}, {"plan", l_plan},
    {"pool_stats", l_pool_stats}, {"prod", l_prod}, {"reduce", l_reduce}, {"stream", l_stream},
    {"sum", l_sum}, {"variants", l_variants}, {"wrap", l_wrap}, {NULL, NULL}};

/* A metatable whose functions all see the context (at stack index ctx_idx) as upvalue 1; made once
 * per state. */
static void new_type(lua_State *L, const char *name, const luaL_Reg *methods, const luaL_Reg *meta, int ctx_idx) {
    if (!luaL_newmetatable(L, name)) {
        lua_pop(L, 1);
        return;
    }
    lua_pushvalue(L, ctx_idx);
    luaL_setfuncs(L, meta, 1);
    lua_newtable(L);
    lua_pushvalue(L, ctx_idx);
    luaL_setfuncs(L, methods, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

/* One context per Lua state, kept in the registry: a second load of the module (busted reloads modules
 * for every spec file) shares it, so objects made under either load stay valid. It is collected only
 * when the state closes, and last, since it was the first object given a finalizer. */
#define CONTEXT_KEY "gpureduce.context"

static void push_context(lua_State *L) {
    if (lua_getfield(L, LUA_REGISTRYINDEX, CONTEXT_KEY) == LUA_TUSERDATA) return;
    lua_pop(L, 1);
    lcontext *u = lua_newuserdatauv(L, sizeof *u, 0);
    u->ctx = NULL;
    luaL_newmetatable(L, CONTEXT_MT);
    lua_pushcfunction(L, ctx_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    if (gr_context_create(&u->ctx) != GR_OK) luaL_error(L, "gpureduce: cannot create a context");
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, CONTEXT_KEY);
}

int luaopen_gpureduce_core(lua_State *L) {
    push_context(L);
    int ctx_idx = lua_gettop(L);
    new_type(L, BUFFER_MT, buffer_methods, buffer_meta, ctx_idx);
    new_type(L, STREAM_MT, stream_methods, stream_meta, ctx_idx);
    new_type(L, PENDING_MT, pending_methods, pending_meta, ctx_idx);
    luaL_newlibtable(L, module_funcs);
    lua_pushvalue(L, ctx_idx);
    luaL_setfuncs(L, module_funcs, 1);
    lua_pushstring(L, GR_VERSION);
    lua_setfield(L, -2, "version");
    return 1;
}
