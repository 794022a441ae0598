/*
 * lby_key.h -- gr.reduce_by_key from Lua (lby_key.c).
 */
#ifndef LGR_LBY_KEY_H
#define LGR_LBY_KEY_H

#include "lcore.h"

int lgr_reduce_by_key(lua_State *L);

#endif
