/*
 * gen_element.h -- the element generators behind fill/iota/random, written once for host and device.
 *
 * Included by the CPU backend (C) and by cuda/runtime/generate.cu (CUDA C++), so a buffer filled by seed on a
 * GPU holds exactly what the CPU backend would put there: specs can compare the two backends, and a
 * result reproduced on a machine without a GPU is the same data.
 */
#ifndef GR_GEN_ELEMENT_H
#define GR_GEN_ELEMENT_H

#include "gr.h"

#include "../../engine/base/hostdev.h"
#include "../../engine/base/small_floats.h"

/* A counter-based hash (the splitmix64 finaliser over seed and index): every element is independent,
 * so any thread can produce any element and the sequence does not depend on the launch shape. */
GR_HD uint64_t gr_hash64(uint64_t seed, uint64_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + (i + 1) * 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A product and a sum that round once each on both sides: nvcc fuses a * b + c into one fma by default
 * (it did here: lo + span * u became fma.rn.f64, and the device's float64 draws differed from the
 * host's in about half the elements of random(seed, -1000, 1000); iota's start + i * step likewise);
 * the _rn intrinsics are never fused.
 * The host's C rounds every operation (ISO C, no contraction: op_math.h's GR_DMUL_RN says why). */
#ifdef __CUDA_ARCH__
#define GR_GEN_MUL(a, b) __dmul_rn(a, b)
#define GR_GEN_ADD(a, b) __dadd_rn(a, b)
#else
#define GR_GEN_MUL(a, b) ((a) * (b))
#define GR_GEN_ADD(a, b) ((a) + (b))
#endif

/* Uniform in [lo, hi) for floats: 53 random bits scaled; a value that rounds up to hi folds to lo. Where
 * hi - lo overflows (bounds near the type's limits), the two ends are weighted separately instead. */
GR_HD double gr_random_real(uint64_t h, double lo, double hi) {
    double u = (double)(h >> 11) * (1.0 / 9007199254740992.0);      /* exact: a power of two */
    double span = hi - lo;
    double v = span - span == 0.0 ? GR_GEN_ADD(lo, GR_GEN_MUL(span, u))
                                  : GR_GEN_ADD(GR_GEN_MUL(lo, 1.0 - u), GR_GEN_MUL(hi, u));
    return v >= hi ? lo : v;
}

/* Element i of iota over floats: start + i * step in double, each operation rounded once (then rounded
 * once more to the dtype by the caller). */
GR_HD double gr_iota_real(double start, uint64_t i, double step) {
    return GR_GEN_ADD(start, GR_GEN_MUL((double)i, step));
}

/* The same in float32: a value that rounds up to hi in float32 folds to lo too. */
GR_HD float gr_random_real32(uint64_t h, double lo, double hi) {
    float v = (float)gr_random_real(h, lo, hi);
    return v >= (float)hi ? (float)lo : v;
}

/* The same in a small float format (engine/base/small_floats.h), as its pattern: the double draw rounded
 * once to nearest even -- not through float32, which would round twice -- and a value that rounds up to
 * hi (or past the format's largest finite value) folds to lo rounded to nearest even. gr_random_f16,
 * gr_random_bf16 and the FP8 formats' alike. */
#define GR_RANDOM_SMALL_FLOAT(name, pre, bits)                                                          \
    GR_HD unsigned gr_random_##pre(uint64_t h, double lo, double hi) {                                 \
        const unsigned mask = (1u << (bits)) - 1u, p = gr_##pre##_from_double(gr_random_real(h, lo, hi)); \
        if ((p & GR_SF_NOFIT) || gr_##pre##_to_double(p & mask) >= hi) return gr_##pre##_from_double(lo) & mask; \
        return p & mask;                                                                                \
    }
GR_SMALL_FLOAT_LIST(GR_RANDOM_SMALL_FLOAT)
#undef GR_RANDOM_SMALL_FLOAT

/* Uniform in [lo, hi] for integers, in 64-bit two's-complement arithmetic (span 0 = the full range),
 * element i of the sequence of `seed`. h % span alone favours the small values when span does not
 * divide 2^64 (by up to 2:1 for spans near 2^63): draws below 2^64 mod span are rejected and replaced
 * by fresh hashes of the same element, so every value is equally likely and each element still
 * depends on (seed, i) alone. */
GR_HD uint64_t gr_random_bits(uint64_t seed, uint64_t i, uint64_t lo, uint64_t hi) {
    uint64_t span = hi - lo + 1;
    uint64_t h = gr_hash64(seed, i);
    if (span == 0) return lo + h;
    uint64_t reject_below = (0 - span) % span;      /* 2^64 mod span */
    for (uint64_t k = 1; h < reject_below; k++) h = gr_hash64(seed ^ (k * 0x9E3779B97F4A7C15ull), i);
    return lo + h % span;
}

#endif
