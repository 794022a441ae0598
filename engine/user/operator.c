/*
 * operator.c -- user operators: C expressions checked, compiled by NVRTC through the kernel caches, and
 * NVRTC's errors said in the user's terms; the source it compiles is operator_source.c's.
 *
 * The generated source (gr_operator_source; docs/architecture.md shows one) includes the NVRTC-clean
 * headers, then the preamble, then one function per expression, each expression on lines of its own
 * after a `#line 1 "<field>"` directive and followed by `#line N "generated"`: NVRTC then reports an
 * error in a field as "map(1): error: ...", which compile_log.c rewrites as "map: 1:5: ...". A functor
 * over those functions has the shape of cuda/device/ops.cuh's, so the kernels are the catalogue's pieces
 * (thread_accumulate, block_reduce, epilogue) instantiated for it.
 *
 * Nothing here knows CUDA beyond device.h: an image is bytes until gr_operator_load.
 */
#include "user/operator.h"
#include "jit/compile_log.h"
#include "ops/ops.h"
#include "base/clock.h"
#include "base/device.h"
#include "core/context.h"
#include "base/error.h"
#include "base/hash.h"
#include "jit/kcache.h"
#include "jit/nvrtc.h"
#include "jit/source_text.h"
#include "jit/user_text.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bumped when the generated source's contract changes in a way the source text does not show (the
 * payload's layout); the source itself is in every cache key. */
#define GR_OP_FORMAT 1

/* ---- the spec -------------------------------------------------------------------------------------- */

/* C's own names of arithmetic types: an acc spelt this way gets a hint toward the dtype names. */
static const char *const c_type_words[] = {"char", "short", "int", "long", "float", "double", "bool",
                                           "signed", "unsigned", "void", "half", "size_t", NULL};

static gr_status check_expression(gr_context *ctx, const char *field, const char *text, const char *what) {
    if (!text) return gr_fail_arg(ctx, GR_EINVAL, field, "is required (%s)", what);
    if (gr_operator_is_blank(text)) return gr_fail_arg(ctx, GR_EINVAL, field, "is empty (expected %s)", what);
    return gr_user_text_check(ctx, field, text, GR_TEXT_EXPRESSION);
}

/* The accumulator: a dtype, or a struct the preamble declares. */
static gr_status check_acc(gr_context *ctx, const gr_operator_spec *spec, int *dtype) {
    const char *acc = spec->acc;
    *dtype = -1;
    if (!acc || gr_operator_is_blank(acc))
        return gr_fail_arg(ctx, GR_EINVAL, "acc", "is %s (expected a dtype: %s; or the name of a struct "
                           "declared in the preamble)", acc ? "empty" : "required", gr_dtype_names());
    int t = gr_dtype_from_name(acc);
    if (t >= 0) {
        *dtype = t;
        return GR_OK;
    }
    for (int k = 0; c_type_words[k]; k++)
        if (strncmp(acc, c_type_words[k], strlen(c_type_words[k])) == 0 &&
            !gr_is_ident_char(acc[strlen(c_type_words[k])]))
            return gr_fail_arg(ctx, GR_EINVAL, "acc", "'%s' is a C type: name it by its dtype (%s)", acc,
                               gr_dtype_names());
    if (!gr_is_identifier(acc) || strlen(acc) > GR_NAME_MAX)
        return gr_fail_arg(ctx, GR_EINVAL, "acc", "unknown accumulator '%.80s%s': neither a dtype (%s) nor the "
                           "name of a struct (a C name of at most %d characters)", acc, strlen(acc) > 80 ? "..." : "",
                           gr_dtype_names(), GR_NAME_MAX);
    gr_status st = gr_user_name_check(ctx, "acc", acc, "a struct's name");
    if (st != GR_OK) return st;
    if (!spec->preamble || !gr_source_has_token(spec->preamble, acc, 0))
        return gr_fail_arg(ctx, GR_EINVAL, "acc", "unknown accumulator '%s': neither a dtype (%s) nor a struct "
                           "declared in the preamble", acc, gr_dtype_names());
    if (!spec->post)
        return gr_fail_arg(ctx, GR_EINVAL, "post", "is required when acc is a struct (%s): a struct cannot be "
                           "a result, post makes a number of it", acc);
    return GR_OK;
}

static gr_status check_spec(gr_context *ctx, const gr_operator_spec *spec, int *acc_dtype) {
    if (!spec) return gr_fail_arg(ctx, GR_EINVAL, "spec", "is NULL");
    gr_status st = gr_check_name(ctx, spec->name);
    if (st == GR_OK) st = check_expression(ctx, "map", spec->map, "a C expression over x and i");
    if (st == GR_OK) st = check_expression(ctx, "reduce", spec->reduce, "a C expression over a and b");
    if (st == GR_OK) st = check_expression(ctx, "identity", spec->identity, "a C initializer of the accumulator");
    if (st == GR_OK && spec->post) st = check_expression(ctx, "post", spec->post, "a C expression over a and n");
    if (st == GR_OK && spec->preamble) st = gr_user_text_check(ctx, "preamble", spec->preamble, GR_TEXT_PREAMBLE);
    if (st == GR_OK) st = check_acc(ctx, spec, acc_dtype);
    return st;
}

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
    free(op);
}

gr_status gr_operator_create(gr_context *ctx, const gr_operator_spec *spec, gr_operator **out) {
    *out = NULL;
    int acc_dtype;
    gr_status st = check_spec(ctx, spec, &acc_dtype);
    if (st != GR_OK) return st;
    gr_operator *op = calloc(1, sizeof *op);
    if (!op) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    op->spec = (gr_operator_spec){copy_of(spec->name), copy_of(spec->map), copy_of(spec->reduce),
                                  copy_of(spec->post), copy_of(spec->identity), copy_of(spec->acc),
                                  copy_of(spec->preamble)};
    if (!op->spec.name || !op->spec.map || !op->spec.reduce || !op->spec.identity || !op->spec.acc ||
        (spec->post && !op->spec.post) || (spec->preamble && !op->spec.preamble)) {
        gr_operator_free(op);
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    }
    op->acc_dtype = acc_dtype;
    op->refs = 1;
    op->indexed = gr_source_has_token(op->spec.map, "i", 1);
    *out = op;
    return GR_OK;
}

const gr_operator_spec *gr_operator_get_spec(const gr_operator *op) { return &op->spec; }
int gr_operator_indexed(const gr_operator *op) { return op->indexed; }
int gr_operator_acc_dtype(const gr_operator *op) { return op->acc_dtype; }

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

/* ---- the image's constants --------------------------------------------------------------------------- */

static uint64_t le(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int k = bytes - 1; k >= 0; k--) v = v << 8 | p[k];
    return v;
}

/* The 8-byte value of the global `name` in a 64-bit little-endian ELF image (a CUBIN): its symbol in
 * .symtab, its bytes in the section the symbol names. Every offset is checked against the size. */
static int elf_u64(const unsigned char *e, size_t size, const char *name, uint64_t *value) {
    if (size < 64 || memcmp(e, "\177ELF", 4) != 0 || e[4] != 2 || e[5] != 1) return 0;
    uint64_t shoff = le(e + 0x28, 8), shentsize = le(e + 0x3a, 2), shnum = le(e + 0x3c, 2);
    if (shentsize < 64 || shoff > size || shnum > (size - shoff) / shentsize) return 0;
#define GR_SECTION_(k) (e + shoff + (uint64_t)(k) * shentsize)
    for (uint64_t s = 0; s < shnum; s++) {
        const unsigned char *sym = GR_SECTION_(s);
        if (le(sym + 4, 4) != 2) continue;    /* SHT_SYMTAB */
        uint64_t off = le(sym + 0x18, 8), len = le(sym + 0x20, 8), link = le(sym + 0x28, 4), ent = le(sym + 0x38, 8);
        if (link >= shnum || ent < 24 || off > size || len > size - off) return 0;
        const unsigned char *str = GR_SECTION_(link);
        uint64_t stroff = le(str + 0x18, 8), strsize = le(str + 0x20, 8);
        if (stroff > size || strsize > size - stroff) return 0;
        for (uint64_t k = 0; k + ent <= len; k += ent) {
            const unsigned char *y = e + off + k;
            uint64_t at = le(y, 4), shndx = le(y + 6, 2), where = le(y + 8, 8);
            size_t nlen = strlen(name);
            if (at >= strsize || nlen + 1 > strsize - at || memcmp(e + stroff + at, name, nlen + 1) != 0) continue;
            if (shndx == 0 || shndx >= shnum) return 0;
            const unsigned char *data = GR_SECTION_(shndx);
            uint64_t doff = le(data + 0x18, 8), dlen = le(data + 0x20, 8);
            if (where > dlen || dlen - where < 8) return 0;
            if (le(data + 4, 4) == 8) {     /* SHT_NOBITS: zero-initialized, no bytes in the file */
                *value = 0;
                return 1;
            }
            if (doff > size || dlen > size - doff) return 0;
            *value = le(e + doff + where, 8);
            return 1;
        }
    }
#undef GR_SECTION_
    return 0;
}

/* The same from PTX text: ".global .align 8 .u64 gr_op_acc_size = 16;", or "... gr_op_result_kind;"
 * for a zero. */
static int ptx_u64(const char *ptx, size_t size, const char *name, uint64_t *value) {
    size_t nlen = strlen(name);
    for (const char *p = ptx; (p = strstr(p, name)) != NULL && (size_t)(p - ptx) < size; p += nlen) {
        if (p == ptx || p[-1] != ' ') continue;
        if (p[nlen] == ';') {
            *value = 0;
            return 1;
        }
        if (strncmp(p + nlen, " = ", 3) != 0) continue;
        char *end;
        *value = strtoull(p + nlen + 3, &end, 10);
        return end != p + nlen + 3 && *end == ';';
    }
    return 0;
}

/* The accumulator's size and alignment and the result's kind, from the image's constants. */
static int read_constants(gr_operator_image *img) {
    static const char *const names[] = {"gr_op_acc_size", "gr_op_acc_align", "gr_op_result_kind"};
    uint64_t v[3];
    for (int k = 0; k < 3; k++) {
        int found = img->ptx ? ptx_u64(img->image, img->size, names[k], &v[k])
                             : elf_u64(img->image, img->size, names[k], &v[k]);
        if (!found) return 0;
    }
    if (v[0] == 0 || v[1] == 0 || v[2] > GR_SCALAR_BOOL) return 0;
    img->acc_size = (size_t)v[0];
    img->acc_align = (size_t)v[1];
    img->result_kind = (int)v[2];
    return 1;
}

/* What the host believes of an operator's image. A dtype accumulator's size and alignment are its
 * dtype's, and without post the result's kind follows the dtype (as gr_op_kind_of says on the device):
 * derived here, the image must agree. A struct's layout and post's kind are the image's own -- no field
 * can reach the constants that say them (user_text.h: no directive, no gr_ name, no asm) -- and must be
 * sane: a whole number of 32-bit words within GR_ACC_MAX, aligned to a power of two that divides it. An
 * image that says otherwise is not this operator's (a damaged or forged cache file): refused. */
gr_status gr_operator_check_image(gr_context *ctx, const gr_operator *op, const gr_operator_image *img,
                                  const char *what) {
    size_t size = img->acc_size, align = img->acc_align;
    if (op->acc_dtype >= 0) {
        gr_dtype t = (gr_dtype)op->acc_dtype;
        size_t want = gr_dtype_size(t);
        int kind = gr_dtype_is_float(t) ? GR_SCALAR_FLOAT : gr_dtype_is_signed(t) ? GR_SCALAR_INT : GR_SCALAR_UINT;
        if (size == want && align == want && (op->spec.post || img->result_kind == kind)) return GR_OK;
        return gr_fail(ctx, GR_ECUDA, "%s: the image's accumulator has %zu bytes aligned to %zu%s, where %s has "
                       "%zu: the image is not this operator's (a forged file in the kernel cache?)", what, size, align,
                       op->spec.post || img->result_kind == kind ? "" : " and another result kind",
                       gr_dtype_name(t), want);
    }
    if (size > GR_ACC_MAX)
        return gr_fail_arg(ctx, GR_EINVAL, "acc", "operator %s: an accumulator of %zu bytes is over the %d a "
                           "reduction keeps", op->spec.name, size, GR_ACC_MAX);
    if (size < 4 || size % 4 || align == 0 || (align & (align - 1)) || size % align)
        return gr_fail(ctx, GR_ECUDA, "%s: the image's accumulator struct has %zu bytes aligned to %zu, which no "
                       "struct that compiled can have: the image is not this operator's (a forged file in the kernel "
                       "cache?)", what, size, align);
    return GR_OK;
}

/* ---- the caches ------------------------------------------------------------------------------------- */

struct gr_operator_cache {
    gr_kcache_mem *images;          /* key -> gr_operator_image */
    gr_kcache_mem *memo;            /* gr_operator_cache_memo's: any key -> an image of `images` */
    uint64_t headers;               /* a digest of the embedded headers, part of every key */
    gr_operator_compile_info last;
    char *log;                      /* NVRTC's log of the last compile it ran */
};

static void image_destroy(void *value) {
    gr_operator_image *img = value;
    if (!img) return;
    for (gr_operator_image *c = img->elsewhere, *next; c; c = next) {
        next = c->elsewhere;
        gr_dev_use(c->device);              /* a module is unloaded from its own device's context */
        gr_dev_module_unload(c->kernels.module);
        free(c);
    }
    if (img->elsewhere) gr_dev_use(img->device);
    if (img->kernels.module) gr_dev_module_unload(img->kernels.module);
    free(img->image);
    free(img);
}

gr_status gr_operator_cache_create(gr_context *ctx, gr_operator_cache **out) {
    *out = NULL;
    gr_operator_cache *c = calloc(1, sizeof *c);
    if (!c || gr_kcache_mem_create(image_destroy, &c->images) != GR_OK) {
        free(c);
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    }
    if (gr_kcache_mem_create(NULL, &c->memo) != GR_OK) {
        gr_kcache_mem_destroy(c->images);
        free(c);
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    }
    /* a digest of the headers' names and texts: a new version of a header is a new key */
    uint64_t h = 0;
    for (int k = 0; k < gr_nvrtc_header_count; k++) {
        h = gr_digest_of(gr_nvrtc_header_names[k], strlen(gr_nvrtc_header_names[k]), h).a;
        h = gr_digest_of(gr_nvrtc_header_texts[k], strlen(gr_nvrtc_header_texts[k]), h).a;
    }
    c->headers = h;
    *out = c;
    return GR_OK;
}

void gr_operator_cache_destroy(gr_operator_cache *c) {
    if (!c) return;
    gr_kcache_mem_destroy(c->memo);
    gr_kcache_mem_destroy(c->images);
    free(c->log);
    free(c);
}

gr_kcache_mem *gr_operator_cache_memo(gr_operator_cache *c) { return c->memo; }

const char *gr_operator_cache_log(const gr_operator_cache *c) { return c && c->log ? c->log : ""; }
const char *gr_operator_cache_warning(void) { return gr_kcache_take_warning(); }

void gr_operator_last_compile_info(const gr_operator_cache *c, gr_operator_compile_info *out) {
    *out = c ? c->last : (gr_operator_compile_info){0};
}

void gr_operator_compile_info_of(const gr_operator *op, gr_operator_compile_info *out) { *out = op->last; }

const char *gr_operator_origin_name(gr_operator_origin o) {
    switch (o) {
    case GR_ORIGIN_MEMORY: return "memory";
    case GR_ORIGIN_DISK: return "disk";
    case GR_ORIGIN_NVRTC: return "nvrtc";
    default: return "none";
    }
}

/* What an image depends on besides its source: NVRTC's version, the architecture, the options
 * gr_nvrtc_compile passes, the embedded headers and this file's format. */
static char *make_key(const char *source, int major, int minor, int arch, uint64_t headers, size_t *len) {
    char tail[160];
    int n = snprintf(tail, sizeof tail, "\n// key: NVRTC %d.%d, sm_%d, -std=c++17, headers %016llx, format %d\n",
                     major, minor, arch, (unsigned long long)headers, GR_OP_FORMAT);
    size_t slen = strlen(source);
    char *key = malloc(slen + (size_t)n + 1);
    if (!key) return NULL;
    memcpy(key, source, slen);
    memcpy(key + slen, tail, (size_t)n + 1);
    *len = slen + (size_t)n;
    return key;
}

/* On disk an image is a 16-byte header (the magic, the format, whether it is PTX, its architecture)
 * and the image; the kernel cache checks the file's integrity and key. */
static const char payload_magic[4] = {'G', 'R', 'O', 'P'};

static gr_operator_image *image_from_payload(const unsigned char *p, size_t len, gr_dtype in) {
    if (len <= 16 || memcmp(p, payload_magic, 4) != 0 || le(p + 4, 4) != GR_OP_FORMAT || le(p + 8, 4) > 1 ||
        (le(p + 8, 4) == 1 && p[len - 1] != '\0'))    /* PTX is text with its NUL */
        return NULL;
    gr_operator_image *img = calloc(1, sizeof *img);
    if (!img || !(img->image = malloc(len - 16))) {
        free(img);
        return NULL;
    }
    memcpy(img->image, p + 16, len - 16);
    img->size = len - 16;
    img->ptx = (int)le(p + 8, 4);
    img->arch = (int)le(p + 12, 4);
    img->in = in;
    img->variant = img->op = -1;
    if (!read_constants(img)) {
        image_destroy(img);
        return NULL;
    }
    return img;
}

static void store_on_disk(const char *key, size_t keylen, const gr_operator_image *img) {
    unsigned char *p = malloc(16 + img->size);
    if (!p) return;    /* the disk cache is a convenience: no memory, no copy on disk */
    memcpy(p, payload_magic, 4);
    const uint32_t words[3] = {GR_OP_FORMAT, (uint32_t)img->ptx, (uint32_t)img->arch};
    for (int w = 0; w < 3; w++)
        for (int b = 0; b < 4; b++) p[4 + 4 * w + b] = (unsigned char)(words[w] >> (8 * b));
    memcpy(p + 16, img->image, img->size);
    gr_kcache_store(key, keylen, p, 16 + img->size);
    free(p);
}

/* ---- compiling ----------------------------------------------------------------------------------------- */

static gr_status compile_new(gr_context *ctx, gr_operator_cache *c, const char *what, gr_dtype in,
                             const char *source, int arch, gr_operator_image **out) {
    *out = NULL;
    gr_nvrtc_output o;
    gr_status st = gr_nvrtc_compile(ctx, source, "generated", arch, &o);
    free(c->log);
    c->log = o.log;     /* kept, failed or not: its lines about the generated source */
    o.log = NULL;
    c->log = gr_compile_log_own(c->log);
    if (st != GR_OK) {
        /* a compile error is the field's; another failure is said of what was compiled (an architecture
         * NVRTC does not know is the caller's, as it is) */
        if (st == GR_EINVAL && c->log && strcmp(gr_errarg(ctx), "arch") != 0) {
            if (!gr_compile_error(ctx, what, source, c->log))    /* its lines left out: not quoted either */
                gr_fail(ctx, GR_EINVAL, "%s does not compile, and NVRTC's log has no error about it (%s)", what,
                        *c->log ? "the log follows" : "the log is empty");
        } else if (strcmp(gr_errarg(ctx), "arch") != 0) {
            char said[GR_ERR_BYTES];
            snprintf(said, sizeof said, "%s", gr_errmsg(ctx));
            gr_fail(ctx, st, "%s: %s", what, said);
        }
        gr_nvrtc_output_free(&o);
        return st;
    }
    gr_operator_image *img = calloc(1, sizeof *img);
    if (!img) {
        gr_nvrtc_output_free(&o);
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    }
    *img = (gr_operator_image){.image = o.image, .size = o.size, .ptx = o.ptx, .arch = o.arch, .in = in,
                               .nvrtc_ms = o.compile_ms, .variant = -1, .op = -1};
    o.image = NULL;
    gr_nvrtc_output_free(&o);
    if (!read_constants(img)) {
        image_destroy(img);
        return gr_fail(ctx, GR_ECUDA, "the image NVRTC made of %s has no readable gr_op_acc_size, "
                       "gr_op_acc_align or gr_op_result_kind", what);
    }
    *out = img;
    return GR_OK;
}

gr_status gr_image_compile(gr_context *ctx, gr_operator_cache *cache, const char *source, gr_dtype in, int arch,
                           const char *what, gr_operator_image **out, gr_operator_compile_info *info) {
    *out = NULL;
    double t0 = gr_now_ms();
    if (!cache) return gr_fail_arg(ctx, GR_EINVAL, "cache", "is NULL");
    int major, minor;
    if (gr_nvrtc_version(&major, &minor) != 0) {
        char why[1024];
        gr_nvrtc_available(why, sizeof why);
        return gr_fail(ctx, GR_ENODEV, "%s needs NVRTC: %s", what, why);
    }
    size_t keylen;
    char *key = make_key(source, major, minor, arch, cache->headers, &keylen);
    if (!key) return gr_fail(ctx, GR_ENOMEM, "out of host memory");

    gr_status st = GR_OK;
    gr_operator_origin origin = GR_ORIGIN_MEMORY;
    gr_operator_image *img = gr_kcache_mem_find(cache->images, key, keylen);
    if (!img) {
        void *payload = NULL;
        size_t len = 0;
        if (gr_kcache_load(key, keylen, &payload, &len) == GR_OK && payload)
            img = image_from_payload(payload, len, in);
        free(payload);
        origin = GR_ORIGIN_DISK;
        if (!img) {
            origin = GR_ORIGIN_NVRTC;
            st = compile_new(ctx, cache, what, in, source, arch, &img);
            if (st == GR_OK) store_on_disk(key, keylen, img);
        }
        if (st == GR_OK && gr_kcache_mem_insert(cache->images, key, keylen, img) != GR_OK) {
            image_destroy(img);
            st = gr_fail(ctx, GR_ENOMEM, "out of host memory");
        }
    }
    free(key);
    if (st != GR_OK) return st;

    *info = (gr_operator_compile_info){origin, in, img->arch, img->ptx, img->size,
                                       origin == GR_ORIGIN_NVRTC ? img->nvrtc_ms : 0, gr_now_ms() - t0,
                                       img->acc_size, img->acc_align, img->result_kind};
    cache->last = *info;
    *out = img;
    return GR_OK;
}

/* The image of the whole-buffer kernels, or with segments set of those and gr_op_segments. */
static gr_status compile_part(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in, int arch,
                              int segments, gr_operator_image **out) {
    *out = NULL;
    char *source;
    gr_status st = gr_operator_source_part(ctx, op, in, segments, &source);
    if (st != GR_OK) return st;
    char what[128];
    snprintf(what, sizeof what, "operator %s over %s elements", op->spec.name, gr_dtype_name(in));
    st = gr_image_compile(ctx, cache, source, in, arch, what, out, &op->last);
    free(source);
    if (st == GR_OK) st = gr_operator_check_image(ctx, op, *out, what);
    return st;
}

gr_status gr_operator_compile(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in, int arch,
                              gr_operator_image **out) {
    return compile_part(ctx, cache, op, in, arch, 0, out);
}

/* ---- on the device --------------------------------------------------------------------------------------- */

gr_status gr_operator_load(gr_context *ctx, gr_operator_image *img, const gr_operator_kernels **out) {
    *out = NULL;
    gr_operator_kernels *k = &img->kernels;
    if (k->module) {
        *out = k;
        return GR_OK;
    }
    if (gr_context_backend(ctx) != GR_BACKEND_CUDA)
        return gr_fail(ctx, GR_ENODEV, "an operator's kernels run on the cuda backend only (backend is cpu)");
    char log[1024], what[1200];
    /* a module loads into the current device's context: make it ctx's, which the image then names (the
     * last reduction may have left another device current) */
    ctx = gr_ctx_enter(ctx);
    img->device = ctx->device;
    int e = gr_dev_module_load(img->image, &k->module, log, sizeof log);
    if (e) {
        snprintf(what, sizeof what, "loading an operator's %s%s%s", img->ptx ? "PTX" : "CUBIN", *log ? ": " : "", log);
        return gr_fail_dev(ctx, e, what);
    }
    /* gr_op_segments only where the source has it (asked for by gr_operator_prepare_segments) */
    struct { const char *name; void **fn; } wanted[] = {{GR_OP_KERNEL_MAIN, &k->main},
        {GR_OP_KERNEL_PARTIALS, &k->partials}, {GR_OP_KERNEL_POST, &k->post}, {GR_OP_KERNEL_CHECK, &k->check},
        {GR_OP_KERNEL_SEGMENTS, &k->segments}};
    size_t count = sizeof wanted / sizeof wanted[0] - (img->has_segments ? 0 : 1);
    for (size_t w = 0; w < count; w++) {
        e = gr_dev_module_function(k->module, wanted[w].name, wanted[w].fn);
        if (e) {
            gr_dev_module_unload(k->module);
            *k = (gr_operator_kernels){0};
            snprintf(what, sizeof what, "an operator's kernel %s", wanted[w].name);
            return gr_fail_dev(ctx, e, what);
        }
    }
    *out = k;
    return GR_OK;
}

gr_status gr_operator_image_on(gr_context *ctx, const gr_operator_image *img, const gr_operator_image **out) {
    *out = img;
    if (!img->kernels.module || img->device == ctx->device) return GR_OK;
    gr_operator_image *own = (gr_operator_image *)img, **at = &own->elsewhere;
    for (; *at; at = &(*at)->elsewhere)
        if ((*at)->device == ctx->device) {
            *out = *at;
            return GR_OK;
        }
    gr_operator_image *c = malloc(sizeof *c);
    if (!c) return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    *c = *img;                          /* the same bytes and facts; its own module */
    c->kernels = (gr_operator_kernels){0};
    c->elsewhere = NULL;
    const gr_operator_kernels *k;
    gr_status st = gr_operator_load(ctx, c, &k);
    if (st != GR_OK) {
        free(c);
        return st;
    }
    *at = c;
    *out = c;
    return GR_OK;
}

static gr_status prepare_part(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in, int segments,
                              const gr_operator_image **out) {
    *out = NULL;
    ctx = gr_ctx_enter(ctx);    /* the operator's modules live on the context's own device */
    if ((unsigned)in >= GR_DTYPE_COUNT) return gr_fail_arg(ctx, GR_EINVAL, "dtype", "unknown dtype");
    if (op->ready_in == cache && op->ready[segments][in]) {
        *out = op->ready[segments][in];
        return GR_OK;
    }
    gr_device_info info;
    gr_status st = gr_device_info_get(ctx, &info);
    if (st != GR_OK) return st;
    gr_operator_image *img;
    if ((st = compile_part(ctx, cache, op, in, info.cc_major * 10 + info.cc_minor, segments, &img)) != GR_OK) return st;
    img->has_segments = segments;       /* the images of the two parts have different sources */
    const gr_operator_kernels *k;
    if ((st = gr_operator_load(ctx, img, &k)) != GR_OK) return st;
    img->has_post = op->spec.post != NULL;
    img->acc_dtype = op->acc_dtype;
    if (op->ready_in != cache) {            /* another context's cache: its images are not ours */
        memset(op->ready, 0, sizeof op->ready);
        op->ready_in = cache;
    }
    op->ready[segments][in] = img;
    *out = img;
    return GR_OK;
}

gr_status gr_operator_prepare(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in,
                              const gr_operator_image **out) {
    return prepare_part(ctx, cache, op, in, 0, out);
}

gr_status gr_operator_prepare_segments(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in,
                                       const gr_operator_image **out) {
    return prepare_part(ctx, cache, op, in, 1, out);
}

static void format_scalar(char *buf, size_t len, gr_scalar v) {
    if (v.kind == GR_SCALAR_FLOAT) snprintf(buf, len, "%.9g", v.v.f);
    else if (v.kind == GR_SCALAR_UINT) snprintf(buf, len, "%llu", (unsigned long long)v.v.u);
    else snprintf(buf, len, "%lld", (long long)v.v.i);
}

gr_status gr_operator_check(gr_context *ctx, gr_operator_cache *cache, gr_operator *op, gr_dtype in) {
    ctx = gr_ctx_enter(ctx);
    gr_device_info info;
    gr_status st = gr_device_info_get(ctx, &info);
    if (st != GR_OK) return st;
    gr_operator_image *img;
    const gr_operator_kernels *k;
    gr_operator_compile_info op_last = op->last, cache_last = cache ? cache->last : op_last;
    if ((st = gr_operator_compile(ctx, cache, op, in, info.cc_major * 10 + info.cc_minor, &img)) != GR_OK)
        return st;
    if (op->last.origin == GR_ORIGIN_MEMORY && op_last.origin != GR_ORIGIN_NONE) {
        /* the image the caller compiled just before: its compile stays the last one worth telling */
        op->last = op_last;
        cache->last = cache_last;
    }
    if ((st = gr_operator_load(ctx, img, &k)) != GR_OK) return st;
    gr_buffer *flags;
    if ((st = gr_buffer_new(ctx, 8, GR_UINT32, GR_DEVICE, &flags)) != GR_OK) return st;
    void *p = gr_buffer_data(flags);
    void *args[] = {&p};
    unsigned got[8] = {0};
    int e = gr_dev_launch(k->check, 1, 32, 0, ctx->stream, args);
    if (e) st = gr_fail_dev(ctx, e, "the operator's identity check");
    else st = gr_buffer_read(ctx, flags, 0, got, 8);
    gr_buffer_free(ctx, flags);
    if (st != GR_OK) return st;

    gr_scalar values[8];
    int count = gr_operator_check_values(in, values);
    for (int v = 0; v < count; v++) {
        if (!got[v]) continue;
        char x[48];
        format_scalar(x, sizeof x, values[v]);
        return gr_fail_arg(ctx, GR_EINVAL, "identity", "%s is not neutral for reduce: %s differs from map(x) "
                           "byte for byte for the %s element x = %s", op->spec.identity,
                           got[v] & 1 ? "reduce(identity, map(x))" : "reduce(map(x), identity)",
                           gr_dtype_name(in), x);
    }
    return GR_OK;
}
