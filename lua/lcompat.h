/*
 * lcompat.h -- the Lua C API of 5.4 on every Lua the binding builds for: 5.4 and 5.5 as they are, 5.3,
 * and 5.1 / LuaJIT 2.1 (LUA_VERSION_NUM 501). The binding is written against 5.4 and includes this header
 * instead of lua.h and lauxlib.h; what an older Lua lacks is defined here, once, as the newer Lua defines
 * it (the names the binding calls stay 5.4's), so that no file of the binding tests a version.
 *
 * What differs, and how it is made the same:
 *   - n user values per userdata (5.4): on 5.3 a table in the one user value, on 5.1 a table as the
 *     userdata's environment (lua_setfenv). A userdata made with no user value has none to set or get.
 *   - lua_gc(L, what) with one argument (5.4's is variadic; 5.3's and 5.1's take exactly one datum).
 *     LUA_GCISRUNNING is not an option of Lua 5.1 (LuaJIT has it): lua_gc answers -1 to an unknown
 *     option, which reads as "running", the collector's state unless a script stopped it. A step of the
 *     collector is lgr_gc_step(L, kb): 5.5 counts it in bytes, as a size_t.
 *   - On 5.1 and LuaJIT, numbers are doubles: lua_isinteger is "a number with an integral value that an
 *     int64 holds exactly", lua_tointegerx converts exactly or not at all (never truncates), and
 *     LUA_MAXINTEGER/LUA_MININTEGER are lua_Integer's range (ptrdiff_t, 64 bits). What the binding pushes
 *     as an integer beyond 2^53 is decided in lcore.c (lgr_push_scalar and gr.int64), not here.
 *   - lua_pushfstring and luaL_error learn 5.3's %I (a lua_Integer) on 5.1; the other conversions
 *     (%s %d %f %p %c %%) are 5.1's own.
 *   - lua_getfield, lua_rawget, lua_rawgeti and lua_geti return the type of the value pushed (5.3+).
 *   - The 5.2 names that 5.1 lacks (lua_absindex, lua_rawlen, luaL_len, luaL_setfuncs, luaL_testudata,
 *     luaL_setmetatable, luaL_tolstring, lua_rawgetp/lua_rawsetp, lua_compare for equality, LUA_OK,
 *     luaL_buffinitsize/luaL_pushresultsize, lua_writestringerror (which 5.5 keeps to itself)), written after their 5.3 originals.
 *     LuaJIT 2.1 declares some of them already; the macros below replace its versions by ours, which
 *     behave the same on both 5.1 interpreters (its lua_tointegerx truncates, for one).
 *
 * Only the binding (lua/) and the host programs that embed Lua include it; the engine has no Lua in it.
 */
#ifndef LGR_LCOMPAT_H
#define LGR_LCOMPAT_H

#include <lauxlib.h>
#include <lua.h>

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#if !defined(LUA_VERSION_NUM) || LUA_VERSION_NUM < 501 || LUA_VERSION_NUM == 502
#error "gpureduce builds for Lua 5.1 (and LuaJIT 2.1), 5.3, 5.4 and 5.5"
#endif

/* Whether a Lua integer holds every int64 exactly (5.3+), or only those of magnitude up to 2^53. */
#define LGR_LUA_INT64 (LUA_VERSION_NUM >= 503)

/* A message on stderr, as the standard libraries print warnings (5.2 to 5.4's lauxlib.h; 5.5 keeps it
 * to itself). */
#ifndef lua_writestringerror
#define lua_writestringerror(s, p) (fprintf(stderr, (s), (p)), fflush(stderr))
#endif

/* One step of the collector, worth `kb` kilobytes of allocation: 5.5's LUA_GCSTEP takes a size_t count
 * of bytes, the earlier ones an int count of kilobytes (kb below 2^30). */
#if LUA_VERSION_NUM >= 505
#define lgr_gc_step(L, kb) lua_gc(L, LUA_GCSTEP, (size_t)(kb) * 1024)
#else
#define lgr_gc_step(L, kb) lua_gc(L, LUA_GCSTEP, (int)(kb))
#endif

/* ---- 5.1 and LuaJIT: what 5.2 and 5.3 added ---------------------------------------------------------- */
#if LUA_VERSION_NUM == 501

#include <stddef.h>
#include <string.h>

#ifndef LUA_OK
#define LUA_OK 0
#endif
#ifndef LUA_GCISRUNNING
#define LUA_GCISRUNNING 9 /* unknown to Lua 5.1's lua_gc, which answers -1: "running" */
#endif
#define LUA_OPEQ 0
#define LUA_MAXINTEGER PTRDIFF_MAX /* lua_Integer is ptrdiff_t */
#define LUA_MININTEGER PTRDIFF_MIN
typedef unsigned long long lua_Unsigned;


/* The functions that return the type of what they push. (A macro's own name inside it is the
 * function's, not the macro again.) */
#define lua_getfield(L, idx, k) (lua_getfield(L, idx, k), lua_type(L, -1))
#define lua_rawget(L, idx) (lua_rawget(L, idx), lua_type(L, -1))
#define lua_rawgeti(L, idx, n) (lua_rawgeti(L, idx, n), lua_type(L, -1))
/* (luaL_getmetatable is 5.1's macro over lua_getfield: it returns the type too.) */

static inline int lgr_absindex(lua_State *L, int idx) {
    return idx > 0 || idx <= LUA_REGISTRYINDEX ? idx : lua_gettop(L) + idx + 1;
}
#define lua_absindex lgr_absindex

static inline int lgr_geti(lua_State *L, int idx, lua_Integer n) {
    idx = lua_absindex(L, idx);
    lua_pushnumber(L, (lua_Number)n);
    lua_gettable(L, idx);
    return lua_type(L, -1);
}
#define lua_geti lgr_geti

#define lua_rawlen(L, idx) lua_objlen(L, idx)
#define lua_compare(L, a, b, op) ((void)(op), lua_equal(L, a, b)) /* LUA_OPEQ only */

static inline void lgr_rawsetp(lua_State *L, int idx, const void *p) {
    idx = lua_absindex(L, idx);
    lua_pushlightuserdata(L, (void *)p);
    lua_insert(L, -2);
    lua_rawset(L, idx);
}
#define lua_rawsetp lgr_rawsetp
static inline int lgr_rawgetp(lua_State *L, int idx, const void *p) {
    idx = lua_absindex(L, idx);
    lua_pushlightuserdata(L, (void *)p);
    return lua_rawget(L, idx);
}
#define lua_rawgetp lgr_rawgetp

/* Integers: numbers with an integral value in int64's range, converted exactly. Strings convert as
 * lua_tonumber converts them (5.3's lua_tointegerx does too); lua_isinteger is true of numbers only. */
static inline int lgr_number_is_integer(lua_Number n) {
    return n >= -0x1p63 && n < 0x1p63 && (lua_Number)(lua_Integer)n == n;
}
static inline lua_Integer lgr_tointegerx(lua_State *L, int idx, int *isnum) {
    lua_Number n = lua_tonumber(L, idx);
    int ok = lua_isnumber(L, idx) && lgr_number_is_integer(n);
    if (isnum) *isnum = ok;
    return ok ? (lua_Integer)n : 0;
}
#define lua_tointegerx lgr_tointegerx
#define lua_tointeger(L, idx) lgr_tointegerx(L, idx, NULL)
#define lua_isinteger(L, idx) (lua_type(L, idx) == LUA_TNUMBER && lgr_number_is_integer(lua_tonumber(L, idx)))

static inline lua_Integer lgr_len(lua_State *L, int idx) {
    idx = lua_absindex(L, idx);
    if (luaL_callmeta(L, idx, "__len")) {
        int isnum;
        lua_Integer n = lua_tointegerx(L, -1, &isnum);
        if (!isnum) luaL_error(L, "object length is not an integer");
        lua_pop(L, 1);
        return n;
    }
    return (lua_Integer)lua_objlen(L, idx);
}
#define luaL_len lgr_len

static inline void lgr_setfuncs(lua_State *L, const luaL_Reg *l, int nup) {
    luaL_checkstack(L, nup, "too many upvalues");
    for (; l->name; l++) {
        if (!l->func) {
            lua_pushboolean(L, 0);
        } else {
            for (int i = 0; i < nup; i++) lua_pushvalue(L, -nup);
            lua_pushcclosure(L, l->func, nup);
        }
        lua_setfield(L, -(nup + 2), l->name);
    }
    lua_pop(L, nup);
}
#define luaL_setfuncs lgr_setfuncs
#ifndef luaL_newlibtable
#define luaL_newlibtable(L, l) lua_createtable(L, 0, sizeof(l) / sizeof((l)[0]) - 1)
#endif

static inline void *lgr_testudata(lua_State *L, int idx, const char *tname) {
    void *p = lua_touserdata(L, idx);
    if (!p || !lua_getmetatable(L, idx)) return NULL;
    luaL_getmetatable(L, tname);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    return same ? p : NULL;
}
#define luaL_testudata lgr_testudata

static inline void lgr_setmetatable(lua_State *L, const char *tname) {
    luaL_getmetatable(L, tname);
    lua_setmetatable(L, -2);
}
#define luaL_setmetatable lgr_setmetatable

/* lua_pushfstring with 5.3's %I; the rest as Lua 5.1 formats them (%f as LUA_NUMBER_FMT). */
static inline const char *lgr_pushvfstring(lua_State *L, const char *fmt, va_list ap) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (const char *e; (e = strchr(fmt, '%')) != NULL; fmt = e + 2) {
        char num[64];
        luaL_addlstring(&b, fmt, (size_t)(e - fmt));
        switch (e[1]) {
        case 's': {
            const char *s = va_arg(ap, const char *);
            luaL_addstring(&b, s ? s : "(null)");
            break;
        }
        case 'c': luaL_addchar(&b, (char)va_arg(ap, int)); break;
        case 'd': snprintf(num, sizeof num, "%d", va_arg(ap, int)); luaL_addstring(&b, num); break;
        case 'I': snprintf(num, sizeof num, "%lld", (long long)va_arg(ap, lua_Integer)); luaL_addstring(&b, num); break;
        case 'f': snprintf(num, sizeof num, LUA_NUMBER_FMT, (double)va_arg(ap, lua_Number)); luaL_addstring(&b, num); break;
        case 'p': snprintf(num, sizeof num, "%p", va_arg(ap, void *)); luaL_addstring(&b, num); break;
        case '%': luaL_addchar(&b, '%'); break;
        default: return luaL_error(L, "invalid conversion '%%%c' to 'lua_pushfstring'", e[1]), NULL;
        }
    }
    luaL_addstring(&b, fmt);
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}
static inline const char *lgr_pushfstring(lua_State *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    const char *s = lgr_pushvfstring(L, fmt, ap);
    va_end(ap);
    return s;
}
#define lua_pushvfstring lgr_pushvfstring
#define lua_pushfstring lgr_pushfstring

static inline int lgr_error(lua_State *L, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    luaL_where(L, 1);
    lgr_pushvfstring(L, fmt, ap);
    va_end(ap);
    lua_concat(L, 2);
    return lua_error(L);
}
#define luaL_error lgr_error

/* 5.3's luaL_tolstring: __tostring, __name, or the value's type and address. */
static inline const char *lgr_tolstring(lua_State *L, int idx, size_t *len) {
    idx = lua_absindex(L, idx);
    if (luaL_callmeta(L, idx, "__tostring")) {
        if (!lua_isstring(L, -1)) luaL_error(L, "'__tostring' must return a string");
    } else {
        switch (lua_type(L, idx)) {
        case LUA_TNUMBER:
            if (lua_isinteger(L, idx)) lua_pushfstring(L, "%I", lua_tointeger(L, idx));
            else lua_pushfstring(L, "%f", lua_tonumber(L, idx));
            break;
        case LUA_TSTRING: lua_pushvalue(L, idx); break;
        case LUA_TBOOLEAN: lua_pushstring(L, lua_toboolean(L, idx) ? "true" : "false"); break;
        case LUA_TNIL: lua_pushliteral(L, "nil"); break;
        default: {
            int tt = luaL_getmetafield(L, idx, "__name");
            const char *kind = tt && lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, idx);
            lua_pushfstring(L, "%s: %p", kind, lua_topointer(L, idx));
            if (tt) lua_remove(L, -2);
            break;
        }
        }
    }
    return lua_tolstring(L, -1, len);
}
#define luaL_tolstring lgr_tolstring

/* A buffer of a known size: a userdata of that size, made a string by luaL_pushresultsize (nothing
 * may be pushed between the two). */
#define luaL_buffinitsize(L, B, size) (luaL_buffinit(L, B), (char *)lua_newuserdata(L, size))
static inline void lgr_pushresultsize(luaL_Buffer *B, size_t size) {
    lua_pushlstring(B->L, (const char *)lua_touserdata(B->L, -1), size);
    lua_remove(B->L, -2);
}
#define luaL_pushresultsize lgr_pushresultsize

#endif /* 5.1 */

/* ---- 5.3: what 5.4 added ------------------------------------------------------------------------- */
#if LUA_VERSION_NUM < 504

/* lua_gc(L, what) and lua_gc(L, what, data) alike: the first datum, 0 when none is given. */
#define LGR_GC_FIRST2(what, data, ...) what, data
#define lua_gc(L, ...) (lua_gc)(L, LGR_GC_FIRST2(__VA_ARGS__, 0, 0))

#if LUA_VERSION_NUM == 501
#define lgr_getuvtable(L, idx) (lua_getfenv(L, idx), lua_type(L, -1))
#define lgr_setuvtable(L, idx) lua_setfenv(L, idx)
#else
#define lgr_getuvtable(L, idx) lua_getuservalue(L, idx)
#define lgr_setuvtable(L, idx) lua_setuservalue(L, idx)
#endif

/* A userdata with `nuv` user values, kept in a table of its own whose key 0 holds nuv. */
static inline void *lgr_newuserdatauv(lua_State *L, size_t size, int nuv) {
    void *p = lua_newuserdata(L, size);
    if (nuv > 0) {
        lua_createtable(L, nuv, 1);
        lua_pushinteger(L, nuv);
        lua_rawseti(L, -2, 0);
        lgr_setuvtable(L, -2);
    }
    return p;
}

/* Pushes the table of user values of the userdata at idx (absolute) and returns 1 when it has a user
 * value n; pushes nothing and returns 0 otherwise (on 5.1 every userdata has an environment table,
 * the globals unless we set one: the count at key 0 tells ours). */
static inline int lgr_uvtable(lua_State *L, int idx, int n) {
    if (lgr_getuvtable(L, idx) == LUA_TTABLE) {
        lua_rawgeti(L, -1, 0);
        lua_Integer count = lua_type(L, -1) == LUA_TNUMBER ? (lua_Integer)lua_tonumber(L, -1) : 0;
        lua_pop(L, 1);
        if (n >= 1 && n <= count) return 1;
    }
    lua_pop(L, 1);
    return 0;
}
#define lua_newuserdatauv lgr_newuserdatauv

/* Pops a value and makes it user value n of the userdata at idx; 0 when it has no user values. */
static inline int lgr_setiuservalue(lua_State *L, int idx, int n) {
    if (!lgr_uvtable(L, lua_absindex(L, idx), n)) {
        lua_pop(L, 1);
        return 0;
    }
    lua_insert(L, -2);
    lua_rawseti(L, -2, n);
    lua_pop(L, 1);
    return 1;
}
#define lua_setiuservalue lgr_setiuservalue

/* Pushes user value n of the userdata at idx (nil and LUA_TNONE when it has none); returns its type. */
static inline int lgr_getiuservalue(lua_State *L, int idx, int n) {
    if (!lgr_uvtable(L, lua_absindex(L, idx), n)) {
        lua_pushnil(L);
        return LUA_TNONE;
    }
    lua_rawgeti(L, -1, n);
    lua_remove(L, -2);
    return lua_type(L, -1);
}
#define lua_getiuservalue lgr_getiuservalue

#endif /* < 5.4 */

#endif
