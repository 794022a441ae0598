/*
 * lopts.c -- the one parser of options tables ({block = 256, finish = "single"}, {where = "host"}, ...).
 *
 * Each options table is described by a list of lgr_opt rows (key, reader, destination field, bounds):
 * the parser refuses keys that no row names -- a misspelt option is an error, not a silent default --
 * and every reader refuses a value of the wrong type or out of range, naming the key, what it got and
 * what is accepted. Integers are bounded before they are narrowed: 2^32 + 256 is not 256.
 */
#include "lopts.h"
#include "../engine/gr.h"

#include <string.h>

static const char *accepted_keys(lua_State *L, const lgr_opt *specs) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; specs[i].key; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, specs[i].key);
    }
    luaL_pushresult(&b);
    return lua_tostring(L, -1);
}

void lgr_parse_opts(lua_State *L, int arg, const lgr_opt *specs, void *dst) {
    if (lua_isnoneornil(L, arg)) return;
    if (!lua_istable(L, arg))
        luaL_argerror(L, arg, lua_pushfstring(L, "opts: expected a table, got %s", luaL_typename(L, arg)));
    arg = lua_absindex(L, arg);
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        const lgr_opt *spec = NULL;
        if (lua_type(L, -2) == LUA_TSTRING) {
            const char *k = lua_tostring(L, -2);
            for (int i = 0; specs[i].key && !spec; i++)
                if (strcmp(k, specs[i].key) == 0) spec = &specs[i];
        }
        if (!spec) {
            const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_tolstring(L, -2, NULL);
            luaL_argerror(L, arg, lua_pushfstring(L, "unknown option '%s' (accepted: %s)", k,
                                                  accepted_keys(L, specs)));
        }
        spec->read(L, arg, spec, (char *)dst + spec->offset);
        lua_pop(L, 1);
    }
}

static lua_Integer read_integer(lua_State *L, int arg, const lgr_opt *opt) {
    int isint;
    lua_Integer v = lua_tointegerx(L, -1, &isint);
    if (!isint || lua_type(L, -1) != LUA_TNUMBER) {
        const char *got = lua_type(L, -1) == LUA_TNUMBER ? lua_pushfstring(L, "%f", lua_tonumber(L, -1))
                                                          : luaL_typename(L, -1);
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: expected an integer, got %s", opt->key, got));
    }
    if (v < opt->min || v > opt->max) {
        if (opt->max == LUA_MAXINTEGER)
            luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: must be >= %I (got %I)", opt->key, opt->min, v));
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: must be %I to %I (got %I)", opt->key, opt->min,
                                              opt->max, v));
    }
    return v;
}

void lgr_read_int(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    *(int *)field = (int)read_integer(L, arg, opt);     /* the bounds keep it inside int */
}

void lgr_read_size(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    *(size_t *)field = (size_t)read_integer(L, arg, opt);
}

void lgr_read_bool(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    if (!lua_isboolean(L, -1))
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: expected a boolean, got %s", opt->key,
                                              luaL_typename(L, -1)));
    *(int *)field = lua_toboolean(L, -1);
}

static const char *read_string(lua_State *L, int arg, const lgr_opt *opt, const char *accepted) {
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: expected a string (accepted: %s), got %s", opt->key,
                                              accepted, luaL_typename(L, -1)));
    return lua_tostring(L, -1);
}

void lgr_read_dtype(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    const char *name = read_string(L, arg, opt, gr_dtype_names());
    int t = gr_dtype_from_name(name);
    if (t < 0)
        luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: unknown dtype '%s' (accepted: %s)", opt->key, name,
                                              gr_dtype_names()));
    *(int *)field = t;
}

void lgr_read_choice(lua_State *L, int arg, const lgr_opt *opt, void *field) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 0; opt->names[i]; i++) {
        if (i) luaL_addstring(&b, ", ");
        luaL_addstring(&b, opt->names[i]);
    }
    luaL_pushresult(&b);
    const char *accepted = lua_tostring(L, -1);
    lua_pushvalue(L, -2);
    const char *name = read_string(L, arg, opt, accepted);
    for (int i = 0; opt->names[i]; i++)
        if (strcmp(name, opt->names[i]) == 0) {
            *(int *)field = i;
            lua_pop(L, 2);
            return;
        }
    luaL_argerror(L, arg, lua_pushfstring(L, "opts.%s: unknown value '%s' (accepted: %s)", opt->key, name,
                                          accepted));
}
