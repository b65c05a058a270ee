//===- VectorMath.cpp - exp, SiLU and sigmoid over f32 arrays -------------===//
//
// GCC's generic vectors (vector_size), which every compiler target lowers
// to its own registers: one AVX-512 register, two AVX2 ones, or four SSE2
// ones for sixteen floats. The entry points are compiled once per target
// (target_clones) and the loader picks the widest the CPU has; the file is
// built with -ffp-contract=off (CMakeLists.txt), so no clone fuses a
// multiply and an add that another rounds twice, and the bits agree.
//
// exp(x) = 2^n * p(r), n = round(x / ln 2), r = x - n ln 2 with ln 2 split
// in two (Cody and Waite) so that n * ln2Hi is exact; p is exp's Taylor
// series, to r^7 in f32 and to r^13 in double, enough for |r| <= ln 2 / 2.
// n is read from the bits of x / ln 2 + 1.5 * 2^23 (or 2^52), which rounds
// to an integer there, and 2^n is built as two powers of two so that results
// in the subnormal range round once, as libm's do.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/VectorMath.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace zplan::cpu::detail {

namespace {

using F32x16 = float __attribute__((vector_size(64)));
using I32x16 = int32_t __attribute__((vector_size(64)));
using F64x16 = double __attribute__((vector_size(128)));
using F32x8 = float __attribute__((vector_size(32)));
using F64x8 = double __attribute__((vector_size(64)));
using I64x8 = int64_t __attribute__((vector_size(64)));

constexpr int kLanes = 16;

/// Lanes of `whenTrue` where `mask` is all ones, of `whenFalse` elsewhere.
/// (A cast between vector types of one size keeps the bits.)
template <typename F, typename I>
inline __attribute__((always_inline)) F select(I mask, F whenTrue,
                                               F whenFalse) {
  return (F)(((I)whenTrue & mask) | ((I)whenFalse & ~mask));
}

/// exp of sixteen f32 lanes: 0 below -104 (where libm's is 0 too), +inf
/// above 88.72 (the largest x whose exp is finite), NaN for NaN.
inline __attribute__((always_inline)) F32x16 exp16(F32x16 x) {
  constexpr float kLog2e = 0x1.715476p+0f;
  constexpr float kRound = 0x1.8p23f;
  constexpr float kLn2Hi = 0x1.63p-1f;       // 9 bits: n * kLn2Hi is exact
  constexpr float kLn2Lo = -2.12194440e-4f;  // ln 2 - kLn2Hi
  constexpr int32_t kRoundBits = 0x4b400000; // the bits of kRound
  constexpr float kZeroBelow = -104.0f, kInfinityAbove = 0x1.62e42ep+6f;
  I32x16 zero = x<kZeroBelow, infinite = x> kInfinityAbove, nan = x != x;
  F32x16 clamped = select(zero, F32x16{} + kZeroBelow, x);
  clamped = select(infinite, F32x16{} + kInfinityAbove, clamped);
  F32x16 shifted = clamped * kLog2e + kRound;
  I32x16 n = (I32x16)shifted - kRoundBits;
  F32x16 nf = shifted - kRound;
  F32x16 r = (clamped - nf * kLn2Hi) - nf * kLn2Lo;
  F32x16 p = r * (1.0f / 5040) + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n = 2^(n >> 1) * 2^(n - (n >> 1)): both factors normal for n in
  // [-150, 128].
  I32x16 half = n >> 1;
  F32x16 low = (F32x16)((half + 127) << 23);
  F32x16 high = (F32x16)((n - half + 127) << 23);
  F32x16 y = p * low * high;
  y = select(zero, F32x16{}, y);
  y = select(infinite, F32x16{} + std::numeric_limits<float>::infinity(), y);
  return select(nan, x, y);
}

/// exp of eight double lanes: 0 below -746, +inf above 709.78, NaN for NaN.
inline __attribute__((always_inline)) F64x8 exp8(F64x8 x) {
  constexpr double kLog2e = 0x1.71547652b82fep+0;
  constexpr double kRound = 0x1.8p52;
  constexpr double kLn2Hi = 0x1.62e42fee00000p-1;    // n * kLn2Hi is exact
  constexpr double kLn2Lo = 0x1.a39ef35793c76p-33;   // ln 2 - kLn2Hi
  constexpr int64_t kRoundBits = 0x4338000000000000; // the bits of kRound
  constexpr double kZeroBelow = -746.0, kInfinityAbove = 0x1.62e42fefa39efp+9;
  I64x8 zero = x<kZeroBelow, infinite = x> kInfinityAbove, nan = x != x;
  F64x8 clamped = select(zero, F64x8{} + kZeroBelow, x);
  clamped = select(infinite, F64x8{} + kInfinityAbove, clamped);
  F64x8 shifted = clamped * kLog2e + kRound;
  I64x8 n = (I64x8)shifted - kRoundBits;
  F64x8 nf = shifted - kRound;
  F64x8 r = (clamped - nf * kLn2Hi) - nf * kLn2Lo;
  // Taylor to r^13, 1/k! for k = 13 down to 2 (then + r + 1).
  constexpr double kInverseFactorial[] = {
      1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
      1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
      1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        1.0 / 2.0};
  F64x8 p = F64x8{} + kInverseFactorial[0];
  for (int k = 1; k < 12; ++k)
    p = p * r + kInverseFactorial[k];
  p = p * r + 1.0;
  p = p * r + 1.0;
  I64x8 half = n >> 1;
  F64x8 low = (F64x8)((half + 1023) << 52);
  F64x8 high = (F64x8)((n - half + 1023) << 52);
  F64x8 y = p * low * high;
  y = select(zero, F64x8{}, y);
  y = select(infinite, F64x8{} + std::numeric_limits<double>::infinity(), y);
  return select(nan, x, y);
}

template <typename V, typename T> inline V load(const T *from) {
  V v;
  std::memcpy(&v, from, sizeof(V));
  return v;
}

template <typename T, typename V> inline void store(T *to, V v) {
  std::memcpy(to, &v, sizeof(V));
}

/// x / (1 + exp(-x)) (SiLU) or 1 / (1 + exp(-x)) (sigmoid) of eight lanes.
template <bool kSilu>
inline __attribute__((always_inline)) F64x8 logistic(F64x8 x) {
  F64x8 denominator = 1.0 + exp8(-x);
  if constexpr (kSilu)
    return x / denominator;
  else
    return 1.0 / denominator;
}

/// logistic<kSilu> over x[0, n) in blocks of eight, widened from f32 and
/// rounded back once; the last partial block padded with zeros.
template <bool kSilu>
inline __attribute__((always_inline)) void mapInDouble(const float *x,
                                                       int64_t n, float *y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    F64x8 wide = __builtin_convertvector(load<F32x8>(x + i), F64x8);
    store(y + i, __builtin_convertvector(logistic<kSilu>(wide), F32x8));
  }
  if (i < n) {
    float in[8] = {}, out[8];
    std::memcpy(in, x + i, sizeof(float) * (n - i));
    F64x8 wide = __builtin_convertvector(load<F32x8>(in), F64x8);
    store(out, __builtin_convertvector(logistic<kSilu>(wide), F32x8));
    std::memcpy(y + i, out, sizeof(float) * (n - i));
  }
}

} // namespace

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ZPLAN_VECTOR_CLONES                                                    \
  __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define ZPLAN_VECTOR_CLONES
#endif

ZPLAN_VECTOR_CLONES
double expShiftedSum(const float *x, int64_t n, float shift, float *y) {
  F64x16 sums = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    F32x16 e = exp16(load<F32x16>(x + i) - shift);
    if (y)
      store(y + i, e);
    sums += __builtin_convertvector(e, F64x16);
  }
  if (i < n) {
    // The tail padded with -inf, whose exp adds 0 to the sums.
    float in[kLanes], out[kLanes];
    std::fill(in, in + kLanes, -std::numeric_limits<float>::infinity());
    std::memcpy(in, x + i, sizeof(float) * (n - i));
    F32x16 e = exp16(load<F32x16>(in) - shift);
    store(out, e);
    if (y)
      std::memcpy(y + i, out, sizeof(float) * (n - i));
    sums += __builtin_convertvector(e, F64x16);
  }
  double sum = 0;
  for (int lane = 0; lane < kLanes; ++lane)
    sum += sums[lane];
  return sum;
}

ZPLAN_VECTOR_CLONES
float maxOf(const float *x, int64_t n) {
  constexpr float kLowest = -std::numeric_limits<float>::infinity();
  F32x16 lanes = F32x16{} + kLowest;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    F32x16 v = load<F32x16>(x + i);
    lanes = select(lanes < v, v, lanes);
  }
  float maximum = kLowest;
  for (int lane = 0; lane < kLanes; ++lane)
    maximum = std::max(maximum, lanes[lane]);
  for (; i < n; ++i)
    maximum = std::max(maximum, x[i]);
  return maximum;
}

ZPLAN_VECTOR_CLONES
void scaleInDouble(float *x, int64_t n, double factor, double addend) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    F64x8 wide = __builtin_convertvector(load<F32x8>(x + i), F64x8);
    store(x + i, __builtin_convertvector(wide * factor + addend, F32x8));
  }
  for (; i < n; ++i)
    x[i] = static_cast<float>(static_cast<double>(x[i]) * factor + addend);
}

ZPLAN_VECTOR_CLONES
void siluF32(const float *x, int64_t n, float *y) {
  mapInDouble</*kSilu=*/true>(x, n, y);
}

ZPLAN_VECTOR_CLONES
void sigmoidF32(const float *x, int64_t n, float *y) {
  mapInDouble</*kSilu=*/false>(x, n, y);
}

} // namespace zplan::cpu::detail
