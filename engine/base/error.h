/*
 * error.h -- failures, recorded in the context (error.c).
 */
#ifndef GR_ERROR_H
#define GR_ERROR_H

#include "base/state.h"

gr_status gr_fail(gr_context *ctx, gr_status st, const char *fmt, ...);
/* A failure that concerns one parameter, named in C words ("block"): the message starts with it and
 * gr_errarg returns it. */
gr_status gr_fail_arg(gr_context *ctx, gr_status st, const char *arg, const char *fmt, ...);
/* Wraps a CUDA error code into GR_ECUDA (GR_ENOMEM for allocation failures) with its name; `site` is
 * the file and line of a kernel launch that failed, or NULL. */
gr_status gr_fail_dev(gr_context *ctx, int code, const char *what);
gr_status gr_fail_dev_at(gr_context *ctx, int code, const char *what, const char *site);

/* "a, b, c": the names of entries 0 .. count-1 joined into buf, the "accepted: ..." list of an error
 * over a fixed axis (dtypes, ops, finishes). Written once, on the first call with an empty buf. */
const char *gr_join_names(char *buf, size_t size, int count, const char *(*name_at)(int));

#endif
