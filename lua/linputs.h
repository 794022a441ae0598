/*
 * linputs.h -- an operator of several inputs from Lua (linputs.c): the list of buffers read and
 * prepared, and reduced synchronously.
 */
#ifndef LGR_LINPUTS_H
#define LGR_LINPUTS_H

#include "lrequest.h"

/* Whether argument arg is a plain list (no metatable: not a sharded buffer) whose first element is a
 * buffer. */
int lgr_is_buffer_list(lua_State *L, int arg);
/* The list at argument 1 with r read from argument 2 (gr.reduce's, or gr.bench's with `bench`, which
 * times whole buffers): checked against opts.op, its buffers into bufs, their kernels or the cpu
 * functions prepared (r->o.ninputs set). Returns the count; raises on what cannot run. */
int lgr_inputs_read(lua_State *L, lgr_request *r, int bench, gr_buffer *bufs[GR_OPERATOR_INPUTS]);
/* The synchronous reduction of lgr_inputs_read's buffers: pushes the value (the result buffer with
 * segment, offsets or axis) and returns how many. */
int lgr_reduce_inputs(lua_State *L, lgr_request *r, gr_buffer *const *bufs, int count);

#endif
