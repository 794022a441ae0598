/*
 * nvrtc.c -- NVRTC reached through dlopen (nvrtc.h says where it looks), and the one thing the engine
 * asks of it: a source and the embedded headers compiled to a CUBIN, or to PTX.
 *
 * NVRTC's types are declared here rather than taken from its nvrtc.h, so that a CPU-only build needs no
 * toolkit headers: a program is an opaque pointer, a result an int (its enum), and the few result
 * values tested are NVRTC's documented ones. The library is opened once per process and never closed;
 * the reason it could not be opened is a fact of the process, so it is kept here, not in a context.
 */
#include "jit/nvrtc.h"
#include "jit/bounded.h"
#include "base/clock.h"
#include "base/env.h"
#include "base/error.h"
#include "base/library.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct gr_nvrtc_program_ *gr_nvrtc_prog;      /* nvrtcProgram */
enum { NVRTC_OK = 0, NVRTC_OUT_OF_MEMORY = 1, NVRTC_INVALID_OPTION = 5, NVRTC_COMPILATION = 6 };

/* The entry points, as X(return type, name, parameters). A library without one of the first list is
 * not used; the second list (NVRTC 11.2 and later) only sharpens the fallback to PTX. */
#define GR_NVRTC_REQUIRED(X)                                                                        \
    X(int, nvrtcVersion, (int *major, int *minor))                                                  \
    X(const char *, nvrtcGetErrorString, (int result))                                              \
    X(int, nvrtcCreateProgram, (gr_nvrtc_prog *prog, const char *src, const char *name, int count,  \
                                const char *const *headers, const char *const *include_names))      \
    X(int, nvrtcDestroyProgram, (gr_nvrtc_prog *prog))                                              \
    X(int, nvrtcCompileProgram, (gr_nvrtc_prog prog, int count, const char *const *options))        \
    X(int, nvrtcGetProgramLogSize, (gr_nvrtc_prog prog, size_t *size))                              \
    X(int, nvrtcGetProgramLog, (gr_nvrtc_prog prog, char *log))                                     \
    X(int, nvrtcGetCUBINSize, (gr_nvrtc_prog prog, size_t *size))                                   \
    X(int, nvrtcGetCUBIN, (gr_nvrtc_prog prog, char *cubin))                                        \
    X(int, nvrtcGetPTXSize, (gr_nvrtc_prog prog, size_t *size))                                     \
    X(int, nvrtcGetPTX, (gr_nvrtc_prog prog, char *ptx))
#define GR_NVRTC_OPTIONAL(X)                                                                        \
    X(int, nvrtcGetNumSupportedArchs, (int *count))                                                 \
    X(int, nvrtcGetSupportedArchs, (int *archs))

static struct {
#define GR_NVRTC_FIELD_(ret, fn, params) ret(*fn) params;
    GR_NVRTC_REQUIRED(GR_NVRTC_FIELD_)
    GR_NVRTC_OPTIONAL(GR_NVRTC_FIELD_)
#undef GR_NVRTC_FIELD_
    int loaded;
    char why[1024];         /* what was tried and how each failed, when nothing loaded */
    int tries;
} nv;

static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

/* One failed attempt, added to the sentence nv_load began nv.why with. */
static void why_add(const char *fmt, ...) {
    size_t used = strlen(nv.why);
    if (used + 3 >= sizeof nv.why) return;
    used += (size_t)snprintf(nv.why + used, sizeof nv.why - used, nv.tries++ ? "; " : ": ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(nv.why + used, sizeof nv.why - used, fmt, ap);
    va_end(ap);
}

/* Takes every entry point from one candidate; on failure says why in nv.why and closes it again. */
static int nv_open(const char *path) {
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        why_add("%s", dlerror());
        return 0;
    }
    /* dlsym's object pointer to a function pointer: what POSIX requires dlsym to allow */
#define GR_NVRTC_TAKE_(ret, fn, params)                      \
    nv.fn = (ret(*) params)dlsym(lib, #fn);                  \
    if (!nv.fn) {                                            \
        why_add("%s has no %s", path, #fn);                  \
        dlclose(lib);                                        \
        return 0;                                            \
    }
    GR_NVRTC_REQUIRED(GR_NVRTC_TAKE_)
#undef GR_NVRTC_TAKE_
#define GR_NVRTC_MAYBE_(ret, fn, params) nv.fn = (ret(*) params)dlsym(lib, #fn);
    GR_NVRTC_OPTIONAL(GR_NVRTC_MAYBE_)
#undef GR_NVRTC_MAYBE_
    return 1;
}

static void nv_load(void) {
    static const char *const candidates[] = {
#ifdef GR_NVRTC_DEFAULT
        GR_NVRTC_DEFAULT,   /* the toolkit the module was built against */
#endif
        "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so",
    };
    nv.loaded = gr_library_search("NVRTC", "GPUREDUCE_NVRTC", "set GPUREDUCE_NVRTC to the path of libnvrtc.so",
                                  candidates, sizeof candidates / sizeof candidates[0], nv_open, nv.why, sizeof nv.why);
}

int gr_nvrtc_available(char *why, size_t whylen) {
    pthread_once(&nv_once, nv_load);
    if (why && whylen) snprintf(why, whylen, "%s", nv.loaded ? "" : nv.why);
    return nv.loaded;
}

int gr_nvrtc_version(int *major, int *minor) {
    *major = *minor = 0;
    if (!gr_nvrtc_available(NULL, 0)) return -1;
    return nv.nvrtcVersion(major, minor) == NVRTC_OK ? 0 : -1;
}

void gr_nvrtc_output_free(gr_nvrtc_output *out) {
    if (!out) return;
    free(out->image);
    free(out->log);
    memset(out, 0, sizeof *out);
}

static int compile_for(gr_nvrtc_prog prog, const char *kind, int arch) {
    char target[48];
    snprintf(target, sizeof target, "--gpu-architecture=%s_%d", kind, arch);
    const char *const options[] = {"-std=c++17", target};
    return nv.nvrtcCompileProgram(prog, 2, options);
}

/* The newest architecture NVRTC knows at or below arch, for PTX the driver can finish on a newer GPU;
 * arch itself when this NVRTC cannot list them; 0 when it knows none that old. Its range in range. */
static int newest_known(int arch, char *range, size_t rangelen) {
    int count = 0;
    *range = '\0';
    if (!nv.nvrtcGetNumSupportedArchs || !nv.nvrtcGetSupportedArchs ||
        nv.nvrtcGetNumSupportedArchs(&count) != NVRTC_OK || count <= 0)
        return arch;
    int *archs = malloc((size_t)count * sizeof *archs);
    if (!archs || nv.nvrtcGetSupportedArchs(archs) != NVRTC_OK) {
        free(archs);
        return arch;
    }
    int best = 0, lo = archs[0], hi = archs[0];
    for (int i = 0; i < count; i++) {
        if (archs[i] <= arch && archs[i] > best) best = archs[i];
        if (archs[i] < lo) lo = archs[i];
        if (archs[i] > hi) hi = archs[i];
    }
    free(archs);
    snprintf(range, rangelen, "; it knows sm_%d to sm_%d", lo, hi);
    return best;
}

/* NVRTC's log, whole; "" when it said nothing; NULL only when memory ran out. */
static char *take_log(gr_nvrtc_prog prog, size_t *len) {
    *len = 0;
    if (nv.nvrtcGetProgramLogSize(prog, len) != NVRTC_OK) *len = 0;
    char *log = malloc(*len + 1);
    if (!log) return NULL;
    if (*len == 0 || nv.nvrtcGetProgramLog(prog, log) != NVRTC_OK) *len = 0;
    log[*len] = '\0';
    *len = strlen(log);     /* the size NVRTC gives counts its NUL */
    return log;
}

/* The log's first line that reports an error ("name(3): error: ..."), for the context's message. */
static const char *first_error(const char *log, int *len) {
    const char *e = log ? strstr(log, ": error") : NULL;
    if (!e) {
        *len = 0;
        return "";
    }
    while (e > log && e[-1] != '\n') e--;
    const char *end = strchr(e, '\n');
    *len = end ? (int)(end - e) : (int)strlen(e);
    return e;
}

/* ---- one compile, without a context: what the child of a bounded compile runs ---------------------- */

/* What NVRTC said, in numbers and bytes, for compiled() to judge in the caller's context. */
typedef struct raw {
    int32_t created;        /* nvrtcCreateProgram's result */
    int32_t compiled;       /* nvrtcCompileProgram's, of the last try */
    int32_t taken;          /* getting the image: NVRTC's result, or -1 for no memory */
    int32_t ptx, arch, no_log;
    double compile_ms;
    char range[64];         /* the architectures it knows, for the message */
    char *log;
    size_t loglen;
    void *image;
    size_t size;
} raw;

typedef struct request {
    const char *source, *name;
    int arch;
} request;

static void take_image(gr_nvrtc_prog prog, raw *r) {
    size_t size = 0;
    r->taken = r->ptx ? nv.nvrtcGetPTXSize(prog, &size) : nv.nvrtcGetCUBINSize(prog, &size);
    if (r->taken != NVRTC_OK) return;
    if (size == 0 || !(r->image = malloc(size))) {
        r->taken = size ? -1 : NVRTC_OUT_OF_MEMORY;
        return;
    }
    r->taken = r->ptx ? nv.nvrtcGetPTX(prog, r->image) : nv.nvrtcGetCUBIN(prog, r->image);
    if (r->taken != NVRTC_OK) {
        free(r->image);
        r->image = NULL;
        return;
    }
    r->size = size;
}

static void compile_raw(const request *q, raw *r) {
    memset(r, 0, sizeof *r);
    r->arch = q->arch;
    gr_nvrtc_prog prog = NULL;
    r->created = nv.nvrtcCreateProgram(&prog, q->source, q->name, gr_nvrtc_header_count, gr_nvrtc_header_texts,
                                       gr_nvrtc_header_names);
    if (r->created != NVRTC_OK) return;
    double t0 = gr_now_ms();
    r->compiled = compile_for(prog, "sm", q->arch);
    if (r->compiled == NVRTC_INVALID_OPTION) {
        /* an sm_ this NVRTC does not know: PTX for an older one, which the driver compiles for the GPU */
        int older = newest_known(q->arch, r->range, sizeof r->range);
        if (older) {
            r->ptx = 1;
            r->arch = older;
            r->compiled = compile_for(prog, "compute", older);
        }
    }
    r->compile_ms = gr_now_ms() - t0;
    r->log = take_log(prog, &r->loglen);
    r->no_log = r->log == NULL;
    if (r->compiled == NVRTC_OK && r->log) take_image(prog, r);
    nv.nvrtcDestroyProgram(&prog);
}

/* ---- a compile in a child process, with a time limit ------------------------------------------------- */

/* The fixed part of a raw, then its log and image, as the child hands them back. */
enum { RAW_HEAD = 6 * 4 + 8 + 64 + 2 * 8 };

static void put_le(unsigned char *p, uint64_t v, int bytes) {
    for (int b = 0; b < bytes; b++) p[b] = (unsigned char)(v >> (8 * b));
}

static uint64_t get_le(const unsigned char *p, int bytes) {
    uint64_t v = 0;
    for (int b = bytes - 1; b >= 0; b--) v = v << 8 | p[b];
    return v;
}

static void child_compile(void *arg, unsigned char **bytes, size_t *len) {
    raw r;
    compile_raw(arg, &r);
    unsigned char *p = malloc(RAW_HEAD + r.loglen + r.size);
    if (p) {
        int32_t ints[6] = {r.created, r.compiled, r.taken, r.ptx, r.arch, r.no_log};
        for (int k = 0; k < 6; k++) put_le(p + 4 * k, (uint32_t)ints[k], 4);
        memcpy(p + 24, &r.compile_ms, 8);
        memcpy(p + 32, r.range, 64);
        put_le(p + 96, r.loglen, 8);
        put_le(p + 104, r.size, 8);
        if (r.loglen) memcpy(p + RAW_HEAD, r.log, r.loglen);
        if (r.size) memcpy(p + RAW_HEAD + r.loglen, r.image, r.size);
        *bytes = p;
        *len = RAW_HEAD + r.loglen + r.size;
    }
    /* the process ends now: nothing to free */
}

/* The child's bytes back into a raw; 0 when they do not add up. */
static int raw_from(const unsigned char *p, size_t len, raw *r) {
    memset(r, 0, sizeof *r);
    if (len < RAW_HEAD) return 0;
    int32_t ints[6];
    for (int k = 0; k < 6; k++) ints[k] = (int32_t)(uint32_t)get_le(p + 4 * k, 4);
    r->created = ints[0], r->compiled = ints[1], r->taken = ints[2], r->ptx = ints[3], r->arch = ints[4];
    r->no_log = ints[5];
    memcpy(&r->compile_ms, p + 24, 8);
    memcpy(r->range, p + 32, 64);
    r->range[63] = '\0';
    uint64_t loglen = get_le(p + 96, 8), size = get_le(p + 104, 8);
    if (loglen > len - RAW_HEAD || size != len - RAW_HEAD - loglen) return 0;
    r->loglen = (size_t)loglen;
    r->size = (size_t)size;
    r->log = r->no_log ? NULL : malloc(r->loglen + 1);
    r->image = r->size ? malloc(r->size) : NULL;
    if ((!r->no_log && !r->log) || (r->size && !r->image)) {
        free(r->log);
        free(r->image);
        r->log = r->image = NULL;
        return -1;
    }
    if (r->log) {
        memcpy(r->log, p + RAW_HEAD, r->loglen);
        r->log[r->loglen] = '\0';
    }
    if (r->size) memcpy(r->image, p + RAW_HEAD + r->loglen, r->size);
    return 1;
}

/* The most a child may hand back: the log and the image of a compile (a CUBIN is a few MB). */
#define CHILD_MOST ((size_t)1 << 30)
/* The memory a compile may add to the process's: every operator and kernel of the specs compiles in
 * 256 MiB; a template that instantiates itself 2^40 times took 2.6 GB in 10 s. */
#define CHILD_MEMORY ((size_t)2 << 30)

/* A compile in a child that may take `seconds`; GR_OK with *r filled in, or the failure said. */
static gr_status compile_bounded(gr_context *ctx, const request *q, unsigned seconds, raw *r) {
    gr_bounded_result b;
    gr_bounded_run(child_compile, (void *)q, seconds, CHILD_MEMORY, CHILD_MOST, &b);
    switch (b.end) {
    case GR_BOUNDED_DONE: {
        int got = raw_from(b.bytes, b.len, r);
        free(b.bytes);
        if (got < 0) return gr_fail(ctx, GR_ENOMEM, "no memory for NVRTC's output");
        if (got == 0) return gr_fail(ctx, GR_ECUDA, "the compiler process handed back its output in pieces");
        return GR_OK;
    }
    case GR_BOUNDED_TIMEOUT:
        return gr_fail(ctx, GR_EINVAL, "the compile took longer than the %u s limit and was stopped "
                       "(GPUREDUCE_COMPILE_TIMEOUT sets the limit; expressions full of calls of math functions "
                       "take long)", seconds);
    case GR_BOUNDED_DIED:
        if (b.signal)
            return gr_fail(ctx, GR_ECUDA, "the compiler process ended by signal %d (%s): NVRTC crashed, or the "
                           "system ran out of memory", b.signal, strsignal(b.signal));
        return gr_fail(ctx, GR_ECUDA, "the compiler process ended (exit status %d) before handing back its output",
                       b.status);
    case GR_BOUNDED_TOO_LARGE:
        return gr_fail(ctx, GR_ECUDA, "NVRTC's output is over %zu bytes", CHILD_MOST);
    case GR_BOUNDED_NO_START:
        break;
    }
    return gr_fail(ctx, b.err == ENOMEM || b.err == EAGAIN ? GR_ENOMEM : GR_ECUDA, "no process for the compile "
                   "(%s); GPUREDUCE_COMPILE_TIMEOUT=0 compiles in this process, without a time limit",
                   strerror(b.err));
}

/* ---- the compile, judged ------------------------------------------------------------------------------ */

/* The message of a failed raw compile, or GR_OK with the image and log moved into out. */
static gr_status judge(gr_context *ctx, const request *q, raw *r, gr_nvrtc_output *out) {
    int major = 0, minor = 0;
    nv.nvrtcVersion(&major, &minor);
    out->ptx = r->ptx;
    out->arch = r->arch;
    out->compile_ms = r->compile_ms;
    out->log = r->log;
    r->log = NULL;
    if (r->created != NVRTC_OK)
        return gr_fail(ctx, r->created == NVRTC_OUT_OF_MEMORY ? GR_ENOMEM : GR_ECUDA,
                       "NVRTC %d.%d could not take %s: %s", major, minor, q->name, nv.nvrtcGetErrorString(r->created));
    int len;
    const char *first = first_error(out->log, &len);
    /* what stands for the first error when the log has none: the log ran out with memory, say */
    char none[96];
    snprintf(none, sizeof none, "%s", !out->log ? "no memory for NVRTC's log" : !*out->log ? "NVRTC's log is empty"
                                                                         : "NVRTC's log has no error line");
    if (!len) first = none, len = (int)strlen(none);
    if (r->compiled == NVRTC_OK && !out->log) return gr_fail(ctx, GR_ENOMEM, "no memory for NVRTC's log");
    if (r->compiled == NVRTC_OK && r->taken == -1)
        return gr_fail(ctx, GR_ENOMEM, "no memory for the image NVRTC made of %s", q->name);
    if (r->compiled == NVRTC_OK && r->taken != NVRTC_OK)
        return gr_fail(ctx, r->taken == NVRTC_OUT_OF_MEMORY ? GR_ENOMEM : GR_ECUDA, "NVRTC compiled %s but gave no "
                       "%s: %s", q->name, r->ptx ? "PTX" : "CUBIN", nv.nvrtcGetErrorString(r->taken));
    if (r->compiled == NVRTC_OK) {
        out->image = r->image;
        out->size = r->size;
        r->image = NULL;
        return GR_OK;
    }
    if (r->compiled == NVRTC_COMPILATION)
        return gr_fail(ctx, GR_EINVAL, "%s does not compile for %s_%d (NVRTC %d.%d): %.*s", q->name,
                       r->ptx ? "compute" : "sm", r->arch, major, minor, len, first);
    if (r->compiled == NVRTC_INVALID_OPTION)
        return gr_fail_arg(ctx, GR_EINVAL, "arch", "NVRTC %d.%d does not compile for sm_%d%s", major, minor, q->arch,
                           r->range);
    return gr_fail(ctx, r->compiled == NVRTC_OUT_OF_MEMORY ? GR_ENOMEM : GR_ECUDA, "NVRTC %d.%d failed on %s: %s: %.*s",
                   major, minor, q->name, nv.nvrtcGetErrorString(r->compiled), len, first);
}

/* How long a compile may take unless GPUREDUCE_COMPILE_TIMEOUT says: every operator and kernel of the
 * specs compiles within 2 s on two busy cores (about 0.2 s alone); a field of a few hundred calls of sin
 * took over a minute. */
#define COMPILE_SECONDS 10

gr_status gr_nvrtc_compile(gr_context *ctx, const char *source, const char *name, int arch,
                           gr_nvrtc_output *out) {
    memset(out, 0, sizeof *out);
    char why[sizeof nv.why];
    if (!gr_nvrtc_available(why, sizeof why)) return gr_fail(ctx, GR_ENODEV, "%s", why);
    if (!source) return gr_fail_arg(ctx, GR_EINVAL, "source", "is NULL");
    if (arch < 10 || arch > 9999)
        return gr_fail_arg(ctx, GR_EINVAL, "arch", "%d is not a compute capability as major * 10 + minor "
                           "(90 for 9.0)", arch);
    request q = {source, name && *name ? name : "operator.cu", arch};
    unsigned seconds = (unsigned)gr_env_number_or(GR_ENV_COMPILE_TIMEOUT, COMPILE_SECONDS);
    raw r;
    if (seconds == 0) {
        compile_raw(&q, &r);
    } else {
        gr_status st = compile_bounded(ctx, &q, seconds, &r);
        if (st != GR_OK) return st;
    }
    gr_status st = judge(ctx, &q, &r, out);
    free(r.log);
    free(r.image);
    return st;
}
