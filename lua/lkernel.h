/*
 * lkernel.h -- user kernel variants (lkernel.c): gr.kernel, gr.kernel_source, gr.kernel_compile.
 */
#ifndef LGR_LKERNEL_H
#define LGR_LKERNEL_H

#include "lcore.h"

int lgr_kernel(lua_State *L);
int lgr_kernel_compile(lua_State *L);
int lgr_kernel_source(lua_State *L);

#endif
