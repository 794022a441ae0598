/*
 * cpu_convert.c -- conversions between dtypes on the host, generated from GR_DTYPE_LIST (lists.h).
 *
 * A pair of dtypes is not a nested expansion of the list (the preprocessor does not expand a macro
 * inside its own expansion): elements go in chunks through their values, read by the source's dtype
 * (decode, one switch) and written by the destination's (encode, one switch), with the value's kind
 * fixed per chunk, so each loop is a plain loop over one dtype. The element rules are
 * convert_element.h's, which the device's kernel expands too.
 */
#include "ops/cpu_convert.h"
#include "ops/convert_element.h"

#include <math.h>
#include <stddef.h>

/* Elements per chunk: the values fit in a few KiB of stack. */
#define CHUNK 512

/* The values of one chunk, all of one kind. */
typedef struct {
    int kind;
    union { int64_t i[CHUNK]; uint64_t u[CHUNK]; double f[CHUNK]; } v;
} chunk_values;

static inline void put_value(chunk_values *c, size_t k, gr_cv_value x) {
    c->kind = x.kind;
    if (x.kind == GR_CV_INT) c->v.i[k] = x.v.i;
    else if (x.kind == GR_CV_UINT) c->v.u[k] = x.v.u;
    else c->v.f[k] = x.v.f;
}

static inline gr_cv_value value_at(const chunk_values *c, size_t k) {
    return c->kind == GR_CV_INT ? gr_cv_of_int(c->v.i[k]) : c->kind == GR_CV_UINT ? gr_cv_of_uint(c->v.u[k])
                                                                                 : gr_cv_of_float(c->v.f[k]);
}

/* n elements of dtype t at src as values. */
static void decode(const void *src, gr_dtype t, size_t n, chunk_values *c) {
    switch (t) {
#define DECODE(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E: {                                                                                      \
        const ctype *s = (const ctype *)src;                                                            \
        for (size_t k = 0; k < n; k++) put_value(c, k, GR_CV_READ_##kind(format, s[k]));                \
        return;                                                                                         \
    }
        GR_DTYPE_LIST(DECODE)
#undef DECODE
    case GR_DTYPE_COUNT: break;
    }
}

/* The n values as elements of dtype t at dst (with GR_CV_WRITE); the index of the first that does not
 * fit (with GR_CV_CHECK), else n. */
static size_t encode(void *dst, gr_dtype t, size_t n, const chunk_values *c, int mode) {
    switch (t) {
#define ENCODE(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E: {                                                                                      \
        ctype *d = (ctype *)dst;                                                                        \
        size_t first = n;                                                                               \
        for (size_t k = 0; k < n; k++) {                                                                \
            ctype e;                                                                                    \
            int bad;                                                                                    \
            GR_CV_WRITE_##kind(format, ctype, bytes, is_signed, value_at(c, k), e, bad);                \
            if (bad && first == n) first = k;                                                           \
            if (mode & GR_CV_WRITE) d[k] = e;                                                           \
        }                                                                                               \
        return mode & GR_CV_CHECK ? first : n;                                                          \
    }
        GR_DTYPE_LIST(ENCODE)
#undef ENCODE
    case GR_DTYPE_COUNT: break;
    }
    return n;
}

size_t gr_cpu_convert(void *dst, gr_dtype to, const void *src, gr_dtype from, size_t n, int mode) {
    chunk_values c;
    c.kind = GR_CV_FLOAT;
    const size_t fs = gr_dtype_size(from), ts = gr_dtype_size(to);
    for (size_t lo = 0; lo < n; lo += CHUNK) {
        const size_t len = n - lo < CHUNK ? n - lo : CHUNK;
        decode((const char *)src + lo * fs, from, len, &c);
        const size_t k = encode(dst ? (char *)dst + lo * ts : NULL, to, len, &c, mode);
        if (k < len) return lo + k;
    }
    return n;
}

/* ---- which pairs can fail ---------------------------------------------------------------------------- */

/* Whether the value v fits dtype t. */
static int fits(gr_dtype t, gr_cv_value v) {
    switch (t) {
#define FITS(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E: {                                                                                    \
        ctype e;                                                                                      \
        int bad;                                                                                      \
        GR_CV_WRITE_##kind(format, ctype, bytes, is_signed, v, e, bad);                               \
        (void)e;                                                                                      \
        return !bad;                                                                                  \
    }
        GR_DTYPE_LIST(FITS)
#undef FITS
    case GR_DTYPE_COUNT: break;
    }
    return 0;
}

/* The values that decide whether every value of a dtype fits another (conversions are monotonic in the
 * magnitude): by the kind column, into out; their count. */
static inline int extremes_INT(int bytes, int is_signed, double largest, gr_cv_value *out) {
    (void)largest;
    const int64_t hi = (int64_t)(((uint64_t)1 << (8 * bytes - (is_signed ? 1 : 0))) - 1u);
    out[0] = gr_cv_of_int(is_signed ? -hi - 1 : 0);
    out[1] = gr_cv_of_int(hi);
    return 2;
}
static inline int extremes_UINT(int bytes, int is_signed, double largest, gr_cv_value *out) {
    (void)is_signed;
    (void)largest;
    out[0] = gr_cv_of_uint(0);
    out[1] = gr_cv_of_uint(bytes == 8 ? ~0ull : ((uint64_t)1 << (8 * bytes)) - 1u);
    return 2;
}
static inline int extremes_BOOL(int bytes, int is_signed, double largest, gr_cv_value *out) {
    (void)bytes;
    (void)is_signed;
    (void)largest;
    out[0] = gr_cv_of_uint(0);
    out[1] = gr_cv_of_uint(1);
    return 2;
}
/* a float format: both largest finite values, both infinities (where it has none, they fit nothing
 * that lacks them either, and can only make a pair checked that needs no check), and NaN */
static inline int extremes_FLOAT(int bytes, int is_signed, double largest, gr_cv_value *out) {
    (void)bytes;
    (void)is_signed;
    out[0] = gr_cv_of_float(largest);
    out[1] = gr_cv_of_float(-largest);
    out[2] = gr_cv_of_float((double)INFINITY);
    out[3] = gr_cv_of_float(-(double)INFINITY);
    out[4] = gr_cv_of_float((double)NAN);
    return 5;
}

int gr_convert_can_fail(gr_dtype from, gr_dtype to) {
    if (from == to) return 0;
    gr_cv_value x[5];
    int count = 0;
    switch (from) {
#define EXTREMES(E, name, ctype, bytes, is_float, is_signed, kind, lowest, highest, float_acc, nccl, format) \
    case GR_##E: count = extremes_##kind(bytes, is_signed, GR_CV_LARGEST_##format(bytes), x); break;
        GR_DTYPE_LIST(EXTREMES)
#undef EXTREMES
    case GR_DTYPE_COUNT: break;
    }
    for (int k = 0; k < count; k++)
        if (!fits(to, x[k])) return 1;
    return 0;
}
