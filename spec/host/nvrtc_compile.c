/*
 * nvrtc_compile.c -- the run-time compilation layer (engine/jit/nvrtc.h) as operators will use it: a kernel
 * that includes the embedded headers by name compiles to a CUBIN, a far newer architecture falls back
 * to PTX, a too old one and a source with an error fail with a message that names them, and the whole
 * log keeps the error's line. With a GPU the CUBIN is also loaded and launched (engine/base/device.h) and its
 * sum checked; without one, compiling is the whole test, as in CI.
 *
 *   nvrtc_compile                 the checks above; "nvrtc_compile: no NVRTC (...)" and exit 0 when
 *                                 this machine has none (the spec shows it pending)
 *   nvrtc_compile --unavailable   run with GPUREDUCE_NVRTC naming no library: checks the reason given
 * Prints one line "nvrtc_compile: ok ..." and exits 0 when every check passes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jit/compile_log.h"
#include "base/device.h"
#include "jit/nvrtc.h"

static int failures;

static void expect(int ok, const char *what, const char *detail) {
    if (ok) return;
    failures++;
    fprintf(stderr, "nvrtc_compile: FAILED: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
}

/* A grid-stride float sum in double through the headers' own pieces, as a generated operator would;
 * the small floats' conversions included by the name they are embedded under. */
static const char *sum_source =
    "#include \"thread_load.cuh\"\n"
    "#include \"warp_block.cuh\"\n"
    "#include \"atomics.cuh\"\n"
    "#include \"../../engine/base/small_floats.h\"\n"
    "extern \"C\" __global__ void halves(const unsigned short *in, size_t n, unsigned *out) {\n"
    "    for (size_t i = threadIdx.x; i < n; i += blockDim.x) out[i] = gr_f16_from_float(gr_f16_to_float(in[i]));\n"
    "}\n"
    "using Op = gr::OpOf<0, float, double>::type;   // sum, float in, double accumulator\n"
    "extern \"C\" __global__ void sum_f32(const float *in, size_t n, double *out) {\n"
    "    double v = gr::thread_accumulate<Op, float, 2>(in, n);\n"
    "    v = gr::block_reduce<Op>(v);\n"
    "    if (threadIdx.x == 0) gr::atomic_combine<Op>(out, v);\n"
    "}\n";

/* An undefined name on line 3. */
static const char *bad_source =
    "extern \"C\" __global__ void broken(float *p) {\n"
    "    *p = 1.0f;\n"
    "    *p = not_declared_anywhere;\n"
    "}\n";

static int unavailable(void) {
    const char *env = getenv("GPUREDUCE_NVRTC");
    char why[1024];
    expect(env && *env, "GPUREDUCE_NVRTC is set", NULL);
    expect(!gr_nvrtc_available(why, sizeof why), "no NVRTC found", NULL);
    expect(env && strstr(why, env) && strstr(why, "GPUREDUCE_NVRTC"), "the reason names the path tried", why);
    gr_context *ctx;
    if (gr_context_create(&ctx) != GR_OK) return 1;
    gr_nvrtc_output out;
    gr_status st = gr_nvrtc_compile(ctx, sum_source, "sum.cu", 90, &out);
    expect(st == GR_ENODEV, "compiling without NVRTC gives GR_ENODEV", gr_errmsg(ctx));
    expect(strstr(gr_errmsg(ctx), "no NVRTC") != NULL, "the message says why", gr_errmsg(ctx));
    expect(out.image == NULL && out.log == NULL, "nothing is handed out", NULL);
    gr_nvrtc_output_free(&out);
    gr_context_destroy(ctx);
    if (failures) return 1;
    printf("nvrtc_compile: ok (unavailable: %s)\n", why);
    return 0;
}

/* Loads the CUBIN, sums 1..n with it and checks n(n+1)/2 (exact: every partial is an integer < 2^53). */
static void launch(gr_context *ctx, const gr_nvrtc_output *o, char *said, size_t saidlen) {
    char log[2048];
    void *module = NULL, *fn = NULL;
    int e = gr_dev_module_load(o->image, &module, log, sizeof log);
    expect(e == 0, "the CUBIN loads", e ? log : NULL);
    if (e) return;
    e = gr_dev_module_function(module, "no_such_kernel", &fn);
    expect(e != 0 && fn == NULL, "a missing kernel is an error", gr_dev_error_name(e));
    e = gr_dev_module_function(module, "sum_f32", &fn);
    expect(e == 0, "sum_f32 is found", gr_dev_error_name(e));
    const size_t n = 1000003;
    gr_buffer *in = NULL, *out = NULL;
    gr_scalar one = {GR_SCALAR_FLOAT, {.f = 1}};
    if (e == 0 && gr_buffer_new(ctx, n, GR_FLOAT32, GR_DEVICE, &in) == GR_OK &&
        gr_buffer_new(ctx, 1, GR_FLOAT64, GR_DEVICE, &out) == GR_OK &&
        gr_buffer_iota(ctx, in, one, one) == GR_OK && gr_dev_stream_sync(NULL) == 0) {
        const void *p = gr_buffer_data(in);
        void *q = gr_buffer_data(out);
        size_t count = n;
        void *args[] = {&p, &count, &q};
        e = gr_dev_launch(fn, 264, 256, 0, NULL, args);
        expect(e == 0, "the launch is accepted", gr_dev_error_name(e));
        e = e ? e : gr_dev_stream_sync(NULL);
        expect(e == 0, "the kernel runs", gr_dev_error_name(e));
        double sum = 0;
        expect(gr_buffer_read(ctx, out, 0, &sum, 1) == GR_OK, "the sum reads back", gr_errmsg(ctx));
        char got[64];
        snprintf(got, sizeof got, "%.17g", sum);
        expect(sum == (double)n * (double)(n + 1) / 2, "the kernel's sum is n(n+1)/2", got);
        snprintf(said, saidlen, "; launched on the GPU, sum of 1..%zu right", n);
    } else {
        expect(0, "the buffers for the launch", gr_errmsg(ctx));
    }
    gr_buffer_free(ctx, in);
    gr_buffer_free(ctx, out);
    e = gr_dev_module_unload(module);
    expect(e == 0, "the module unloads", gr_dev_error_name(e));
    e = gr_dev_module_load("not an image", &module, log, sizeof log);
    expect(e != 0 && module == NULL, "garbage does not load", gr_dev_error_name(e));
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--unavailable") == 0) return unavailable();
    char why[1024];
    if (!gr_nvrtc_available(why, sizeof why)) {
        printf("nvrtc_compile: no NVRTC (%s)\n", why);
        return 0;
    }
    int major, minor;
    expect(gr_nvrtc_version(&major, &minor) == 0 && major >= 11, "NVRTC's version", NULL);
    gr_context *ctx;
    if (gr_context_create(&ctx) != GR_OK) return 1;
    gr_device_info info;
    int gpu = gr_device_info_get(ctx, &info) == GR_OK;
    int arch = gpu ? info.cc_major * 10 + info.cc_minor : 90;

    /* the headers, included by name from the module's own copy */
    gr_nvrtc_output sum;
    gr_status st = gr_nvrtc_compile(ctx, sum_source, "sum.cu", arch, &sum);
    expect(st == GR_OK, "the sum kernel compiles", st ? gr_errmsg(ctx) : NULL);
    if (st && sum.log) fprintf(stderr, "%s\n", sum.log);
    expect(!sum.ptx && sum.arch == arch, "a CUBIN for the architecture asked", NULL);
    expect(sum.image && sum.size > 4 && memcmp(sum.image, "\177ELF", 4) == 0, "the CUBIN is an ELF image", NULL);
    expect(sum.log != NULL, "a log, even an empty one", NULL);
    expect(sum.compile_ms > 0, "the compile time is measured", NULL);
    char said[128] = "";
    if (gpu && st == GR_OK) launch(ctx, &sum, said, sizeof said);

    /* an error: the message names its first line, the log keeps everything */
    gr_nvrtc_output bad;
    st = gr_nvrtc_compile(ctx, bad_source, "bad.cu", arch, &bad);
    expect(st == GR_EINVAL, "a source with an error is GR_EINVAL", gr_errmsg(ctx));
    expect(bad.log && strstr(bad.log, "bad.cu(3): error") && strstr(bad.log, "not_declared_anywhere"),
           "the log has the error's line", bad.log);
    expect(strstr(gr_errmsg(ctx), "bad.cu(3): error") != NULL, "the message quotes the first error",
           gr_errmsg(ctx));
    expect(bad.image == NULL && bad.size == 0, "no image from a failed compile", NULL);

    /* an error in a file the source includes (user texts cannot: engine/jit/user_text.h): the log kept for
     * messages has none of that file's lines, and says how many went */
    char secret[] = "/tmp/nvrtc_compile_secret.XXXXXX";
    int fd = mkstemp(secret);
    expect(fd >= 0 && write(fd, "secret_marker_1234 = 1;\n", 24) == 24, "a file to include", NULL);
    if (fd >= 0) close(fd);
    char includer[256];
    snprintf(includer, sizeof includer, "#line 1 \"map\"\n__device__ int x = 1;\n#include \"%s\"\n", secret);
    gr_nvrtc_output inc;
    st = gr_nvrtc_compile(ctx, includer, "generated", arch, &inc);
    expect(st == GR_EINVAL && inc.log && strstr(inc.log, "secret_marker_1234"), "NVRTC's own log quotes the file",
           inc.log);
    char *own = gr_compile_log_own(inc.log);
    inc.log = NULL;
    expect(own && !strstr(own, "secret_marker_1234") && strstr(own, "lines about other files left out"),
           "the kept log has none of its lines", own);
    expect(!gr_compile_error(ctx, "the test", includer, own), "and no error of the source to report", gr_errmsg(ctx));
    free(own);
    gr_nvrtc_output_free(&inc);
    unlink(secret);

    /* sm_990 is unknown to any NVRTC today: PTX for the newest it knows, which a driver can finish */
    gr_nvrtc_output far;
    st = gr_nvrtc_compile(ctx, sum_source, "far.cu", 990, &far);
    expect(st == GR_OK, "a future architecture compiles", st ? gr_errmsg(ctx) : NULL);
    expect(far.ptx && far.arch < 990 && far.arch >= 75, "as PTX for an older one", NULL);
    expect(far.image && strstr(far.image, ".visible .entry sum_f32") && strstr(far.image, ".target sm_"),
           "the PTX has the kernel", NULL);

    /* sm_20 is older than any NVRTC 11 or later compiles for */
    gr_nvrtc_output old;
    st = gr_nvrtc_compile(ctx, sum_source, "old.cu", 20, &old);
    expect(st == GR_EINVAL && strcmp(gr_errarg(ctx), "arch") == 0, "too old an architecture is refused",
           gr_errmsg(ctx));
    expect(strstr(gr_errmsg(ctx), "does not compile for sm_20") != NULL, "the message says which", gr_errmsg(ctx));
    gr_nvrtc_output_free(&old);
    st = gr_nvrtc_compile(ctx, sum_source, "odd.cu", 9, &old);
    expect(st == GR_EINVAL && strcmp(gr_errarg(ctx), "arch") == 0, "arch 9 (a major alone) is refused",
           gr_errmsg(ctx));

    if (!failures)
        printf("nvrtc_compile: ok (NVRTC %d.%d, %d embedded headers; sm_%d CUBIN of %zu bytes in %.0f ms; "
               "sm_990 as compute_%d PTX%s)\n", major, minor, gr_nvrtc_header_count, arch, sum.size,
               sum.compile_ms, far.arch, gpu ? said : "; no GPU: not launched");
    gr_nvrtc_output_free(&sum);
    gr_nvrtc_output_free(&bad);
    gr_nvrtc_output_free(&far);
    gr_nvrtc_output_free(&old);
    gr_nvrtc_output_free(&old);     /* twice: a freed output stays safe */
    gr_context_destroy(ctx);
    return failures ? 1 : 0;
}
