/*
 * nvrtc.c -- NVRTC reached through dlopen (nvrtc.h says where it looks), and the one thing the engine
 * asks of it: a source and the embedded headers compiled to a CUBIN, or to PTX.
 *
 * NVRTC's types are declared here rather than taken from its nvrtc.h, so that a CPU-only build needs no
 * toolkit headers: a program is an opaque pointer, a result an int (its enum), and the few result
 * values tested are NVRTC's documented ones. The library is opened once per process and never closed;
 * the reason it could not be opened is a fact of the process, so it is kept here, not in a context.
 */
#include "nvrtc.h"
#include "error.h"
#include "library.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
static char *take_log(gr_nvrtc_prog prog) {
    size_t len = 0;
    if (nv.nvrtcGetProgramLogSize(prog, &len) != NVRTC_OK) len = 0;
    char *log = malloc(len + 1);
    if (!log) return NULL;
    if (len == 0 || nv.nvrtcGetProgramLog(prog, log) != NVRTC_OK) len = 0;
    log[len] = '\0';
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

static gr_status take_image(gr_context *ctx, gr_nvrtc_prog prog, gr_nvrtc_output *out) {
    size_t size = 0;
    int r = out->ptx ? nv.nvrtcGetPTXSize(prog, &size) : nv.nvrtcGetCUBINSize(prog, &size);
    if (r != NVRTC_OK || size == 0)
        return gr_fail(ctx, GR_ECUDA, "NVRTC compiled but gave no %s: %s", out->ptx ? "PTX" : "CUBIN",
                       nv.nvrtcGetErrorString(r));
    if (!(out->image = malloc(size))) return gr_fail(ctx, GR_ENOMEM, "no memory for a %zu-byte image", size);
    r = out->ptx ? nv.nvrtcGetPTX(prog, out->image) : nv.nvrtcGetCUBIN(prog, out->image);
    if (r != NVRTC_OK) {
        free(out->image);
        out->image = NULL;
        return gr_fail(ctx, GR_ECUDA, "NVRTC could not hand over the image: %s", nv.nvrtcGetErrorString(r));
    }
    out->size = size;
    return GR_OK;
}

gr_status gr_nvrtc_compile(gr_context *ctx, const char *source, const char *name, int arch,
                           gr_nvrtc_output *out) {
    memset(out, 0, sizeof *out);
    char why[sizeof nv.why];
    if (!gr_nvrtc_available(why, sizeof why)) return gr_fail(ctx, GR_ENODEV, "%s", why);
    if (!source) return gr_fail_arg(ctx, GR_EINVAL, "source", "is NULL");
    if (arch < 10 || arch > 9999)
        return gr_fail_arg(ctx, GR_EINVAL, "arch", "%d is not a compute capability as major * 10 + minor "
                           "(90 for 9.0)", arch);
    if (!name || !*name) name = "operator.cu";
    int major = 0, minor = 0;
    nv.nvrtcVersion(&major, &minor);

    gr_nvrtc_prog prog = NULL;
    int r = nv.nvrtcCreateProgram(&prog, source, name, gr_nvrtc_header_count, gr_nvrtc_header_texts,
                                  gr_nvrtc_header_names);
    if (r != NVRTC_OK)
        return gr_fail(ctx, r == NVRTC_OUT_OF_MEMORY ? GR_ENOMEM : GR_ECUDA, "NVRTC %d.%d could not take %s: %s",
                       major, minor, name, nv.nvrtcGetErrorString(r));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    out->arch = arch;
    r = compile_for(prog, "sm", arch);
    char range[64] = "";
    if (r == NVRTC_INVALID_OPTION) {
        /* an sm_ this NVRTC does not know: PTX for an older one, which the driver compiles for the GPU */
        int older = newest_known(arch, range, sizeof range);
        if (older) {
            out->ptx = 1;
            out->arch = older;
            r = compile_for(prog, "compute", older);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->compile_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    out->log = take_log(prog);

    gr_status st;
    int len;
    const char *first = first_error(out->log, &len);
    if (r == NVRTC_OK)
        st = out->log ? take_image(ctx, prog, out) : gr_fail(ctx, GR_ENOMEM, "no memory for NVRTC's log");
    else if (r == NVRTC_COMPILATION)
        st = gr_fail(ctx, GR_EINVAL, "%s does not compile for %s_%d (NVRTC %d.%d): %.*s", name,
                     out->ptx ? "compute" : "sm", out->arch, major, minor, len, first);
    else if (r == NVRTC_INVALID_OPTION)
        st = gr_fail_arg(ctx, GR_EINVAL, "arch", "NVRTC %d.%d does not compile for sm_%d%s", major, minor, arch,
                         range);
    else
        st = gr_fail(ctx, r == NVRTC_OUT_OF_MEMORY ? GR_ENOMEM : GR_ECUDA, "NVRTC %d.%d failed on %s: %s%s%.*s",
                     major, minor, name, nv.nvrtcGetErrorString(r), len ? ": " : "", len, first);
    nv.nvrtcDestroyProgram(&prog);
    return st;
}
