//===- VectorMath.cpp - the CPU kernels' f32 vector loops -----------------===//
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
// series to r^7, enough in f32 for |r| <= ln 2 / 2. n is read from the
// bits of x / ln 2 + 1.5 * 2^23, which rounds to an integer there, and 2^n
// is built as two powers of two so that results in the subnormal range
// round once, as libm's do.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/VectorMath.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

namespace zplan::cpu::detail {

namespace {

using F32x16 = float __attribute__((vector_size(64)));
using I32x16 = int32_t __attribute__((vector_size(64)));
using F32x8 = float __attribute__((vector_size(32)));
using F64x8 = double __attribute__((vector_size(64)));

constexpr int kLanes = 16;

/// Lanes of `whenTrue` where `mask` is all ones, of `whenFalse` elsewhere
/// (`mask` is a comparison's result: all ones or all zeros per lane). The
/// vector conditional, which GCC lowers to one blend where the target has
/// one (AVX-512's masked move, AVX's vblendv), where the bitwise and, andn
/// and or it replaced took three.
template <typename F, typename I>
inline __attribute__((always_inline)) F select(I mask, F whenTrue,
                                               F whenFalse) {
  return mask ? whenTrue : whenFalse;
}

/// exp's f32 constants.
struct Exp {
  static constexpr float kLog2e = 0x1.715476p+0f;
  static constexpr float kRound = 0x1.8p23f;
  static constexpr int32_t kRoundBits = 0x4b400000; // the bits of kRound
  static constexpr float kLn2Hi = 0x1.63p-1f; // 9 bits: n * kLn2Hi is exact
  static constexpr float kLn2Lo = -2.12194440e-4f; // ln 2 - kLn2Hi
  // libm's exp is 0 below kZeroBelow; kInfinityAbove is the largest x
  // whose exp is finite.
  static constexpr float kZeroBelow = -104.0f;
  static constexpr float kInfinityAbove = 0x1.62e42ep+6f;
  static constexpr int32_t kExponentBias = 127, kMantissaBits = 23;
  /// 1/k! for k = 7 down to 2: Taylor to r^7.
  static constexpr float kInverseFactorial[] = {
      1.0f / 5040, 1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 1.0f / 2};
};

/// exp of each of sixteen lanes: 0 below kZeroBelow, +inf above
/// kInfinityAbove, NaN for NaN. kNonPositive: the caller promises no lane
/// is above 0 (logistic's exp(-|x|)), and the checks for +inf are left
/// out; a NaN lane gives NaN without its own check then (every step
/// passes it on), as x86 returns it: the first NaN operand, quieted --
/// which logistic's divide makes x's either way. The same bits.
template <bool kNonPositive = false>
inline __attribute__((always_inline)) F32x16 exp16(F32x16 x) {
  using F = F32x16;
  using I = I32x16;
  I zero = x < Exp::kZeroBelow;
  // A lane below kZeroBelow becomes 0 at the end; it is evaluated at 0
  // meanwhile, not at kZeroBelow, whose exp is below the subnormals: the
  // CPU takes a slow assist for each such multiply (a causal softmax's
  // masked lanes in every row's last block).
  F clamped = select(zero, F{}, x);
  I infinite = {}, nan = {};
  if constexpr (!kNonPositive) {
    infinite = x > Exp::kInfinityAbove;
    nan = x != x;
    clamped = select(infinite, F{} + Exp::kInfinityAbove, clamped);
  }
  F shifted = clamped * Exp::kLog2e + Exp::kRound;
  I n = (I)shifted - Exp::kRoundBits;
  F nf = shifted - Exp::kRound;
  F r = (clamped - nf * Exp::kLn2Hi) - nf * Exp::kLn2Lo;
  F p = F{} + Exp::kInverseFactorial[0];
  for (size_t k = 1; k < std::size(Exp::kInverseFactorial); ++k)
    p = p * r + Exp::kInverseFactorial[k];
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // 2^n = 2^(n >> 1) * 2^(n - (n >> 1)): both factors are normal for every
  // n the clamp leaves, so a subnormal result is rounded once.
  I half = n >> 1;
  F low = (F)((half + Exp::kExponentBias) << Exp::kMantissaBits);
  F high = (F)((n - half + Exp::kExponentBias) << Exp::kMantissaBits);
  F y = p * low * high;
  y = select(zero, F{}, y);
  if constexpr (kNonPositive)
    return y;
  y = select(infinite, F{} + std::numeric_limits<float>::infinity(), y);
  return select(nan, x, y);
}

/// Whether `value` is +0 (not -0): x - value is then x for every x.
inline bool isPositiveZero(double value) {
  return value == 0 && !std::signbit(value);
}

/// Whether every lane of `x` is below `limit` (false for a NaN lane).
inline __attribute__((always_inline)) bool allBelow(F32x16 x, float limit) {
  I32x16 below = x < limit;
  for (int lane = 0; lane < kLanes; ++lane)
    if (!below[lane])
      return false;
  return true;
}

template <typename V, typename T> inline V load(const T *from) {
  V v;
  std::memcpy(&v, from, sizeof(V));
  return v;
}

template <typename T, typename V> inline void store(T *to, V v) {
  std::memcpy(to, &v, sizeof(V));
}

/// The lanes of `lanes` added in lane order, 0 first, in T: the fixed order
/// every sum here ends with, so that a sum's bits depend only on which
/// elements fell in which lane.
template <typename T, typename V>
inline __attribute__((always_inline)) T addLanesInOrder(V lanes) {
  T total = 0;
  for (int lane = 0; lane < kLanes; ++lane)
    total += lanes[lane];
  return total;
}

/// Sixteen double lanes (element i of a row in lane i % 16) held as two
/// vectors of eight, lanes 0-7 and 8-15: GCC keeps a 128-byte vector type
/// (F64x16) in memory, and each += of one went through the stack (the
/// large forward's rms_norm calls: 2.73 ms, 2.21 ms with these).
struct DoubleLanes {
  F64x8 low = {}, high = {};

  /// Lanes 0-7 and 8-15 of `x`, widened to double.
  static inline __attribute__((always_inline)) F64x8 lowHalf(F32x16 x) {
    return __builtin_convertvector(
        __builtin_shufflevector(x, x, 0, 1, 2, 3, 4, 5, 6, 7), F64x8);
  }
  static inline __attribute__((always_inline)) F64x8 highHalf(F32x16 x) {
    return __builtin_convertvector(
        __builtin_shufflevector(x, x, 8, 9, 10, 11, 12, 13, 14, 15), F64x8);
  }
  /// Adds the sixteen lanes of `x`, each widened to double.
  inline __attribute__((always_inline)) void add(F32x16 x) {
    low += lowHalf(x);
    high += highHalf(x);
  }
  /// Adds (x[j] - center)^2, in double, to lane j; kUncentered: center is
  /// +0, which leaves every x[j] as it is, and is not subtracted.
  template <bool kUncentered = false>
  inline __attribute__((always_inline)) void addCenteredSquares(F32x16 x,
                                                                double center) {
    F64x8 lowCentered = lowHalf(x), highCentered = highHalf(x);
    if constexpr (!kUncentered) {
      lowCentered -= center;
      highCentered -= center;
    }
    low += lowCentered * lowCentered;
    high += highCentered * highCentered;
  }
  double &operator[](int lane) { return lane < 8 ? low[lane] : high[lane - 8]; }
  /// The lanes added in lane order, 0 first (as addLanesInOrder).
  double total() const {
    double sum = 0;
    for (int lane = 0; lane < 8; ++lane)
      sum += low[lane];
    for (int lane = 0; lane < 8; ++lane)
      sum += high[lane];
    return sum;
  }
};

/// x / (1 + exp(-x)) (SiLU) or 1 / (1 + exp(-x)) (sigmoid) of sixteen
/// lanes, in f32. exp is taken of -|x| only, as e / (1 + e) with
/// e = exp(x) for negative x, so it never overflows and the far negative
/// tail keeps its tiny values instead of becoming 0. An ulp from exp16 and
/// half an ulp from each of the add, the multiply and the divide: within
/// three ulps of the exact value (VectorMathTest measures it).
template <bool kSilu>
inline __attribute__((always_inline)) F32x16 logistic(F32x16 x) {
  I32x16 negative = x < 0.0f;
  F32x16 e = exp16</*kNonPositive=*/true>(-(F32x16)((I32x16)x & 0x7fffffff));
  F32x16 numerator;
  if constexpr (kSilu)
    numerator = select(negative, x * e, x);
  else
    numerator = select(negative, e, F32x16{} + 1.0f);
  return numerator / (1.0f + e);
}

/// logistic<kSilu> over x[0, n) in blocks of sixteen; the last partial
/// block padded with zeros.
template <bool kSilu>
inline __attribute__((always_inline)) void mapLogistic(const float *x,
                                                       int64_t n, float *y) {
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    store(y + i, logistic<kSilu>(load<F32x16>(x + i)));
  if (i < n) {
    float in[kLanes] = {}, out[kLanes];
    std::memcpy(in, x + i, sizeof(float) * (n - i));
    store(out, logistic<kSilu>(load<F32x16>(in)));
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
  DoubleLanes sums;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    F32x16 shifted = load<F32x16>(x + i) - shift;
    // Sixteen lanes below exp's zero (a causal mask's far side): exp16
    // would give +0 in each, and +0 added to the sums changes no bit.
    if (allBelow(shifted, Exp::kZeroBelow)) {
      if (y)
        store(y + i, F32x16{});
      continue;
    }
    F32x16 e = exp16(shifted);
    if (y)
      store(y + i, e);
    sums.add(e);
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
    sums.add(e);
  }
  return sums.total();
}

ZPLAN_VECTOR_CLONES
double sumInDouble(const float *x, int64_t n) {
  DoubleLanes sums;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    sums.add(load<F32x16>(x + i));
  for (int lane = 0; i < n; ++i, ++lane)
    sums[lane] += x[i];
  return sums.total();
}

ZPLAN_VECTOR_CLONES
double centeredSquareSum(const float *x, int64_t n, double center) {
  DoubleLanes sums;
  int64_t i = 0;
  // x - (+0) is x, bit for bit (-0 included): rms_norm's rows skip it.
  if (isPositiveZero(center))
    for (; i + kLanes <= n; i += kLanes)
      sums.addCenteredSquares</*kUncentered=*/true>(load<F32x16>(x + i), 0.0);
  for (; i + kLanes <= n; i += kLanes)
    sums.addCenteredSquares(load<F32x16>(x + i), center);
  for (int lane = 0; i < n; ++i, ++lane) {
    double centered = x[i] - center;
    sums[lane] += centered * centered;
  }
  return sums.total();
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
void normalizeInDouble(const float *x, int64_t n, double mean, double inverse,
                       const float *weight, const float *bias, float *y) {
  // Each element the scalar loop's (x - mean) * inverse, * weight, + bias,
  // in double, rounded once: a lane computes it in that order.
  int64_t i = 0;
  // x - (+0) is x, bit for bit: rms_norm's rows skip it.
  if (isPositiveZero(mean) && !bias)
    for (; i + 8 <= n; i += 8) {
      F64x8 normalized =
          __builtin_convertvector(load<F32x8>(x + i), F64x8) * inverse;
      if (weight)
        normalized *= __builtin_convertvector(load<F32x8>(weight + i), F64x8);
      store(y + i, __builtin_convertvector(normalized, F32x8));
    }
  for (; i + 8 <= n; i += 8) {
    F64x8 normalized =
        (__builtin_convertvector(load<F32x8>(x + i), F64x8) - mean) * inverse;
    if (weight)
      normalized *= __builtin_convertvector(load<F32x8>(weight + i), F64x8);
    if (bias)
      normalized += __builtin_convertvector(load<F32x8>(bias + i), F64x8);
    store(y + i, __builtin_convertvector(normalized, F32x8));
  }
  for (; i < n; ++i) {
    double normalized = (x[i] - mean) * inverse;
    if (weight)
      normalized *= weight[i];
    if (bias)
      normalized += bias[i];
    y[i] = static_cast<float>(normalized);
  }
}

ZPLAN_VECTOR_CLONES
void siluF32(const float *x, int64_t n, float *y) {
  mapLogistic</*kSilu=*/true>(x, n, y);
}

ZPLAN_VECTOR_CLONES
void sigmoidF32(const float *x, int64_t n, float *y) {
  mapLogistic</*kSilu=*/false>(x, n, y);
}

ZPLAN_VECTOR_CLONES
void dotRows(const float *b, int64_t ldb, int64_t rows, int64_t k,
             const float *x, float beta, float *y) {
  // Four rows at a time, for four independent streams of loads; each row's
  // lanes are its own, so a row's bits do not depend on its neighbours.
  constexpr int kRows = 4;
  auto finish = [&](int64_t row, F32x16 lanes, const float *rowData) {
    int64_t i = k - k % kLanes;
    for (int lane = 0; i < k; ++i, ++lane)
      lanes[lane] += rowData[i] * x[i];
    float dot = addLanesInOrder<float>(lanes);
    y[row] = beta == 0.0f ? dot : beta * y[row] + dot;
  };
  int64_t row = 0;
  for (; row + kRows <= rows; row += kRows) {
    const float *r0 = b + row * ldb, *r1 = r0 + ldb, *r2 = r1 + ldb,
                *r3 = r2 + ldb;
    F32x16 s0 = {}, s1 = {}, s2 = {}, s3 = {};
    for (int64_t i = 0; i + kLanes <= k; i += kLanes) {
      F32x16 v = load<F32x16>(x + i);
      s0 += load<F32x16>(r0 + i) * v;
      s1 += load<F32x16>(r1 + i) * v;
      s2 += load<F32x16>(r2 + i) * v;
      s3 += load<F32x16>(r3 + i) * v;
    }
    finish(row, s0, r0);
    finish(row + 1, s1, r1);
    finish(row + 2, s2, r2);
    finish(row + 3, s3, r3);
  }
  for (; row < rows; ++row) {
    const float *r0 = b + row * ldb;
    F32x16 s0 = {};
    for (int64_t i = 0; i + kLanes <= k; i += kLanes)
      s0 += load<F32x16>(r0 + i) * load<F32x16>(x + i);
    finish(row, s0, r0);
  }
}

ZPLAN_VECTOR_CLONES
void axpyRows(const float *b, int64_t ldb, int64_t k, int64_t columns,
              const float *x, float beta, float *y) {
  // Bands of 128 columns, their sums in eight registers across all of k;
  // then what is left, sixteen or one column at a time. Each column's sum
  // runs over k in order, whatever the band.
  constexpr int kVectors = 8, kBand = kVectors * kLanes;
  auto finish = [&](int64_t column, float sum) {
    y[column] = beta == 0.0f ? sum : beta * y[column] + sum;
  };
  int64_t begin = 0;
  // Wide weights (a vocabulary): a band of 128 columns would read each
  // row's 512 bytes at a stride of the whole row, a page or more apart,
  // which no prefetcher follows. Bands of 2048 columns read 8 KiB of a row
  // at a time, their sums in memory that stays in L1.
  constexpr int64_t kWideBand = 2048;
  if (columns >= 2 * kWideBand) {
    alignas(64) float sums[kWideBand];
    for (; begin + kWideBand <= columns; begin += kWideBand) {
      std::fill(sums, sums + kWideBand, 0.0f);
      int64_t i = 0;
      for (; i + 4 <= k; i += 4) { // four rows per pass over the sums
        const float *r0 = b + i * ldb + begin, *r1 = r0 + ldb, *r2 = r1 + ldb,
                    *r3 = r2 + ldb;
        float x0 = x[i], x1 = x[i + 1], x2 = x[i + 2], x3 = x[i + 3];
        for (int64_t j = 0; j < kWideBand; j += kLanes) {
          F32x16 sum = load<F32x16>(sums + j);
          sum += load<F32x16>(r0 + j) * x0;
          sum += load<F32x16>(r1 + j) * x1;
          sum += load<F32x16>(r2 + j) * x2;
          sum += load<F32x16>(r3 + j) * x3;
          store(sums + j, sum);
        }
      }
      for (; i < k; ++i) {
        const float *row = b + i * ldb + begin;
        float xi = x[i];
        for (int64_t j = 0; j < kWideBand; j += kLanes)
          store(sums + j, load<F32x16>(sums + j) + load<F32x16>(row + j) * xi);
      }
      for (int64_t j = 0; j < kWideBand; ++j)
        finish(begin + j, sums[j]);
    }
  }
  for (; begin + kBand <= columns; begin += kBand) {
    F32x16 sums[kVectors] = {};
    for (int64_t i = 0; i < k; ++i) {
      const float *row = b + i * ldb + begin;
      float xi = x[i];
      for (int v = 0; v < kVectors; ++v)
        sums[v] += load<F32x16>(row + v * kLanes) * xi;
    }
    for (int v = 0; v < kVectors; ++v)
      for (int lane = 0; lane < kLanes; ++lane)
        finish(begin + v * kLanes + lane, sums[v][lane]);
  }
  for (; begin + kLanes <= columns; begin += kLanes) {
    F32x16 sums = {};
    for (int64_t i = 0; i < k; ++i)
      sums += load<F32x16>(b + i * ldb + begin) * x[i];
    for (int lane = 0; lane < kLanes; ++lane)
      finish(begin + lane, sums[lane]);
  }
  for (; begin < columns; ++begin) {
    float sum = 0;
    for (int64_t i = 0; i < k; ++i)
      sum += b[i * ldb + begin] * x[i];
    finish(begin, sum);
  }
}

} // namespace zplan::cpu::detail
