/*
 * loperator.h -- user operators (loperator.c): gr.operator and the Operator userdata, and what gr.kernel
 * shares with it in reading a user's table and reporting a compile.
 */
#ifndef LGR_LOPERATOR_H
#define LGR_LOPERATOR_H

#include "lcore.h"

#define OPERATOR_MT "gpureduce.Operator"

/* An Operator keeps the facts of its compile at creation, which op:info() shows. */
typedef struct { gr_operator *op; gr_operator_compile_info compiled; } loperator;

/* The operator at arg; raises for anything else or a freed one. Its cpu table {map =, reduce =, post =,
 * identity =} is user value 1 of the userdata (nil when it has none). */
gr_operator *lgr_check_operator(lua_State *L, int arg);
int lgr_operator(lua_State *L);
int lgr_operator_index(lua_State *L);    /* __index: op.name, then the methods (upvalue 2) */
/* What gr.operator and gr.kernel share in reading their table (argument 1): "a, b, c" of a
 * NULL-terminated list, pushed; a refusal of a key of table t that is not in keys (prefix: "cpu." for a
 * nested table); t[key] as a C string left on the stack (NULL for nil), refusing another type with
 * "<key>: expected a string<hint>" and a string with a zero byte inside. */
const char *lgr_push_list(lua_State *L, const char *const *names);
void lgr_refuse_unknown(lua_State *L, int t, const char *const *keys, const char *prefix);
const char *lgr_string_field(lua_State *L, int t, const char *key, const char *hint);
/* The fields of a compile's facts (origin, dtype, arch, ptx, image_bytes, nvrtc_ms, ...) in the table on
 * the top of the stack: op:info()'s and gr.kernel_compile's. */
void lgr_set_compile_info(lua_State *L, const gr_operator_compile_info *c);
/* Raises the engine's last compile error (GR_EINVAL of a compile) with NVRTC's whole log after it. */
int lgr_raise_compile_error(lua_State *L);
extern const luaL_Reg lgr_operator_methods[], lgr_operator_meta[];

#endif
