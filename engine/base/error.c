/*
 * error.c -- the context's error state: a status, a message, and the parameter it concerns.
 *
 * Messages are in the engine's own vocabulary ("block: 48 is not accepted by ..."): the parameter's C
 * name is kept apart (gr_errarg) so that a binding can say it in its own words ("opts.block: ...").
 * Failures of the CUDA runtime carry the error's name, and the file and line of the launch when a
 * launcher reported one.
 */
#include "base/error.h"
#include "base/device.h"

#include <stdarg.h>

#include <stdio.h>
#include <string.h>

static gr_status vfail(gr_context *ctx, gr_status st, const char *arg, const char *fmt, va_list ap) {
    if (!ctx) return st;
    gr_base *b = gr_base_of(ctx)->root;     /* an inner context's failure is the caller's (core/context.c) */
    snprintf(b->err_arg, sizeof b->err_arg, "%s", arg ? arg : "");
    size_t used = 0;
    if (arg && *arg) used = (size_t)snprintf(b->err, sizeof b->err, "%s: ", b->err_arg);
    vsnprintf(b->err + used, sizeof b->err - used, fmt, ap);
    return st;
}

gr_status gr_fail(gr_context *ctx, gr_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(ctx, st, NULL, fmt, ap);
    va_end(ap);
    return st;
}

gr_status gr_fail_arg(gr_context *ctx, gr_status st, const char *arg, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(ctx, st, arg, fmt, ap);
    va_end(ap);
    return st;
}

gr_status gr_fail_dev(gr_context *ctx, int code, const char *what) {
    return gr_fail_dev_at(ctx, code, what, NULL);
}

gr_status gr_fail_dev_at(gr_context *ctx, int code, const char *what, const char *site) {
    gr_status st = gr_dev_error_is_oom(code) ? GR_ENOMEM : GR_ECUDA;
    /* an injected fault (GPUREDUCE_FAULT, gr_debug_fault) says so, so a test log is not mistaken for a
     * real failure */
    const char *injected = ctx && gr_base_of(ctx)->fault.injected ? "; injected fault" : "";
    if (ctx) gr_base_of(ctx)->fault.injected = 0;
    /* after a kernel faulted nothing of CUDA works again in this process: say so, every time */
    const char *lost = gr_dev_error_is_sticky(code) ? ". The CUDA context is lost (a kernel faulted, a user kernel "
                       "perhaps): every later CUDA call of this process fails; restart the process" : "";
    if (site && *site)
        return gr_fail(ctx, st, "%s: %s (%s; launched at %s%s)%s", what, gr_dev_error_name(code),
                       gr_dev_error_string(code), site, injected, lost);
    return gr_fail(ctx, st, "%s: %s (%s%s)%s", what, gr_dev_error_name(code), gr_dev_error_string(code), injected,
                   lost);
}

const char *gr_errmsg(const gr_context *ctx) { return ctx ? gr_base_of(ctx)->root->err : "no context"; }
const char *gr_errarg(const gr_context *ctx) { return ctx ? gr_base_of(ctx)->root->err_arg : ""; }

gr_status gr_set_error(gr_context *ctx, gr_status st, const char *arg, const char *msg) {
    return arg ? gr_fail_arg(ctx, st, arg, "%s", msg) : gr_fail(ctx, st, "%s", msg);
}

const char *gr_join_names(char *buf, size_t size, int count, const char *(*name_at)(int)) {
    if (!buf[0]) {
        size_t used = 0;
        for (int i = 0; i < count && used < size; i++)
            used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? ", " : "", name_at(i));
    }
    return buf;
}
