/*
 * lbuffer.h -- the Buffer userdata (lbuffer.c): gr.buffer, gr.wrap, gr.copy, the methods, and what the
 * files that take buffers use: the accessor, a new empty userdata, the staging of a table or bytes.
 */
#ifndef LGR_LBUFFER_H
#define LGR_LBUFFER_H

#include "lcore.h"

#define BUFFER_MT "gpureduce.Buffer"

typedef struct { gr_buffer *b; } lbuffer;

/* The buffer at arg; raises for anything else or a freed one. */
gr_buffer *lgr_check_buffer(lua_State *L, int arg);
/* The buffer at arg, compact: a strided view is replaced at arg by its compact copy (a new userdata, so
 * that whatever keeps arg alive keeps the copy), which the caller then reduces. */
gr_buffer *lgr_check_compact_buffer(lua_State *L, int arg);
/* The buffer at arg for a whole-buffer reduction: a compact one as it is; with order_free (the result
 * does not depend on the elements' order but for rounding), a strided view whose elements fill their
 * memory exactly (transposed, permuted) replaced there by that memory as a 1-D buffer, no copy; any
 * other view by its compact copy (lgr_check_compact_buffer). */
gr_buffer *lgr_check_reduced_buffer(lua_State *L, int arg, int order_free);
/* A new Buffer userdata with no handle yet, on the top of the stack. */
lbuffer *lgr_new_buffer_ud(lua_State *L);
/* Host staging of a table or byte string of elements of dtype t; the caller frees *out. Returns the
 * element count; raises on a bad element, naming its index. */
size_t lgr_stage_source(lua_State *L, int arg, gr_dtype t, void **out);

int lgr_buffer(lua_State *L);
/* __index (b[i], then the methods: upvalue 2) and __newindex (b[i] = v) of buffers. */
int lgr_buffer_index(lua_State *L);
int lgr_buffer_newindex(lua_State *L);
int lgr_copy(lua_State *L);
int lgr_wrap(lua_State *L);
extern const luaL_Reg lgr_buffer_methods[];
extern const luaL_Reg lgr_buffer_meta[];

#endif
