/*
 * core.cuh -- the ground every kernel header stands on: fixed-size types, the few type traits the
 * kernels need, and limits of the element types.
 *
 * Compiled by nvcc for the catalogue and by NVRTC for operators generated at run time, so it includes
 * nothing (NVRTC has no standard library and no CUDA runtime headers) -- neither does any header that
 * includes it: ops, warp_block, thread_load, pipeline, epilogue, classic, atomics, results. The runtime
 * side of a launch lives apart, in launch.cuh. NVRTC-clean: the module embeds every header whose opening
 * comment says so (scripts/embed_headers.sh), for operators to include by name.
 */
#pragma once

#define GR_DEV __device__ __forceinline__
#define GR_HOSTDEV __host__ __device__ __forceinline__

namespace gr {

using i8 = signed char;
using u8 = unsigned char;
using i16 = short;
using u16 = unsigned short;
using i32 = int;
using u32 = unsigned;
using i64 = long long;
using u64 = unsigned long long;
using uptr = decltype(sizeof(0));     /* an unsigned integer as wide as a pointer (LP64) */
using usize = decltype(sizeof(0));

constexpr unsigned kFullMask = 0xffffffffu;

/* ---- traits ---------------------------------------------------------------------------------------- */

template <class A, class B> struct is_same { static constexpr bool value = false; };
template <class A> struct is_same<A, A> { static constexpr bool value = true; };
template <class A, class B> constexpr bool is_same_v = is_same<A, B>::value;

template <bool C, class A, class B> struct conditional { using type = A; };
template <class A, class B> struct conditional<false, A, B> { using type = B; };
template <bool C, class A, class B> using conditional_t = typename conditional<C, A, B>::type;

template <class T, T v> struct constant { static constexpr T value = v; };

template <bool C, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { using type = T; };

/* Infinity on the host and the device under nvcc (CUB and Thrust take identities on the host); NVRTC
 * compiles device code only and has no compiler builtins for it. */
#if defined(__CUDACC_RTC__)
#define GR_INF_F __int_as_float(0x7f800000)
#define GR_INF_D __longlong_as_double(0x7ff0000000000000ll)
#else
#define GR_INF_F __builtin_huge_valf()
#define GR_INF_D __builtin_huge_val()
#endif

/* The facts of an element type: signedness, float or not, and the limits the identities need. Both
 * spellings of the 64-bit integers (long and long long) are here: <stdint.h>'s int64_t is long on
 * LP64, while NVRTC sources spell it long long. */
template <class T> struct limits;
template <class T> constexpr bool is_arithmetic_v = false;
#define GR_INT_LIMITS(T, SIGNED, LO, HI)                                                                  \
    template <> constexpr bool is_arithmetic_v<T> = true;                                                 \
    template <> struct limits<T> {                                                                        \
        static constexpr bool is_signed = SIGNED, is_float = false, has_infinity = false;                 \
        static GR_HOSTDEV T lowest() { return static_cast<T>(LO); }                                       \
        static GR_HOSTDEV T max() { return static_cast<T>(HI); }                                          \
    };
GR_INT_LIMITS(signed char, true, -128, 127)
GR_INT_LIMITS(unsigned char, false, 0, 255)
GR_INT_LIMITS(short, true, -32768, 32767)
GR_INT_LIMITS(unsigned short, false, 0, 65535)
GR_INT_LIMITS(int, true, -2147483647 - 1, 2147483647)
GR_INT_LIMITS(unsigned, false, 0, 4294967295u)
GR_INT_LIMITS(long, true, -9223372036854775807L - 1, 9223372036854775807L)
GR_INT_LIMITS(unsigned long, false, 0, 18446744073709551615ul)
GR_INT_LIMITS(long long, true, -9223372036854775807LL - 1, 9223372036854775807LL)
GR_INT_LIMITS(unsigned long long, false, 0, 18446744073709551615ull)
#undef GR_INT_LIMITS
template <> constexpr bool is_arithmetic_v<float> = true;
template <> constexpr bool is_arithmetic_v<double> = true;
template <> struct limits<float> {
    static constexpr bool is_signed = true, is_float = true, has_infinity = true;
    static GR_HOSTDEV float lowest() { return -3.402823466e38f; }
    static GR_HOSTDEV float max() { return 3.402823466e38f; }
    static GR_HOSTDEV float infinity() { return GR_INF_F; }
};
template <> struct limits<double> {
    static constexpr bool is_signed = true, is_float = true, has_infinity = true;
    static GR_HOSTDEV double lowest() { return -1.7976931348623157e308; }
    static GR_HOSTDEV double max() { return 1.7976931348623157e308; }
    static GR_HOSTDEV double infinity() { return GR_INF_D; }
};

template <class T> constexpr bool is_signed_v = limits<T>::is_signed;
template <class T> constexpr bool is_float_v = limits<T>::is_float;

/* The value of `from`'s bits as a To of the same size. */
template <class To, class From> GR_DEV To bit_cast(const From &from) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast: the sizes differ");
    To to;
    memcpy(&to, &from, sizeof to);
    return to;
}

}  // namespace gr
