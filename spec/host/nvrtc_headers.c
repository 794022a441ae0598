/*
 * nvrtc_headers.c -- compiles the kernels' device headers with NVRTC, as run-time compiled operators
 * will: the headers of cuda/device/ (core.cuh, ops, warp_block, thread_load, pipeline, epilogue,
 * classic, atomics) must compile without the CUDA runtime's headers or a standard
 * library, and so must the engine headers they may include. The source instantiates a grid-stride kernel
 * for the classic ops (sum .. or) on every dtype and for var, norm, absmax and asum on a few, plus the
 * classic tree, the pipelined loads and the atomics, and engine/base/small_floats.h's conversions of every
 * format both ways. NVRTC needs no GPU: this runs in CI too.
 *   nvrtc_headers DEVICE_DIR   (the repository's cuda/device/ folder); prints one line, exits 0 on success
 */
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>

static const char *source =
    "#include \"thread_load.cuh\"\n"
    "#include \"warp_block.cuh\"\n"
    "#include \"epilogue.cuh\"\n"
    "#include \"pipeline.cuh\"\n"
    "#include \"classic.cuh\"\n"
    "#include \"atomics.cuh\"\n"
    "#include \"../../engine/base/small_floats.h\"\n"
    /* the small floats' conversions, every format both ways */
    "#define ROUND_TRIP(name, p, bits) __global__ void round_trip_##p(const unsigned *in, size_t n, unsigned *out,\\\n"
    "                                                           double *wide) {\\\n"
    "    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {\\\n"
    "        out[i] = gr_##p##_from_double(gr_##p##_to_double(in[i])) ^\\\n"
    "                 gr_##p##_from_float(gr_##p##_to_float(in[i]));\\\n"
    "        wide[i] = gr_##p##_to_double(in[i]);\\\n"
    "    }\\\n"
    "}\n"
    "GR_SMALL_FLOAT_LIST(ROUND_TRIP)\n"
    "template <class Op, class In>\n"
    "__global__ void shuffle(const In *in, size_t n, typename Op::acc_t *partials, unsigned *counter,\n"
    "                        typename Op::acc_t *final_out) {\n"
    "    typename Op::acc_t v = gr::thread_accumulate<Op, In, 2>(in, n);\n"
    "    v = gr::block_reduce<Op>(v);\n"
    "    gr::epilogue<Op>(v, partials, counter, final_out);\n"
    "}\n"
    "template <class Op, class In>\n"
    "__global__ void others(const In *in, size_t n, typename Op::acc_t *out) {\n"
    "    extern __shared__ uint4 smem[];\n"
    "    typename Op::acc_t v = gr::thread_accumulate_pipelined<Op, In>(in, n, smem);\n"
    "    typename Op::acc_t *s = gr::dynamic_smem<typename Op::acc_t>();\n"
    "    s[threadIdx.x] = gr::tile_load<Op, In, 8>(in, n);\n"
    "    __syncthreads();\n"
    "    v = Op::combine(v, gr::complete_unrolled_tree<Op>(s, blockDim.x));\n"
    "    gr::atomic_combine<Op>(out, v);\n"
    "}\n"
    "template <int Id, class In, class Acc> struct Each {\n"
    "    using Op = typename gr::OpOf<Id, In, Acc>::type;\n"
    "    static constexpr bool ok = gr::OpOf<Id, In, Acc>::valid;\n"
    "};\n"
    "#define SHUFFLE(Id, In, Acc) template __global__ void shuffle<Each<Id, In, Acc>::Op, In>(const In *, \\\n"
    "    size_t, Each<Id, In, Acc>::Op::acc_t *, unsigned *, Each<Id, In, Acc>::Op::acc_t *);\n"
    "#define OTHERS(Id, In, Acc) template __global__ void others<Each<Id, In, Acc>::Op, In>(const In *, size_t, \\\n"
    "    Each<Id, In, Acc>::Op::acc_t *);\n"
    "#define INTS(X, In) X(0, In, gr::u64) X(1, In, gr::u64) X(2, In, In) X(3, In, In) X(4, In, gr::u8) \\\n"
    "    X(5, In, gr::u8)\n"
    "#define FLOATS(X, In) X(0, In, In) X(1, In, In) X(2, In, In) X(3, In, In) X(4, In, gr::u8) X(5, In, gr::u8)\n"
    /* every op on every dtype through the grid-stride path; the other paths on one dtype of each kind */
    "INTS(SHUFFLE, gr::i8) INTS(SHUFFLE, gr::u8) INTS(SHUFFLE, gr::i32) INTS(SHUFFLE, gr::u32)\n"
    "INTS(SHUFFLE, gr::i64) INTS(SHUFFLE, gr::u64) FLOATS(SHUFFLE, float) FLOATS(SHUFFLE, double)\n"
    "INTS(SHUFFLE, gr::i16) INTS(SHUFFLE, gr::u16)\n"
    /* the small floats' elements (small_float.cuh): sums in float32, extremes in the element, absmax */
    "#define SMALL(X, In) X(0, In, float) X(1, In, float) X(2, In, In) X(3, In, In) X(4, In, gr::u8) \\\n"
    "    X(5, In, gr::u8) X(0, In, double) X(8, In, float) X(19, In, In) X(20, In, float)\n"
    "SMALL(SHUFFLE, gr::f16) SMALL(SHUFFLE, gr::bf16) SMALL(SHUFFLE, gr::e4m3) SMALL(SHUFFLE, gr::e5m2)\n"
    "SHUFFLE(0, float, double) SHUFFLE(1, float, double)\n"
    /* var and norm: exact integer sums (8 and 32 bits, with the byte dot products), Welford batches */
    "SHUFFLE(8, gr::i8, double) SHUFFLE(8, gr::u32, double) SHUFFLE(8, float, float) SHUFFLE(8, gr::i64, double)\n"
    "SHUFFLE(14, gr::u8, double) SHUFFLE(14, gr::i32, double) SHUFFLE(14, double, double)\n"
    /* absmax (19: integers into the unsigned type of their width) and asum (20) */
    "SHUFFLE(19, gr::i8, gr::u8) SHUFFLE(19, gr::i64, gr::u64) SHUFFLE(19, gr::u32, gr::u32) SHUFFLE(19, float, float)\n"
    "SHUFFLE(19, double, double) SHUFFLE(20, gr::i8, gr::u64) SHUFFLE(20, gr::i64, gr::u64) SHUFFLE(20, float, double)\n"
    "SHUFFLE(20, float, float) SHUFFLE(20, double, double)\n"
    "SHUFFLE(8, gr::i16, double) SHUFFLE(14, gr::u16, double) SHUFFLE(19, gr::i16, gr::u16) SHUFFLE(20, gr::u16, gr::u64)\n"
    /* the atomics' compare-and-swap on 1- and 2-byte values inside their 32-bit word */
    "INTS(OTHERS, gr::i8) INTS(OTHERS, gr::i16) INTS(OTHERS, gr::u16) INTS(OTHERS, gr::u64) FLOATS(OTHERS, float)\n";

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: nvrtc_headers CUDA_DIR\n");
        return 2;
    }
    char include[4096];
    snprintf(include, sizeof include, "-I%s", argv[1]);
    const char *opts[] = {"--gpu-architecture=compute_90", "-std=c++17", include};
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, source, "nvrtc_headers.cu", 0, NULL, NULL) != NVRTC_SUCCESS) return 1;
    nvrtcResult r = nvrtcCompileProgram(prog, 3, opts);
    size_t len = 0;
    nvrtcGetProgramLogSize(prog, &len);
    char *log = malloc(len + 1);
    if (log && nvrtcGetProgramLog(prog, log) == NVRTC_SUCCESS && len > 1) fprintf(stderr, "%s\n", log);
    free(log);
    nvrtcDestroyProgram(&prog);
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    printf("nvrtc_headers: %s (NVRTC %d.%d, %s)\n", r == NVRTC_SUCCESS ? "ok" : "FAILED", major, minor,
           nvrtcGetErrorString(r));
    return r == NVRTC_SUCCESS ? 0 : 1;
}
