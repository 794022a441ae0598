/*
 * ldot.h -- gr.dot and gr.bench_dot from Lua (ldot.c).
 */
#ifndef LGR_LDOT_H
#define LGR_LDOT_H

#include "lcore.h"

int lgr_dot(lua_State *L);
int lgr_bench_dot(lua_State *L);

#endif
