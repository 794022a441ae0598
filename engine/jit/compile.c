/*
 * compile.c -- text in, image out: a generated source compiled by NVRTC through the kernel caches, and
 * NVRTC's errors said in the user's terms (compile_log.c); the image's constants read from its bytes.
 *
 * The key of an image is the source, then a line with NVRTC's version, the architecture, the options, a
 * digest of the embedded headers and the payload's format: the headers are included by name, so their
 * text is not in the source, and a new version of them must be a new key. It is looked up in the
 * cache's memory, then on disk, else NVRTC compiles the source and the image goes to both.
 *
 * Nothing here knows CUDA beyond device.h: an image is bytes until core/image.c loads it.
 */
#include "jit/compile.h"
#include "base/clock.h"
#include "base/device.h"
#include "base/error.h"
#include "base/hash.h"
#include "jit/compile_log.h"
#include "jit/kcache.h"
#include "jit/nvrtc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bumped when the generated source's contract changes in a way the source text does not show (the
 * payload's layout); the source itself is in every cache key. */
#define GR_OP_FORMAT 1

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
static int read_constants(gr_image *img) {
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

/* ---- the caches ------------------------------------------------------------------------------------- */

struct gr_operator_cache {
    gr_kcache_mem *images;          /* key -> gr_image */
    gr_kcache_mem *memo;            /* gr_operator_cache_memo's: any key -> an image of `images` */
    uint64_t headers;               /* a digest of the embedded headers, part of every key */
    char *log;                      /* NVRTC's log of the last compile it ran */
};

static void image_destroy(void *value) {
    gr_image *img = value;
    if (!img) return;
    for (gr_image *c = img->elsewhere, *next; c; c = next) {
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

const char *gr_operator_origin_name(gr_operator_origin o) {
    switch (o) {
    case GR_ORIGIN_MEMORY: return "memory";
    case GR_ORIGIN_DISK: return "disk";
    case GR_ORIGIN_NVRTC: return "nvrtc";
    case GR_ORIGIN_NONE: break;
    }
    return "none";
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

static gr_image *image_from_payload(const unsigned char *p, size_t len, gr_dtype in) {
    if (len <= 16 || memcmp(p, payload_magic, 4) != 0 || le(p + 4, 4) != GR_OP_FORMAT || le(p + 8, 4) > 1 ||
        (le(p + 8, 4) == 1 && p[len - 1] != '\0'))    /* PTX is text with its NUL */
        return NULL;
    gr_image *img = calloc(1, sizeof *img);
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

static void store_on_disk(const char *key, size_t keylen, const gr_image *img) {
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
                             const char *source, int arch, gr_image **out) {
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
            char said[512];
            snprintf(said, sizeof said, "%s", gr_errmsg(ctx));
            gr_fail(ctx, st, "%s: %s", what, said);
        }
        gr_nvrtc_output_free(&o);
        return st;
    }
    gr_image *img = calloc(1, sizeof *img);
    if (!img) {
        gr_nvrtc_output_free(&o);
        return gr_fail(ctx, GR_ENOMEM, "out of host memory");
    }
    *img = (gr_image){.image = o.image, .size = o.size, .ptx = o.ptx, .arch = o.arch, .in = in,
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
                           const char *what, gr_image **out, gr_operator_compile_info *info) {
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
    gr_image *img = gr_kcache_mem_find(cache->images, key, keylen);
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

    if (info)
        *info = (gr_operator_compile_info){origin, in, img->arch, img->ptx, img->size,
                                           origin == GR_ORIGIN_NVRTC ? img->nvrtc_ms : 0, gr_now_ms() - t0,
                                           img->acc_size, img->acc_align, img->result_kind};
    *out = img;
    return GR_OK;
}
