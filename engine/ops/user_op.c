/*
 * user_op.c -- a user operator as the host knows it: the operator's own copies of its fields, its
 * references, and its identity read as a number where it is a literal the host understands (the cpu
 * functions fold from it; anything else is left to the GPU's check and the functions' own identity).
 */
#include "ops/user_op.h"
#include "base/error.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char *copy_of(const char *s) {
    if (!s) return NULL;
    size_t len = strlen(s) + 1;
    char *c = malloc(len);
    if (c) memcpy(c, s, len);
    return c;
}

void gr_operator_hold(gr_operator *op) { op->refs++; }

void gr_operator_free(gr_operator *op) {
    if (!op || --op->refs > 0) return;
    free((char *)op->spec.name);
    free((char *)op->spec.map);
    free((char *)op->spec.reduce);
    free((char *)op->spec.post);
    free((char *)op->spec.identity);
    free((char *)op->spec.acc);
    free((char *)op->spec.preamble);
    for (int k = 0; k < op->spec.ninputs; k++) free((char *)op->spec.inputs[k]);
    while (op->ready_inputs) {
        gr_op_ready *next = op->ready_inputs->next;
        free(op->ready_inputs);
        op->ready_inputs = next;
    }
    free(op);
}

gr_status gr_user_op_new(gr_context *ctx, const gr_operator_spec *spec, int acc_dtype, gr_operator **out) {
    *out = NULL;
    gr_operator *op = calloc(1, sizeof *op);
    if (!op) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    op->spec = (gr_operator_spec){.name = copy_of(spec->name), .map = copy_of(spec->map),
                                  .reduce = copy_of(spec->reduce), .post = copy_of(spec->post),
                                  .identity = copy_of(spec->identity), .acc = copy_of(spec->acc),
                                  .preamble = copy_of(spec->preamble)};
    op->refs = 1;
    int copied = 1;
    for (int k = 0; k < spec->ninputs; k++) {
        op->spec.inputs[k] = copy_of(spec->inputs[k]);
        op->spec.ninputs = k + 1;           /* freed with the operator from here on */
        copied = copied && op->spec.inputs[k];
    }
    if (!copied || !op->spec.name || !op->spec.map || !op->spec.reduce || !op->spec.identity || !op->spec.acc ||
        (spec->post && !op->spec.post) || (spec->preamble && !op->spec.preamble)) {
        gr_operator_free(op);
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    }
    op->acc_dtype = acc_dtype;
    *out = op;
    return GR_OK;
}

const gr_operator_spec *gr_operator_get_spec(const gr_operator *op) { return &op->spec; }
int gr_operator_indexed(const gr_operator *op) { return op->indexed; }
int gr_operator_inputs(const gr_operator *op) { return op->spec.ninputs > 1 ? op->spec.ninputs : 1; }
int gr_operator_acc_dtype(const gr_operator *op) { return op->acc_dtype; }

int gr_operator_segment_dtype(gr_context *ctx, int has_post, int acc_dtype) {
    if (has_post) return GR_FLOAT64;
    if (acc_dtype >= 0) return acc_dtype;
    gr_fail_arg(ctx, GR_EINVAL, "op", "segments of an operator with a struct accumulator need a post (results "
                "are its value, or the accumulator itself where it is a dtype)");
    return -1;
}

/* ---- the identity on the host ---------------------------------------------------------------------- */

/* A C literal read as a number: [sign] (integer [lL]* | float [fFlL]? | INFINITY | NAN), in
 * parentheses or not. 1 with an integer's 64 bits in *u (is_float 0; *negative when it had a minus) or a
 * double in *f (is_float 1); 0 for anything else, which the host does not try to understand. */
static int read_literal(const char *s, int *is_float, int *negative, unsigned long long *u, double *f) {
    char buf[128];
    size_t len = strlen(s);
    while (len && isspace((unsigned char)s[len - 1])) len--;
    while (isspace((unsigned char)*s)) s++, len--;
    while (len >= 2 && s[0] == '(' && s[len - 1] == ')') {    /* (-1), ((0)) */
        s++, len -= 2;
        while (len && isspace((unsigned char)*s)) s++, len--;
        while (len && isspace((unsigned char)s[len - 1])) len--;
    }
    if (len == 0 || len >= sizeof buf) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *p = buf;
    *negative = 0;
    if (*p == '+' || *p == '-') {
        *negative = *p == '-';
        for (p++; isspace((unsigned char)*p);) p++;
    }
    if (strcmp(p, "INFINITY") == 0 || strcmp(p, "NAN") == 0) {
        *is_float = 1;
        *f = p[0] == 'I' ? (*negative ? -INFINITY : INFINITY) : NAN;
        return 1;
    }
    if (!isdigit((unsigned char)*p) && !(*p == '.' && isdigit((unsigned char)p[1]))) return 0;
    int hex = p[0] == '0' && (p[1] == 'x' || p[1] == 'X');
    int floating = strpbrk(p, hex ? ".pP" : ".eE") != NULL;
    char *end;
    errno = 0;
    if (floating) {
        *f = strtod(p, &end);
        if (*end == 'f' || *end == 'F' || *end == 'l' || *end == 'L') end++;
        if (*end || errno == ERANGE) return 0;
        *is_float = 1;
        if (*negative) *f = -*f;
        return 1;
    }
    unsigned long long v = strtoull(p, &end, 0);    /* base 0: 0x.. hex, 0.. octal, as C reads them */
    if (end == p || errno == ERANGE) return 0;
    for (int k = 0; k < 3 && *end && strchr("lL", *end); k++) end++;   /* l, ll: the value is the same */
    if (*end) return 0;    /* u suffixes make -1u a large number: left to the GPU's check */
    if (*negative && v > (unsigned long long)INT64_MAX + 1) return 0;
    *is_float = 0;
    *u = *negative ? 0 - v : v;
    return 1;
}

int gr_operator_identity_value(const gr_operator *op, gr_scalar *out) {
    if (op->acc_dtype < 0) return 0;
    gr_dtype t = (gr_dtype)op->acc_dtype;
    int is_float, negative;
    unsigned long long u;
    double f;
    if (!read_literal(op->spec.identity, &is_float, &negative, &u, &f)) return 0;
    if (gr_dtype_is_float(t)) {
        out->kind = GR_SCALAR_FLOAT;
        out->v.f = is_float ? f : negative ? (double)(long long)u : (double)u;
        if (gr_dtype_size(t) == 4) out->v.f = (double)(float)out->v.f;
        return 1;
    }
    if (is_float) {
        /* C converts toward zero; out of the dtype's range it is undefined: not checked on the host */
        if (!(f > -9.2e18 && f < 9.2e18)) return 0;
        u = (unsigned long long)(long long)f;
    }
    /* what C's conversion to the accumulator's width keeps: the low bits, read with its sign */
    unsigned bits = 8u * (unsigned)gr_dtype_size(t);
    if (bits < 64) {
        u &= (1ull << bits) - 1;
        if (gr_dtype_is_signed(t) && (u >> (bits - 1))) u |= ~0ull << bits;
    }
    out->kind = gr_dtype_is_signed(t) ? GR_SCALAR_INT : GR_SCALAR_UINT;
    if (out->kind == GR_SCALAR_INT) out->v.i = (int64_t)u;
    else out->v.u = u;
    return 1;
}
