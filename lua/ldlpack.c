/*
 * ldlpack.c -- gr.from_dlpack(p, {legacy = false}): the DLManagedTensorVersioned* at p (a light userdata,
 * as b:to_dlpack() or a host application gives it) as a Buffer on its memory, no copy. The Buffer owns
 * the tensor from then on: its last view freed or collected, the engine calls the tensor's deleter once
 * (engine/core/dlpack.c). A refused tensor stays the caller's. With legacy = true p is the DLManagedTensor*
 * of DLPack before 1.0, which nothing in the memory tells apart from a versioned one.
 */
#include "ldlpack.h"

#include "lbuffer.h"
#include "lopts.h"

typedef struct { int legacy; } from_dlpack_opts;
static const lgr_opt from_dlpack_specs[] = {
    {"legacy", lgr_read_bool, offsetof(from_dlpack_opts, legacy), 0, 0, NULL},
    {NULL, NULL, 0, 0, 0, NULL}};

int lgr_from_dlpack(lua_State *L) {
    if (lua_type(L, 1) != LUA_TLIGHTUSERDATA)
        return luaL_argerror(L, 1, lua_pushfstring(L, "expected a DLManagedTensorVersioned* as a light userdata "
                                                   "(b:to_dlpack() gives one), got %s", luaL_typename(L, 1)));
    void *managed = lua_touserdata(L, 1);
    from_dlpack_opts o = {0};
    lgr_parse_opts(L, 2, from_dlpack_specs, &o);
    gr_context *ctx = lgr_ctx(L);
    lbuffer *u = lgr_new_buffer_ud(L);
    gr_status st = o.legacy ? gr_buffer_from_dlpack_legacy(ctx, managed, &u->b)
                            : gr_buffer_from_dlpack(ctx, managed, &u->b);
    if (st != GR_OK) return lgr_fail(L, st, 2, "managed", 1, NULL);
    return 1;
}
