/*
 * ldlpack.h -- gr.from_dlpack (ldlpack.c): a DLPack tensor of another library as a Buffer, no copy.
 * (b:ptr() and b:to_dlpack() are Buffer methods: lbuffer.c.)
 */
#ifndef LGR_LDLPACK_H
#define LGR_LDLPACK_H

#include "lcore.h"

int lgr_from_dlpack(lua_State *L);

#endif
