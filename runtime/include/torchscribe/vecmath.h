// torchscribe/vecmath.h: vectorisable math for the generated C++ kernels (the functions and
// their tested error bounds: codegen/cpp_math.py; ranges and timings: docs/cpp_math.md).
// Branch-free, inlinable float and double versions of the transcendental functions that fused
// kernels call, written so that gcc -O3 -march=native vectorises a loop calling them WITHOUT
// -ffast-math: IEEE semantics are kept (NaN propagates, infinities and signed zeros as in
// C99/torch, subnormals rounded once), every select is a bit-mask blend of values computed on
// every path (see sel), bits are moved with memcpy, powers of two are built in the exponent
// field, and no integer<->floating conversion needs AVX-512 (gcc vectorises all of it for
// AVX2+FMA as well). Requires fma in hardware to be vectorised (x86-64-v3, AArch64). Polynomial
// coefficients are Remez minimax fits (relative error), rounded to the working precision one at
// a time from the highest degree down, refitting the lower ones each time.
#ifndef TORCHSCRIBE_VECMATH_H
#define TORCHSCRIBE_VECMATH_H

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__GNUC__)
#define TS_MATH_INLINE static inline __attribute__((always_inline))
#else
#define TS_MATH_INLINE static inline
#endif

namespace torchscribe {
namespace math_detail {

TS_MATH_INLINE uint32_t bits(float x) { uint32_t u; std::memcpy(&u, &x, sizeof u); return u; }
TS_MATH_INLINE uint64_t bits(double x) { uint64_t u; std::memcpy(&u, &x, sizeof u); return u; }
TS_MATH_INLINE float f32(uint32_t u) { float x; std::memcpy(&x, &u, sizeof x); return x; }
TS_MATH_INLINE double f64(uint64_t u) { double x; std::memcpy(&x, &u, sizeof x); return x; }

// c ? a : b as a bit-mask blend. A plain ternary lets gcc sink the computation of a or b into a
// branch of its own, and with -ftrapping-math (the default) it then refuses to execute the
// floating-point operations there unconditionally: the loop is not if-converted, so not
// vectorised. Here both values are used on every path; the vectoriser turns it into a blend.
TS_MATH_INLINE float sel(bool c, float a, float b) {
    uint32_t m = 0u - (uint32_t)c;
    return f32((bits(a) & m) | (bits(b) & ~m));
}
TS_MATH_INLINE double sel(bool c, double a, double b) {
    uint64_t m = 0u - (uint64_t)c;
    return f64((bits(a) & m) | (bits(b) & ~m));
}
// Lane masks (all ones where c holds) and the blend they select with.
TS_MATH_INLINE uint64_t mask(bool c) { return 0u - (uint64_t)c; }
TS_MATH_INLINE double sel(uint64_t m, double a, double b) { return f64((bits(a) & m) | (bits(b) & ~m)); }
// x clamped to [lo, hi]; NaN fails both comparisons and passes through.
template <class T> TS_MATH_INLINE T clamp(T x, T lo, T hi) { return sel(x < lo, lo, sel(x > hi, hi, x)); }

// Horner's scheme with fma: c0 + t*(c1 + t*(c2 + ...)), unrolled at compile time.
template <class T> TS_MATH_INLINE T horner(T, T c0) { return c0; }
template <class T, class... C> TS_MATH_INLINE T horner(T t, T c0, C... cs) {
    return std::fma(t, horner(t, cs...), c0);
}

template <class T> constexpr T inf() { return std::numeric_limits<T>::infinity(); }
template <class T> constexpr T nan() { return std::numeric_limits<T>::quiet_NaN(); }

// v * 2^k for k (two's complement in an unsigned word) in [-300, 300] (float) or [-2100, 2100]
// (double): two exact powers of two, 2^floor(k/2) and 2^ceil(k/2), so that a result in the
// subnormal range is rounded once and one that overflows becomes inf.
TS_MATH_INLINE float scale2(float v, uint32_t k) {
    uint32_t k1 = ((k + 512u) >> 1) - 256u;
    uint32_t k2 = k - k1;
    return v * f32((k1 + 127u) << 23) * f32((k2 + 127u) << 23);
}
TS_MATH_INLINE double scale2(double v, uint64_t k) {
    uint64_t k1 = ((k + 4096u) >> 1) - 2048u;
    uint64_t k2 = k - k1;
    return v * f64((k1 + 1023u) << 52) * f64((k2 + 1023u) << 52);
}

// ---- exp / expm1 ----------------------------------------------------------------------------
// Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2: k = rint(x log2 e) from the 1.5*2^p
// "shifter" (its low mantissa bits are k), r = x - k ln2_hi (exact with fma) - k ln2_lo.
// expm1(r) = r + r^2 P(r): P degree 5 (float) / 10 (double) minimax on [-ln2/2, ln2/2].
TS_MATH_INLINE float expm1_P(float r) {
    return horner(r, 0x1p-1f, 0x1.555556p-3f, 0x1.5554e8p-5f, 0x1.1110aap-7f, 0x1.6d444ep-10f, 0x1.a17f68p-13f);
}
TS_MATH_INLINE double expm1_P(double r) {
    return horner(r, 0x1p-1, 0x1.5555555555557p-3, 0x1.5555555555558p-5, 0x1.111111111009cp-7,
                  0x1.6c16c16c15196p-10, 0x1.a01a01ac0ac77p-13, 0x1.a01a01ad2081dp-16, 0x1.71de01c38b0fep-19,
                  0x1.27e4cc72f32c2p-22, 0x1.af4ecdf446d66p-26, 0x1.1f8be5e95bafdp-29);
}
template <class T> TS_MATH_INLINE T expm1_poly(T r) { return std::fma(r * r, expm1_P(r), r); }
// e^r - 1 for exp alone, where only e^r's relative error counts (expm1's is that over |r|, which
// needs expm1_P near 0): float's P of degree 4 (relative error of e^r 3.1e-9, 0.03 ulp), one fma
// fewer than expm1's; exp-bound kernels (SiLU, sigmoid) are limited by the fma ports.
TS_MATH_INLINE float exp_poly(float r) {
    return std::fma(r * r, horner(r, 0x1.fffffcp-2f, 0x1.555492p-3f, 0x1.5558f2p-5f, 0x1.1239d4p-7f, 0x1.6a2444p-10f), r);
}
TS_MATH_INLINE double exp_poly(double r) { return expm1_poly(r); }
TS_MATH_INLINE float exp_reduce(float x, uint32_t& k) {
    const float shift = 0x1.8p23f;
    float kf = std::fma(x, 0x1.715476p+0f, shift);
    k = bits(kf) - bits(shift);
    kf -= shift;
    float r = std::fma(kf, -0x1.62e43p-1f, x);
    return std::fma(kf, 0x1.05c61p-29f, r);
}
TS_MATH_INLINE double exp_reduce(double x, uint64_t& k) {
    const double shift = 0x1.8p52;
    double kf = std::fma(x, 0x1.71547652b82fep+0, shift);
    k = bits(kf) - bits(shift);
    kf -= shift;
    double r = std::fma(kf, -0x1.62e42fefa39efp-1, x);
    return std::fma(kf, -0x1.abc9e3b39803fp-56, r);
}
// expm1(x - k ln2) = p + plo to first order: plo = the rounding error of p = r + r^2 P(r) (summed
// with Fast2Sum) plus that of the reduction (rl = x - k ln2 - r) times e^r.
TS_MATH_INLINE float expm1_split(float x, uint32_t k, float r, float& plo) {
    float w = (r * r) * expm1_P(r);
    float p = r + w;
    float kf = (float)(int32_t)k;
    float rl = std::fma(kf, 0x1.05c61p-29f, std::fma(kf, -0x1.62e43p-1f, x) - r);
    plo = ((r - p) + w) + rl * (1.0f + r);
    return p;
}
TS_MATH_INLINE double expm1_split(double x, uint64_t k, double r, double& plo) {
    double w = (r * r) * expm1_P(r);
    double p = r + w;
    double kf = f64(0x4338000000000000u + k) - 0x1.8p52;  // k as a double (|k| < 2^51)
    double rl = std::fma(kf, -0x1.abc9e3b39803fp-56, std::fma(kf, -0x1.62e42fefa39efp-1, x) - r);
    plo = ((r - p) + w) + rl * (1.0 + r);
    return p;
}
// e^x for x in [-104, 89] (float) / [-746, 710] (double), or NaN.
template <class T> TS_MATH_INLINE T exp_core(T x) {
    decltype(bits(x)) k;
    T r = exp_reduce(x, k);
    return scale2(exp_poly(r) + T(1), k);
}
// Below the lower bound e^x rounds to 0, above the upper one it overflows: clamping keeps 2^k
// representable. NaN fails both comparisons and propagates.
TS_MATH_INLINE float exp_clamp(float x) { return clamp(x, -104.0f, 89.0f); }
TS_MATH_INLINE double exp_clamp(double x) { return clamp(x, -746.0, 710.0); }

// expm1(x) = 2^k (1 + p) - 1 = 2 (s p + (s - 1/2)) with s = 2^(k-1) (finite up to the overflow
// threshold) and p = expm1(r) carried in two words. Also returns k == 0 and p rounded, which is
// expm1(x) itself when k == 0. x clamped to [-20, 89] (float) / [-40, 710] (double).
template <class T> TS_MATH_INLINE T expm1_core(T x, bool& k_is_zero, T& p) {
    decltype(bits(x)) k;
    T r = exp_reduce(x, k);
    T plo;
    T ph = expm1_split(x, k, r, plo);
    k_is_zero = k == 0;
    p = ph + plo;
    T s = scale2(T(0.5), k);
    return T(2) * (std::fma(s, ph, s - T(0.5)) + s * plo);
}

}  // namespace math_detail

TS_MATH_INLINE float ts_exp(float x) { return math_detail::exp_core(math_detail::exp_clamp(x)); }
TS_MATH_INLINE double ts_exp(double x) { return math_detail::exp_core(math_detail::exp_clamp(x)); }

TS_MATH_INLINE float ts_expm1(float x) {
    float c = math_detail::clamp(x, -20.0f, 89.0f);  // e^-20 < 2^-25: expm1 rounds to -1 below
    bool k0; float p;
    float y = math_detail::expm1_core(c, k0, p);
    y = math_detail::sel(k0, p, y);  // |x| <= ln2/2: expm1(r) itself (exact for tiny and subnormal x)
    return math_detail::sel(x == 0.0f, x, y);  // expm1(-0) = -0
}
TS_MATH_INLINE double ts_expm1(double x) {
    double c = math_detail::clamp(x, -40.0, 710.0);  // e^-40 < 2^-54
    bool k0; double p;
    double y = math_detail::expm1_core(c, k0, p);
    y = math_detail::sel(k0, p, y);
    return math_detail::sel(x == 0.0, x, y);
}

// ---- log, log2, log1p -----------------------------------------------------------------------
namespace math_detail {
// x = 2^e m with m in [sqrt(1/2), sqrt(2)) (adding 1 - sqrt(1/2) to the bits carries into the
// exponent exactly when the mantissa is >= sqrt(2)); returns f = m - 1 (exact) and e.
// x must be positive and normal (the callers scale subnormals and select special values).
TS_MATH_INLINE float log_reduce(float x, float& e) {
    uint32_t u = bits(x) + (0x3f800000u - 0x3f3504f3u);
    e = (float)((int32_t)(u >> 23) - 127);
    return f32((u & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
}
TS_MATH_INLINE double log_reduce(double x, double& e) {
    uint64_t u = bits(x) + (0x3ff0000000000000u - 0x3fe6a09e667f3bcdu);
    // (u >> 52) into a double through the 2^52 bit pattern: no int64 -> double conversion
    e = f64(0x4330000000000000u | (u >> 52)) - (0x1p52 + 1023.0);
    return f64((u & 0x000fffffffffffffu) + 0x3fe6a09e667f3bcdu) - 1.0;
}
// log1p(f) + tail for |f| <= sqrt(2) - 1, as 2 atanh(s), s = f/(2+f), arranged as
// f - (f^2/2 - s (f^2/2 + R(s^2))) (fdlibm's form); R(z) = z (c1 + c2 z + ...) minimax on
// [0, 0.0295], degree 3 (float) / 7 (double). Returns lo: log1p(f) + tail = f + lo.
TS_MATH_INLINE float log_kernel_lo(float f, float tail) {
    float s = f / (2.0f + f);
    float z = s * s;
    float R = z * horner(z, 0x1.555584p-1f, 0x1.995748p-2f, 0x1.32772p-2f);
    float hf = 0.5f * f * f;
    return (s * (hf + R) + tail) - hf;
}
TS_MATH_INLINE double log_kernel_lo(double f, double tail) {
    double s = f / (2.0 + f);
    double z = s * s;
    double R = z * horner(z, 0x1.5555555555599p-1, 0x1.999999997cee3p-2, 0x1.2492494491a85p-2,
                          0x1.c71c4ff352242p-3, 0x1.7466a7be85084p-3, 0x1.3997d0ab1f5e3p-3,
                          0x1.2f61749eadeb9p-3);
    double hf = 0.5 * f * f;
    return (s * (hf + R) + tail) - hf;
}
// log for x > 0 finite normal: e ln2_hi + (f + (lo + e ln2_lo)).
TS_MATH_INLINE float log_finite(float e, float f, float tail) {
    return std::fma(e, 0x1.62e43p-1f, f + log_kernel_lo(f, std::fma(e, -0x1.05c61p-29f, tail)));
}
TS_MATH_INLINE double log_finite(double e, double f, double tail) {
    return std::fma(e, 0x1.62e42fefa39efp-1, f + log_kernel_lo(f, std::fma(e, 0x1.abc9e3b39803fp-56, tail)));
}
// The special values of log-like functions, selected last: a = the argument (x, or 1+x for
// log1p): 0 -> -inf, < 0 -> NaN, +inf -> +inf, NaN -> NaN.
template <class T> TS_MATH_INLINE T log_special(T a, T x, T y) {
    y = sel(a == T(0), -inf<T>(), y);
    y = sel(a < T(0), nan<T>(), y);
    y = sel(a == inf<T>(), a, y);
    return sel(x != x, x, y);
}
// Subnormal inputs: scaled by 2^p into the normal range, p subtracted from the exponent.
TS_MATH_INLINE float log_prescale(float x, float& eshift) {
    bool sub = x < 0x1p-126f;
    eshift = sel(sub, 24.0f, 0.0f);
    return sel(sub, x * 0x1p24f, x);
}
TS_MATH_INLINE double log_prescale(double x, double& eshift) {
    bool sub = x < 0x1p-1022;
    eshift = sel(sub, 54.0, 0.0);
    return sel(sub, x * 0x1p54, x);
}
}  // namespace math_detail

template <class T> TS_MATH_INLINE T ts_log_impl(T x) {
    using namespace math_detail;
    T eshift, e;
    T f = log_reduce(log_prescale(x, eshift), e);
    return log_special(x, x, log_finite(e - eshift, f, T(0)));
}
TS_MATH_INLINE float ts_log(float x) { return ts_log_impl(x); }
TS_MATH_INLINE double ts_log(double x) { return ts_log_impl(x); }

// log2(x) = e + (f + lo) log2(e), the product carried in two words and summed with Fast2Sum
// (|e| >= |t| whenever e != 0).
template <class T> TS_MATH_INLINE T ts_log2_impl(T x, T l2hi, T l2lo) {
    using namespace math_detail;
    T eshift, e;
    T f = log_reduce(log_prescale(x, eshift), e);
    e -= eshift;
    T lo = log_kernel_lo(f, T(0));
    T th = f * l2hi;
    T tl = std::fma(f, l2hi, -th);
    tl = std::fma(f, l2lo, std::fma(lo, l2hi, tl));
    T s = e + th;
    T err = (e - s) + th;
    return log_special(x, x, s + (err + tl));
}
TS_MATH_INLINE float ts_log2(float x) { return ts_log2_impl(x, 0x1.715476p+0f, 0x1.4ae0cp-26f); }
TS_MATH_INLINE double ts_log2(double x) { return ts_log2_impl(x, 0x1.71547652b82fep+0, 0x1.777d0ffda0d24p-56); }

// log1p(x) = log(u) + c/u with u = 1 + x rounded and c its rounding error, computed exactly
// (u - x is exact for x >= 1, u - 1 for x < 1).
template <class T> TS_MATH_INLINE T ts_log1p_impl(T x) {
    using namespace math_detail;
    T u = T(1) + x;
    T c = sel(x >= T(1), T(1) - (u - x), x - (u - T(1)));
    T e;
    T f = log_reduce(u, e);
    T y = log_finite(e, f, c / u);
    y = log_special(u, x, y);
    return sel(x == T(0), x, y);  // log1p(-0) = -0
}
TS_MATH_INLINE float ts_log1p(float x) { return ts_log1p_impl(x); }
TS_MATH_INLINE double ts_log1p(double x) { return ts_log1p_impl(x); }

// ---- tanh, sigmoid --------------------------------------------------------------------------
namespace math_detail {
// tanh(x) = x + x^3 P(x^2) on |x| < 0.55: P degree 4 (float) / 10 (double) minimax.
TS_MATH_INLINE float tanh_poly(float x, float z) {
    return std::fma(x * z, horner(z, -0x1.555554p-2f, 0x1.110ff4p-3f, -0x1.b9a2eep-5f,
                                  0x1.5d3e2ap-6f, -0x1.b1eebep-8f), x);
}
TS_MATH_INLINE double tanh_poly(double x, double z) {
    return std::fma(x * z, horner(z, -0x1.5555555555555p-2, 0x1.111111111103cp-3, -0x1.ba1ba1b9ffddp-5,
                                  0x1.664f48776e83fp-6, -0x1.226e32ff59fd6p-7, 0x1.d6d33c2587b4ep-9,
                                  -0x1.7d97fc097f95ep-10, 0x1.34c743763bf05p-11, -0x1.ec229636e0721p-13,
                                  0x1.65358d7a26b71p-14, -0x1.5a3c3da887c22p-16), x);
}
}  // namespace math_detail

// float: from |x| = 0.55 on, tanh|x| = 1 - 2 / (e^(2|x|) + 1) with a plain exp. There the quotient
// is at most 0.5 and the result at least 0.5, so the exp's and the division's rounding errors
// reach the result halved: within one float of the correctly rounded one, as with expm1 in two
// words, and a quarter cheaper (AVX2: 1.0 against 1.32 ms per 1e6).
TS_MATH_INLINE float ts_tanh(float x) {
    using namespace math_detail;
    float a = std::fabs(x);
    float small = tanh_poly(x, x * x);
    float e = exp_core(2.0f * sel(a > 10.0f, 10.0f, a));
    float large = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
    return sel(x == 0.0f, x, sel(a < 0.55f, small, large));  // tanh(-0) = -0
}
// double: from |x| = 0.55 on, tanh|x| = t / (t + 2), t = expm1(2|x|); |x| clamped to 20 where
// tanh rounds to 1.
TS_MATH_INLINE double ts_tanh(double x) {
    using namespace math_detail;
    double a = std::fabs(x);
    double small = tanh_poly(x, x * x);
    bool k0; double p;
    double t = expm1_core(2.0 * sel(a > 20.0, 20.0, a), k0, p);
    double large = std::copysign(t / (t + 2.0), x);
    return sel(x == 0.0, x, sel(a < 0.55, small, large));  // tanh(-0) = -0
}

// sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, e = exp(-|x|) (never overflows,
// and subnormal results for very negative x are kept, where torch's 1 / (1 + exp(-x)) gives 0).
template <class T> TS_MATH_INLINE T ts_sigmoid_impl(T x) {
    using namespace math_detail;
    T e = exp_core(exp_clamp(-std::fabs(x)));
    T num = sel(x < T(0), e, T(1));
    T d = T(1) + e;
    T dlo = (T(1) - d) + e;  // 1 + e = d + dlo exactly
    T q = num / d;
    // one correction step with the exact remainder: 1/d is q (x >= 0) or 1 - q (x < 0)
    T rem = std::fma(-q, d, num) - q * dlo;
    return std::fma(rem, sel(x < T(0), T(1) - q, q), q);
}
TS_MATH_INLINE float ts_sigmoid(float x) { return ts_sigmoid_impl(x); }
TS_MATH_INLINE double ts_sigmoid(double x) { return ts_sigmoid_impl(x); }

// ---- erf, erfc, gelu ------------------------------------------------------------------------
namespace math_detail {
// erf(x) = x + x P(x^2) on |x| < 0.75: P degree 5 (float) / 10 (double) minimax. Returns x P(x^2).
TS_MATH_INLINE float erf_poly_lo(float x, float z) {
    return x * horner(z, 0x1.06eba8p-3f, -0x1.81273ap-2f, 0x1.ce2ac8p-4f, -0x1.b7a892p-6f, 0x1.4f2c7cp-8f,
                      -0x1.61de72p-11f);
}
TS_MATH_INLINE double erf_poly_lo(double x, double z) {
    return x * horner(z, 0x1.06eba8214db69p-3, -0x1.812746b0379ep-2, 0x1.ce2f21a04247p-4, -0x1.b82ce312556c8p-6,
                      0x1.565bcd03117ffp-8, -0x1.c02db110be0c2p-11, 0x1.f9a2ad77453a9p-14, -0x1.f4c5b379f7bddp-17,
                      0x1.b90cc46b2497cp-20, -0x1.5641e0b41d9c3p-23, 0x1.89e44145aa334p-27);
}
// erfc(a) = exp(-a^2) q for a >= 0.75, after the change of variable of Shepherd and Laframboise
// (1981): q = (1 + P(y)) / (1 + 2a), y = (a - K)/(a + K), P minimax over a in [0.75, 10.5] (float:
// K = 2, degree 8) or [0.75, 27.5] (double: K = 3.5, degree 21); past those bounds erfc has
// underflowed (the callers clamp a). exp(-a^2) is left as 2^k (1 + em1), a^2 = a2 + a2lo exactly
// and a2lo folded into the reduced argument; q is carried as q + qlo (erfc_q); erfc_mul rounds the
// product once.
template <class T> TS_MATH_INLINE void erfc_q(T a, T P, T& q, T& qlo) {
    T p = T(1) + P;
    T plo = (T(1) - p) + P;               // 1 + P = p + plo exactly
    T d = std::fma(T(2), a, T(1));
    T dlo = (T(2) * a - d) + T(1);        // 1 + 2a = d + dlo exactly (2a >= 1)
    q = p / d;
    T rem = (std::fma(-q, d, p) + plo) - q * dlo;  // (1 + P) - q (1 + 2a)
    qlo = rem * (q * (T(2) - p));                  // / (1 + 2a), to the few bits needed
}
TS_MATH_INLINE void erfc_parts(float a, float a2, float a2lo, uint32_t& k, float& em1, float& q, float& qlo) {
    float y = (a - 2.0f) / (a + 2.0f);
    float P = horner(y, 0x1.1ba038p-2f, -0x1.7bf5e2p-4f, -0x1.54079ap-3f, 0x1.4ff91ap-3f, -0x1.bc3882p-5f,
                     -0x1.063e9ep-7f, 0x1.1f0dap-7f, 0x1.1a0d7cp-10f, -0x1.84a85ap-10f);
    em1 = expm1_poly(exp_reduce(exp_clamp(-a2), k) - a2lo);
    erfc_q(a, P, q, qlo);
}
TS_MATH_INLINE void erfc_parts(double a, double a2, double a2lo, uint64_t& k, double& em1, double& q, double& qlo) {
    double y = (a - 3.5) / (a + 3.5);
    double P = horner(y, 0x1.f054cd07748ap-3, -0x1.1ebd220ea593bp-3, -0x1.59e2c284b127ep-7, 0x1.8f702ec6b335p-4,
                      -0x1.d76830c352e25p-4, 0x1.686106046ecap-4, -0x1.8ff5ef76de341p-5, 0x1.38ec667117f32p-6,
                      -0x1.143c4ca114bb2p-8, -0x1.3cf3697c83c1fp-12, 0x1.27e66310e19f1p-11, -0x1.fda908bdba631p-14,
                      -0x1.66e1830302e4bp-15, 0x1.970879b8a056p-16, 0x1.385dfae706cc8p-19, -0x1.fff4c64bb76f1p-19,
                      -0x1.6a6f8986f7918p-25, 0x1.41d71958bce83p-21, -0x1.60da6136a906dp-27,
                      -0x1.89e4e43d2f4e5p-24, 0x1.d6253c04eed5dp-30, 0x1.4908660ffb8e6p-27);
    em1 = expm1_poly(exp_reduce(exp_clamp(-a2), k) - a2lo);
    erfc_q(a, P, q, qlo);
}
// (q + qlo) exp(-a^2) = 2^k (q + (q em1 + qlo (1 + em1))), rounded once (and once more if subnormal).
template <class T, class U> TS_MATH_INLINE T erfc_mul(U k, T em1, T q, T qlo) {
    return scale2(q + std::fma(em1, q, std::fma(qlo, em1, qlo)), k);
}
// |x| clamped where erfc has underflowed to 0 (NaN passes through).
TS_MATH_INLINE float erfc_clamp(float a) { return sel(a > 10.5f, 10.5f, a); }
TS_MATH_INLINE double erfc_clamp(double a) { return sel(a > 27.5, 27.5, a); }
// erfc(|x|) for |x| >= 0.75 (for erf, where 1 - erfc(|x|) scales its error by at most 0.41, without
// the low part of q).
template <bool full, class T> TS_MATH_INLINE T erfc_abs(T x) {
    T a = erfc_clamp(std::fabs(x));
    T a2 = a * a;
    decltype(bits(x)) k;
    T em1, q, qlo;
    erfc_parts(a, a2, std::fma(a, a, -a2), k, em1, q, qlo);
    return erfc_mul(k, em1, q, full ? qlo : T(0));
}
// 1 + x + lo with 1 + x summed exactly (Fast2Sum, |x| <= 1).
template <class T> TS_MATH_INLINE T one_plus(T x, T lo) {
    T s = T(1) + x;
    T err = (T(1) - s) + x;
    return s + (err + lo);
}
}  // namespace math_detail

// erf: the polynomial below 0.75, 1 - erfc(|x|) (with the sign of x) above.
template <class T> TS_MATH_INLINE T ts_erf_impl(T x) {
    using namespace math_detail;
    T small = x + erf_poly_lo(x, x * x);
    T large = std::copysign(T(1) - erfc_abs<false>(x), x);
    return sel(std::fabs(x) < T(0.75), small, large);
}
namespace math_detail {
// erfc(a) for a in [0.75, 4], to the absolute error 1 - erfc needs (below 1e-9; past 4, 1 - erfc
// rounds to 1): e^-a^2 R(a - 2.375), R a degree 9 fit of erfc(a) e^(a^2) weighted by e^-a^2, and
// e^-a^2 with a^2's rounding error folded in. No division: erfc's (1 + P(y)) / (1 + 2a) took two,
// which made erf, and the GELUs built on it, cost 6x torch's.
TS_MATH_INLINE float erf_tail(float a) {
    float a2 = a * a;
    uint32_t k;
    float em1 = expm1_poly(exp_reduce(-a2, k) - std::fma(a, a, -a2));
    float R = horner(a - 2.375f, 0x1.c39854p-3f, -0x1.4bb666p-4f, 0x1.cd6d76p-6f, -0x1.31d32ap-7f, 0x1.9cd4a4p-9f,
                     -0x1.764502p-11f, 0x1.ffd60ap-13f, -0x1.3657bep-12f, -0x1.31def8p-13f, -0x1.b40220p-15f);
    // R (1 + em1) 2^k: k in [-23, -1], so 2^k is one exact multiply (erfc_mul's two, for results
    // that may be subnormal, and its low part, 0 here, made erf 11% slower; the same bits)
    return (R + em1 * R) * f32((k + 127u) << 23);
}
}  // namespace math_detail

// float: the polynomial below 0.75, 1 - erf_tail(|x|) (with the sign of x) above.
TS_MATH_INLINE float ts_erf(float x) {
    using namespace math_detail;
    float a = std::fabs(x);
    float small = x + erf_poly_lo(x, x * x);
    float large = std::copysign(1.0f - erf_tail(sel(a > 4.0f, 4.0f, a)), x);
    return sel(a < 0.75f, small, large);
}
TS_MATH_INLINE double ts_erf(double x) { return ts_erf_impl(x); }

// erf(x) to an absolute error of 4e-7 (float), for `1 + erf(x)` (the GELU, the normal CDF): the
// sum keeps erf's error relative to 1, not to erf, so ts_erf's accuracy near 0 and in the tails
// is lost there anyway. One rational x P(x^2) / Q(x^2) on |x| < 3.92, a minimax fit of the
// absolute error (2e-8 with these coefficients; the rest is float rounding in P, Q and the
// division); +-1 exactly from 3.92 on, so that 1 + erf(-x) is 0 where erf rounds to -1. 3x
// cheaper than ts_erf: no exp, no second branch. double: ts_erf.
TS_MATH_INLINE float ts_erf_fast(float x) {
    using namespace math_detail;
    float a = std::fabs(x);
    float c = sel(a < 3.92f, a, 3.92f);  // (NaN: 3.92, replaced below)
    float z = c * c;
    float p = horner(z, 0x1.20dd72p+0f, 0x1.8d9768p-3f, 0x1.b40ed8p-5f, 0x1.012776p-8f, 0x1.2e2946p-12f,
                     0x1.0eafa4p-19f);
    float q = horner(z, 1.0f, 0x1.02c134p-1f, 0x1.d9aa52p-4f, 0x1.f4d220p-7f, 0x1.3ab670p-10f, 0x1.3e1940p-15f);
    float r = sel(a < 3.92f, c * (p / q), 1.0f);
    return sel(a != a, x, std::copysign(r, x));
}
TS_MATH_INLINE double ts_erf_fast(double x) { return ts_erf_impl(x); }

// erfc: 1 - erf(x) below 0.75 (1 - x summed exactly), erfc(|x|) or 2 - erfc(|x|) above, so
// both tails keep their relative accuracy.
template <class T> TS_MATH_INLINE T ts_erfc_impl(T x) {
    using namespace math_detail;
    T v = erfc_abs<true>(x);
    T small = one_plus(-x, -erf_poly_lo(x, x * x));
    return sel(std::fabs(x) < T(0.75), small, sel(x < T(0), T(2) - v, v));
}
TS_MATH_INLINE float ts_erfc(float x) { return ts_erfc_impl(x); }
TS_MATH_INLINE double ts_erfc(double x) { return ts_erfc_impl(x); }

// gelu(x) = x/2 (1 + erf(x/sqrt2)), torch's approximate='none'. x/sqrt2 = y + ylo exactly enough
// for erfc's exponent; 1 + erf(y) is summed exactly below 0.75, and is erfc(-y) = e q (x < 0,
// no cancellation in the negative tail, multiplied in an order that keeps it normal) or 2 - e q
// above. gelu(-inf) is NaN, as torch's (-inf * 0).
template <class T> TS_MATH_INLINE T ts_gelu_impl(T x, T xmax, T rhi, T rlo) {
    using namespace math_detail;
    T hx = T(0.5) * x;
    T ax = std::fabs(x);
    ax = sel(ax > xmax, xmax, ax);
    T a = ax * rhi;
    T alo = std::fma(ax, rhi, -a) + ax * rlo;
    T a2 = a * a;
    T a2lo = std::fma(a, a, -a2) + T(2) * a * alo;
    decltype(bits(x)) k;
    T em1, q, qlo;
    erfc_parts(a, a2, a2lo, k, em1, q, qlo);
    // below 0.75: 1 + erf(y + ylo), erf(y + ylo) ~ erf(y) + ylo erf'(y), erf'(y) ~ 2/sqrt(pi) (1 - y^2)
    T y = std::copysign(a, x), ylo = std::copysign(T(1), x) * alo;
    T t = one_plus(y, std::fma(ylo, T(1.1283791670955126) * (T(1) - a2), erf_poly_lo(y, a2)));
    T hxc = std::copysign(T(0.5) * ax, x);  // the clamped x/2, for the vanishing negative tail
    T qh = q * hxc;
    T qhlo = std::fma(q, hxc, -qh) + qlo * hxc;
    T large = sel(x < T(0), erfc_mul(k, em1, qh, qhlo), hx * (T(2) - erfc_mul(k, em1, q, qlo)));
    T r = sel(a < T(0.75), hx * t, large);
    return sel(x == -inf<T>(), nan<T>(), r);
}
TS_MATH_INLINE float ts_gelu(float x) { return ts_gelu_impl(x, 14.9f, 0x1.6a09e6p-1f, 0x1.9fcef4p-27f); }
TS_MATH_INLINE double ts_gelu(double x) { return ts_gelu_impl(x, 38.9, 0x1.6a09e667f3bcdp-1, -0x1.bdd3413b26456p-55); }

// ---- sin, cos -------------------------------------------------------------------------------
namespace math_detail {
// Cody-Waite reduction in double: x = k pi/2 + r, |r| <= pi/4, pi/2 in three parts; the first
// product is exact in the fma and r1 = x - k p1 is representable, so r carries ~2^-53 relative
// error even next to a multiple of pi/2 (the third part leaves k 2^-161: negligible). Valid for
// |x| < 2^50 (k < 2^51 for the shifter); float arguments are reduced in double too.
TS_MATH_INLINE double trig_reduce(double x, uint64_t& q) {
    const double shift = 0x1.8p52;
    double kf = std::fma(x, 0x1.45f306dc9c883p-1, shift);
    q = bits(kf);  // low bits: k mod 4
    kf -= shift;
    double r = std::fma(kf, -0x1.921fb54442d18p+0, x);
    r = std::fma(kf, -0x1.1a62633145c07p-54, r);
    return std::fma(kf, 0x1.f1976b7ed8fbcp-110, r);
}
// sin r = r + r^3 S(r^2), cos r = 1 - r^2/2 + r^4 C(r^2) on |r| <= pi/4: minimax, degree 6 (double).
TS_MATH_INLINE void sincos_poly_d(double r, double& s, double& c) {
    double z = r * r;
    s = std::fma(r * z, horner(z, -0x1.5555555555555p-3, 0x1.111111111111p-7, -0x1.a01a01a019915p-13,
                               0x1.71de3a545c5e8p-19, -0x1.ae64540b72899p-26, 0x1.6121793de0542p-33,
                               -0x1.ab1468acddf26p-41), r);
    // 1 - z/2 summed as hi + (tail) to keep cos within an ulp
    double hz = 0.5 * z;
    double w = 1.0 - hz;
    double tail = ((1.0 - w) - hz) + z * z * horner(z, 0x1.5555555555555p-5, -0x1.6c16c16c16c16p-10,
                                                   0x1.a01a01a019cfbp-16, -0x1.27e4fb7710f54p-22,
                                                   0x1.1eed8de85419ap-29, -0x1.9394b4e0e2477p-37,
                                                   0x1.ab754f08c96f6p-45);
    c = w + tail;
}
// For float arguments: x = k pi + r, |r| < 1.77 (pi/2, and the rounding of x/pi where |x| nears
// 2^50), so that one odd polynomial gives sin(x) = (-1)^k sin(r) and cos(x) = sin(x - (k + 1/2) pi)
// (-1)^(k+1), without sin's and cos's polynomials both computed and a select per quadrant.
// `shifted` is k + 1.5 2^52 (its low bits: k), the multiple of pi taken off k (sin) or k + 1/2
// (cos, `half`). pi in three parts as above: the first product is exact in the fma and x - kf p1
// (|.| < 2, and kf a multiple of 1/2: 53 bits from 2^-52 on) representable.
template <bool half> TS_MATH_INLINE double trig_reduce_pi(double x, double shifted, uint64_t& k) {
    k = bits(shifted) & 1u;
    double kf = shifted - 0x1.8p52;
    if (half) kf += 0.5;
    double r = std::fma(kf, -0x1.921fb54442d18p+1, x);
    r = std::fma(kf, -0x1.1a62633145c07p-53, r);
    return std::fma(kf, 0x1.f1976b7ed8fbcp-109, r);
}
// sin r = r + r^3 S(r^2) on |r| <= 1.8, S minimax of degree 4 (relative error 2^-32.8: float results).
TS_MATH_INLINE double sin_poly_f(double r) {
    double z = r * r;
    return std::fma(r * z, horner(z, -0x1.5555551cc2e6dp-3, 0x1.11110282b799ap-7, -0x1.a0150f6dcee81p-13,
                                  0x1.71202555b8901p-19, -0x1.942b50a8f02e4p-26), r);
}
// quadrant q: q & 1 swaps sin and cos, q & 2 negates. cos(x) = sin(x + pi/2): q + 1.
TS_MATH_INLINE double trig_select(double s, double c, uint64_t q) {
    double v = sel((q & 1u) != 0, c, s);
    return f64(bits(v) ^ ((q & 2u) << 62));
}
// From |x| = 2^50 on the reduction above is not valid: NaN rather than a wrong value (torch
// reduces exactly; a kernel needing such arguments must not use ts_sin/ts_cos).
TS_MATH_INLINE double trig_limit(double x, double y) {
    return sel(std::fabs(x) < 0x1p50, y, nan<double>());
}
}  // namespace math_detail

TS_MATH_INLINE float ts_sin(float xf) {
    using namespace math_detail;
    double x = xf; uint64_t k;
    double r = trig_reduce_pi<false>(x, std::fma(x, 0x1.45f306dc9c883p-2, 0x1.8p52), k);
    double s = f64(bits(sin_poly_f(r)) ^ (k << 63));  // sin(x) = (-1)^k sin(r)
    return sel(xf == 0.0f, xf, (float)trig_limit(x, s));  // sin(-0) = -0
}
TS_MATH_INLINE float ts_cos(float xf) {
    using namespace math_detail;
    double x = xf; uint64_t k;
    double r = trig_reduce_pi<true>(x, std::fma(x, 0x1.45f306dc9c883p-2, -0.5) + 0x1.8p52, k);
    double c = f64(bits(sin_poly_f(r)) ^ ((k + 1u) << 63));  // cos(x) = (-1)^(k+1) sin(r)
    return (float)trig_limit(x, c);
}
TS_MATH_INLINE double ts_sin(double x) {
    using namespace math_detail;
    uint64_t q; double s, c;
    sincos_poly_d(trig_reduce(x, q), s, c);
    return sel(x == 0.0, x, trig_limit(x, trig_select(s, c, q)));  // sin(-0) = -0
}
TS_MATH_INLINE double ts_cos(double x) {
    using namespace math_detail;
    uint64_t q; double s, c;
    sincos_poly_d(trig_reduce(x, q), s, c);
    return trig_limit(x, trig_select(s, c, q + 1u));
}

// ---- pow (float only) -----------------------------------------------------------------------
// |x|^y = exp(y log|x|) in double (log and exp at double accuracy, so the float result is within
// an ulp), then the C99 special cases: pow(x, +-0) = 1, pow(1, y) = 1, pow(-1, +-inf) = 1,
// negative x: NaN unless y is an integer, negated for odd y; zeros and infinities by the sign of y.
TS_MATH_INLINE float ts_pow(float xf, float yf) {
    using namespace math_detail;
    double x = xf, y = yf;
    double ax = std::fabs(x);
    double e;
    double f = log_reduce(ax, e);  // float subnormals are normal doubles
    double lnx = log_finite(e, f, 0.0);
    lnx = sel(ax == 0.0, -inf<double>(), lnx);
    lnx = sel(ax == inf<double>(), ax, lnx);
    lnx = sel(ax != ax, ax, lnx);
    double t = y * lnx;  // NaN for a NaN operand or 0 * inf (pow(1, inf), pow(x, 0)): fixed below
    double m = exp_core(exp_clamp(t));
    // integer-ness and parity of y (|y| >= 2^24 floats are even integers), as lane masks: bool
    // logic mixing the float and double lanes keeps gcc from vectorising
    double ay = std::fabs(y);
    const double shift = 0x1.8p52;
    double yr = y + shift;
    uint64_t big = mask(ay >= 0x1p24);
    uint64_t yint = big | mask(yr - shift == y);
    uint64_t yodd = ~big & yint & (0u - (bits(yr) & 1u));
    m = sel(yodd, std::copysign(m, x), m);  // odd powers keep the sign of x
    m = sel(mask(x < 0.0) & mask(x > -inf<double>()) & ~yint, nan<double>(), m);
    m = sel(mask(std::fabs(x) == 1.0) & mask(ay == inf<double>()), 1.0, m);
    m = sel(mask(x == 1.0) | mask(y == 0.0), 1.0, m);
    return (float)m;
}

}  // namespace torchscribe

#endif  // TORCHSCRIBE_VECMATH_H
