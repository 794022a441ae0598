/*
 * lcomm.h -- gr.comm and the Comm userdata (lcomm.c): NCCL communicators across processes.
 */
#ifndef LGR_LCOMM_H
#define LGR_LCOMM_H

#include "lcore.h"

#define COMM_MT "gpureduce.Comm"

int lgr_comm(lua_State *L);
int lgr_comm_id(lua_State *L);
int lgr_debug_comm_combine(lua_State *L);
int lgr_nccl_version(lua_State *L);
extern const luaL_Reg lgr_comm_methods[], lgr_comm_meta[];

#endif
