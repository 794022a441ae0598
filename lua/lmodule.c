/*
 * lmodule.c -- the module gpureduce.core opened: its context, the metatables of its userdata, and its
 * function table (as Lua's linit.c opens the standard libraries). It only registers: every function it
 * names lives in the file of its type or job, and none of them calls back here.
 *
 * Every function registered here has the context userdata as upvalue 1 (lcore.c reaches it there).
 */
#include "lbuffer.h"
#include "lby_key.h"
#include "lcomm.h"
#include "lcore.h"
#include "ldlpack.h"
#include "linfo.h"
#include "lkernel.h"
#include "loperator.h"
#include "lreduce.h"
#include "ldot.h"
#include "lsharded.h"
#include "lstream.h"

static const luaL_Reg module_funcs[] = {
    {"backend", lgr_backend}, {"bench", lgr_bench},
    {"bench_dot", lgr_bench_dot}, {"bench_read", lgr_bench_read}, {"buffer", lgr_buffer}, {"clock", lgr_clock}, {"comm", lgr_comm},
    {"comm_id", lgr_comm_id}, {"copy", lgr_copy},
    {"debug_comm_combine", lgr_debug_comm_combine}, {"debug_events", lgr_debug_events}, {"debug_fault", lgr_debug_fault},
    {"debug_float_decode", lgr_debug_float_decode}, {"debug_float_device", lgr_debug_float_device},
    {"debug_float_encode", lgr_debug_float_encode}, {"device", lgr_device},
    {"devices", lgr_devices}, {"dot", lgr_dot}, {"dtypes", lgr_dtypes}, {"finishes", lgr_finishes},
    {"from_dlpack", lgr_from_dlpack}, {"int64", lgr_int64}, {"kernel", lgr_kernel},
    {"kernel_compile", lgr_kernel_compile}, {"kernel_source", lgr_kernel_source},
    {"memory_limit", lgr_memory_limit}, {"nccl_version", lgr_nccl_version},
    {"operator", lgr_operator}, {"ops", lgr_ops}, {"plan", lgr_plan}, {"pool_stats", lgr_pool_stats},
    {"pool_trim", lgr_pool_trim}, {"reduce", lgr_reduce}, {"reduce_by_key", lgr_reduce_by_key}, {"reduce_many", lgr_reduce_many}, {"stream", lgr_stream},
    {"variants", lgr_variants}, {"wrap", lgr_wrap}, {NULL, NULL}};

/* gr.sum, gr.prod, ..., gr.nanmean and the aliases gr.all, gr.any: one function per op of the engine's
 * list (the list is the only place the ops are named). */
static void add_op_functions(lua_State *L, int module, int ctx_idx) {
    for (int op = 0; op < GR_OP_COUNT; op++) {
        const char *names[2] = {gr_op_name((gr_op)op), gr_op_alias((gr_op)op)};
        for (int k = 0; k < 2 && names[k]; k++) {
            lua_pushvalue(L, ctx_idx);
            lua_pushinteger(L, op);
            lua_pushcclosure(L, lgr_reduce_op, 2);
            lua_setfield(L, module, names[k]);
        }
    }
}

/* A metatable whose functions all see the context (at stack index ctx_idx) as upvalue 1; made once
 * per state. With `indexer`, __index is that function (upvalues: the context, the methods table):
 * buffers index their elements (b[1]) as well as their methods, operators their name. */
static void new_type(lua_State *L, const char *name, const luaL_Reg *methods, const luaL_Reg *meta, int ctx_idx,
                     lua_CFunction indexer) {
    if (!luaL_newmetatable(L, name)) {
        lua_pop(L, 1);
        return;
    }
    lua_pushvalue(L, ctx_idx);
    luaL_setfuncs(L, meta, 1);
    lua_newtable(L);
    lua_pushvalue(L, ctx_idx);
    luaL_setfuncs(L, methods, 1);
    if (indexer) {
        lua_pushvalue(L, ctx_idx);
        lua_insert(L, -2);
        lua_pushcclosure(L, indexer, 2);
    }
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

int luaopen_gpureduce_core(lua_State *L) {
    lgr_push_context(L);
    int ctx_idx = lua_gettop(L);
    new_type(L, BUFFER_MT, lgr_buffer_methods, lgr_buffer_meta, ctx_idx, lgr_buffer_index);
    luaL_getmetatable(L, BUFFER_MT);
    lua_pushvalue(L, ctx_idx);
    lua_pushcclosure(L, lgr_buffer_newindex, 1);
    lua_setfield(L, -2, "__newindex");
    lua_pop(L, 1);
    new_type(L, STREAM_MT, lgr_stream_methods, lgr_stream_meta, ctx_idx, NULL);
    new_type(L, PENDING_MT, lgr_pending_methods, lgr_pending_meta, ctx_idx, NULL);
    new_type(L, COMM_MT, lgr_comm_methods, lgr_comm_meta, ctx_idx, NULL);
    new_type(L, OPERATOR_MT, lgr_operator_methods, lgr_operator_meta, ctx_idx, lgr_operator_index);
    luaL_newlibtable(L, module_funcs);
    lua_pushvalue(L, ctx_idx);
    luaL_setfuncs(L, module_funcs, 1);
    add_op_functions(L, lua_gettop(L), ctx_idx);
    lua_pushstring(L, GR_VERSION);
    lua_setfield(L, -2, "version");
    luaL_newmetatable(L, SHARDED_MT);       /* gr.sharded's; its methods are Lua (gpureduce/sharded.lua) */
    lua_setfield(L, -2, "_Sharded");
    return 1;
}
