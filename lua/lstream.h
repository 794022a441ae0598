/*
 * lstream.h -- the Stream userdata (lstream.c).
 */
#ifndef LGR_LSTREAM_H
#define LGR_LSTREAM_H

#include "lcore.h"

#define STREAM_MT "gpureduce.Stream"

typedef struct { gr_stream *s; } lstream;

int lgr_stream(lua_State *L);
extern const luaL_Reg lgr_stream_methods[], lgr_stream_meta[];

#endif
