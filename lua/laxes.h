/*
 * laxes.h -- reductions along axes from Lua (opts.axis, laxes.c).
 */
#ifndef LGR_LAXES_H
#define LGR_LAXES_H

#include "lrequest.h"

/* gr.reduce(b, {axis = ...}) and the op functions': the results pushed (one buffer, or two for argmin,
 * argmax and minmax), opts.out's or new ones of the result shape; returns how many. */
int lgr_reduce_axes(lua_State *L, gr_buffer *b, const lgr_request *r);
/* The axes of r resolved against b (*axes: a mask of 0-based bits; a bad one raises naming opts.axis) and
 * the result buffers pushed: opts.out's, checked against the result shape, or new ones of it. Returns
 * how many. */
int lgr_axes_outs(lua_State *L, gr_buffer *b, const lgr_request *r, unsigned *axes, gr_buffer *out[2]);

#endif
