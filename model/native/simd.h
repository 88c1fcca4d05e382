// The vector instructions one build of the kernels targets, chosen by the build (model/native/build.py
// passes -DMOE_ISA_AVX512, -DMOE_ISA_AVX2 or nothing) and never by the compiler: every multiply-add
// below is written out, fused (`fmadd`, one rounding) on the AVX paths and a multiply then an add (two
// roundings) on the generic one (`madd` the same for one float), and the build turns contraction off (-ffp-contract=off), so a path's
// bits are defined by this code. The activation `silu_times` differs between the paths too; the
// machine fingerprint records the path that ran (`3-avx512`, `3-avx2`, `3-generic`).

#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(MOE_ISA_AVX512) || defined(MOE_ISA_AVX2)
#include <immintrin.h>
#endif

namespace simd {

#if defined(MOE_ISA_AVX512)

constexpr const char* ISA = "avx512";
constexpr int LANES = 16;
constexpr int RMAX = 6;  // rows per micro-kernel: 6 x 4 accumulators + 4 weights + 1 broadcast <= 32 registers
using vec = __m512;
inline vec zero() { return _mm512_setzero_ps(); }
inline vec load(const float* p) { return _mm512_loadu_ps(p); }
inline void store(float* p, vec v) { _mm512_storeu_ps(p, v); }
inline vec set1(float a) { return _mm512_set1_ps(a); }
inline vec fmadd(vec a, vec b, vec c) { return _mm512_fmadd_ps(a, b, c); }  // a * b + c, one rounding
inline float madd(float a, float b, float c) { return std::fma(a, b, c); }
inline vec add(vec a, vec b) { return _mm512_add_ps(a, b); }
inline vec mul(vec a, vec b) { return _mm512_mul_ps(a, b); }

// silu(g) * up without a division: exp(-g) = 2^n e^r with n = round(-g log2 e) and r = -g - n ln 2 (ln 2
// in two parts, fused: |r| <= ln 2 / 2 with no cancellation), e^r by its Taylor polynomial of degree 7
// (relative error below 2e-9), then 1 / (1 + exp(-g)) by the 14-bit reciprocal and one Newton step.
// Beyond |g| = 87 the exponent saturates at +-126: silu is then g, or a number within 1e-35 of it.
inline vec silu_times(vec g, vec up) {
  const vec m = _mm512_sub_ps(_mm512_setzero_ps(), g);  // -g
  const vec n = _mm512_min_ps(_mm512_max_ps(
      _mm512_roundscale_ps(_mm512_mul_ps(m, set1(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
      set1(-126.0f)), set1(126.0f));
  vec x = _mm512_fnmadd_ps(n, set1(0.693359375f), m);
  x = _mm512_fnmadd_ps(n, set1(-2.12194440e-4f), x);
  vec p = set1(1.0f / 5040.0f);
  p = fmadd(p, x, set1(1.0f / 720.0f));
  p = fmadd(p, x, set1(1.0f / 120.0f));
  p = fmadd(p, x, set1(1.0f / 24.0f));
  p = fmadd(p, x, set1(1.0f / 6.0f));
  p = fmadd(p, x, set1(0.5f));
  p = fmadd(p, x, set1(1.0f));
  p = fmadd(p, x, set1(1.0f));
  const vec d = _mm512_add_ps(set1(1.0f), _mm512_scalef_ps(p, n));  // 1 + exp(-g)
  vec r = _mm512_rcp14_ps(d);
  r = _mm512_mul_ps(r, _mm512_fnmadd_ps(d, r, set1(2.0f)));
  return _mm512_mul_ps(_mm512_mul_ps(g, r), up);
}

#elif defined(MOE_ISA_AVX2)

constexpr const char* ISA = "avx2";
constexpr int LANES = 8;
constexpr int RMAX = 2;  // 2 x 4 accumulators + 4 weights + 1 broadcast <= 16 registers
using vec = __m256;
inline vec zero() { return _mm256_setzero_ps(); }
inline vec load(const float* p) { return _mm256_loadu_ps(p); }
inline void store(float* p, vec v) { _mm256_storeu_ps(p, v); }
inline vec set1(float a) { return _mm256_set1_ps(a); }
inline vec fmadd(vec a, vec b, vec c) { return _mm256_fmadd_ps(a, b, c); }  // a * b + c, one rounding
inline float madd(float a, float b, float c) { return std::fma(a, b, c); }
inline vec add(vec a, vec b) { return _mm256_add_ps(a, b); }
inline vec mul(vec a, vec b) { return _mm256_mul_ps(a, b); }

// silu(g) * up: exp(-g) as on the AVX-512 path (2^n from the exponent bits, the same polynomial, fused),
// then g / (1 + exp(-g)) by an IEEE division.
inline vec silu_times(vec g, vec up) {
  const vec m = _mm256_sub_ps(_mm256_setzero_ps(), g);
  const vec n = _mm256_min_ps(_mm256_max_ps(
      _mm256_round_ps(_mm256_mul_ps(m, set1(1.44269504088896341f)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
      set1(-126.0f)), set1(126.0f));
  vec x = _mm256_fnmadd_ps(n, set1(0.693359375f), m);
  x = _mm256_fnmadd_ps(n, set1(-2.12194440e-4f), x);
  vec p = set1(1.0f / 5040.0f);
  p = fmadd(p, x, set1(1.0f / 720.0f));
  p = fmadd(p, x, set1(1.0f / 120.0f));
  p = fmadd(p, x, set1(1.0f / 24.0f));
  p = fmadd(p, x, set1(1.0f / 6.0f));
  p = fmadd(p, x, set1(0.5f));
  p = fmadd(p, x, set1(1.0f));
  p = fmadd(p, x, set1(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const vec d = _mm256_add_ps(set1(1.0f), _mm256_mul_ps(p, _mm256_castsi256_ps(bits)));  // 1 + exp(-g)
  return _mm256_mul_ps(_mm256_div_ps(g, d), up);
}

#else

constexpr const char* ISA = "generic";
constexpr int LANES = 8;
constexpr int RMAX = 2;
typedef float vec __attribute__((vector_size(LANES * 4)));
typedef int32_t veci __attribute__((vector_size(LANES * 4)));
inline vec zero() { return vec{}; }
inline vec load(const float* p) {
  vec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline void store(float* p, vec v) { std::memcpy(p, &v, sizeof(v)); }
inline vec set1(float a) { return vec{a, a, a, a, a, a, a, a}; }
inline vec fmadd(vec a, vec b, vec c) { return a * b + c; }  // two roundings (no contraction in this build)
inline float madd(float a, float b, float c) { return a * b + c; }
inline vec add(vec a, vec b) { return a + b; }
inline vec mul(vec a, vec b) { return a * b; }

// exp: Cephes' expf (range reduction by ln 2 in two parts, degree-5 polynomial, 2^n from the exponent
// bits); within 2 ulp, inputs clamped to +-88.38 (below that, 0 or a subnormal: 1 + exp(-g) is then 1 or
// exp's overflow, g / huge ~ 0).
inline vec expv(vec x) {
  const vec hi = set1(88.3762626647949f), lo = set1(-88.3762626647949f);
  x = x > hi ? hi : x;
  x = x < lo ? lo : x;
  vec fx = x * 1.44269504088896341f + 0.5f;
  vec fl = __builtin_convertvector(__builtin_convertvector(fx, veci), vec);
  fl += __builtin_convertvector(fl > fx, vec);  // truncation toward zero -> floor (adds -1 where above)
  x = x - fl * 0.693359375f;
  x = x - fl * -2.12194440e-4f;
  vec y = set1(1.9875691500e-4f);
  y = y * x + 1.3981999507e-3f;
  y = y * x + 8.3334519073e-3f;
  y = y * x + 4.1665795894e-2f;
  y = y * x + 1.6666665459e-1f;
  y = y * x + 5.0000001201e-1f;
  y = y * (x * x) + x + 1.0f;
  veci bits = (__builtin_convertvector(fl, veci) + 127) << 23;
  vec scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return y * scale;
}

inline vec silu_times(vec g, vec up) { return g / (1.0f + expv(-g)) * up; }

#endif

}  // namespace simd
