//===- VectorMathTest.cpp - the vector exp, SiLU and sigmoid --------------===//
//
// runtime/cpu/VectorMath.h against libm: the f32 exp within an ulp of the
// correctly rounded value (std::exp in double, rounded once) over every
// 16th f32 in [-104, 88.7], 0 below -104, NaN for NaN; the sum in its
// documented lane order; the row max and the loss gradients' scaling as
// their scalar loops; SiLU and sigmoid within three ulps of their double
// formulas over 2^24 f32 spread over every exponent; decode's GEMV loops
// one fixed sum per output element, whatever band of the output a call
// computes.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/VectorMath.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace zplan::cpu::detail;

namespace {

uint32_t bitsOf(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
}

float floatOf(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
}

/// Distance in ulps between two finite floats of one sign.
int64_t ulpsApart(float a, float b) {
  return std::llabs(static_cast<int64_t>(bitsOf(a)) -
                    static_cast<int64_t>(bitsOf(b)));
}

/// Every `step`-th f32 from `from` towards `to` (same sign, |to| > |from|).
std::vector<float> floatsBetween(float from, float to, uint32_t step) {
  std::vector<float> values;
  for (uint32_t bits = bitsOf(from); bits <= bitsOf(to); bits += step)
    values.push_back(floatOf(bits));
  return values;
}

void expectExpWithinAnUlp(const std::vector<float> &x) {
  std::vector<float> y(x.size());
  expShiftedSum(x.data(), static_cast<int64_t>(x.size()), 0.0f, y.data());
  int64_t worst = 0;
  float worstAt = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    float expected = static_cast<float>(std::exp(static_cast<double>(x[i])));
    int64_t apart = ulpsApart(expected, y[i]);
    if (apart > worst) {
      worst = apart;
      worstAt = x[i];
    }
  }
  EXPECT_LE(worst, 1) << "exp(" << worstAt << ")";
}

} // namespace

TEST(VectorMath, ExpOfNegativeFloatsIsWithinAnUlp) {
  // -0 down to -104: the softmax's shifted scores, subnormal results too.
  expectExpWithinAnUlp(floatsBetween(-0.0f, -104.0f, 16));
}

TEST(VectorMath, ExpOfPositiveFloatsIsWithinAnUlp) {
  expectExpWithinAnUlp(floatsBetween(0.0f, 88.72f, 16));
}

TEST(VectorMath, ExpOfTheEdges) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> x = {-104.5f, -1e30f, std::numeric_limits<float>::lowest(),
                          -inf,    89.0f,  inf,
                          nan,     0.0f,   -103.9f};
  std::vector<float> y(x.size());
  expShiftedSum(x.data(), static_cast<int64_t>(x.size()), 0.0f, y.data());
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(bitsOf(y[i]), 0u) << "exp(" << x[i] << ")";
  EXPECT_EQ(y[4], inf);
  EXPECT_EQ(y[5], inf);
  EXPECT_TRUE(std::isnan(y[6]));
  EXPECT_EQ(y[7], 1.0f);
  EXPECT_GT(y[8], 0.0f); // subnormal, not flushed
  EXPECT_EQ(y[8], static_cast<float>(std::exp(-103.9)));
}

TEST(VectorMath, SumRunsInSixteenLanesAddedInOrder) {
  std::vector<float> x(16 * 7 + 5);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(static_cast<float>(i)) * 30.0f;
  std::vector<float> whole(x.size());
  expShiftedSum(x.data(), static_cast<int64_t>(x.size()), 30.0f, whole.data());
  for (int64_t n : {1, 15, 16, 17, 16 * 7 + 5}) {
    std::vector<float> y(static_cast<size_t>(n));
    double sum = expShiftedSum(x.data(), n, 30.0f, y.data());
    double lanes[16] = {};
    for (int64_t i = 0; i < n; ++i) {
      // Each element's exp is the same wherever the row ends.
      EXPECT_EQ(bitsOf(y[i]), bitsOf(whole[i])) << "n = " << n;
      lanes[i % 16] += y[i];
    }
    double expected = 0;
    for (double lane : lanes)
      expected += lane;
    EXPECT_EQ(sum, expected) << "n = " << n;
    // Without somewhere to keep the exps, the same sum.
    EXPECT_EQ(expShiftedSum(x.data(), n, 30.0f, nullptr), sum) << "n = " << n;
  }
}

TEST(VectorMath, LanesBelowExpsZeroGiveZerosAndTheSameSum) {
  // A causal row: its first 40 scores, then the mask's far side. Whole
  // blocks of sixteen lie below exp's zero (expShiftedSum passes over
  // them); the block of elements 32-47 is split. The masked elements' exps
  // must be +0, and the others' exps and the sum those of the 40 scores
  // alone.
  const float inf = std::numeric_limits<float>::infinity();
  for (float masked : {-1e30f, -inf, -200.0f}) {
    SCOPED_TRACE("masked " + std::to_string(masked));
    std::vector<float> x(16 * 8);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = i < 40 ? std::sin(static_cast<float>(i)) * 20.0f : masked;
    std::vector<float> y(x.size(), 7.0f);
    double sum = expShiftedSum(x.data(), static_cast<int64_t>(x.size()), 30.0f,
                               y.data());
    for (size_t i = 40; i < x.size(); ++i)
      EXPECT_EQ(bitsOf(y[i]), 0u) << "element " << i;
    // The same scores as a row that stops at the masked side: the same
    // exps, the same sum (adding +0 changes no bit).
    std::vector<float> head(40);
    double headSum = expShiftedSum(x.data(), 40, 30.0f, head.data());
    for (size_t i = 0; i < 40; ++i)
      EXPECT_EQ(bitsOf(y[i]), bitsOf(head[i])) << "element " << i;
    EXPECT_EQ(sum, headSum);
    EXPECT_EQ(
        expShiftedSum(x.data(), static_cast<int64_t>(x.size()), 30.0f, nullptr),
        sum);
  }
  // A NaN among masked lanes is not passed over.
  std::vector<float> x(16, -1e30f);
  x[9] = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> y(16);
  EXPECT_TRUE(std::isnan(expShiftedSum(x.data(), 16, 0.0f, y.data())));
  EXPECT_TRUE(std::isnan(y[9]));
}

/// centeredSquareSum is the sum of (x - center)^2 in double, element i in
/// lane i % 16, the lanes added in order: with a center of +0 (rms_norm's
/// rows, which skip the subtraction) as with any other.
TEST(VectorMath, CenteredSquareSumIsTheLaneFormula) {
  for (int64_t n = 0; n <= 40; ++n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      x[i] = i % 7 == 2 ? -0.0f : std::sin(static_cast<float>(i)) * 5.0f;
    for (double center : {0.3, 0.0, -0.0}) {
      double lanes[16] = {};
      for (int64_t i = 0; i < n; ++i) {
        double centered = static_cast<double>(x[i]) - center;
        lanes[i % 16] += centered * centered;
      }
      double expected = 0;
      for (double lane : lanes)
        expected += lane;
      double got = centeredSquareSum(x.data(), n, center);
      EXPECT_EQ(std::memcmp(&got, &expected, sizeof(double)), 0)
          << "n = " << n << ", center " << center << ": " << got << " vs "
          << expected;
    }
  }
}

/// With a mean of +0 (rms_norm's rows) the loop skips the subtraction;
/// -0, which turns a -0 element into +0, does not. Elements of -0 are in
/// the rows to tell.
TEST(VectorMath, NormalizeInDoubleIsTheScalarFormula) {
  for (int64_t n = 0; n <= 21; ++n) {
    std::vector<float> x(static_cast<size_t>(n)), weight(x.size()),
        bias(x.size());
    for (int64_t i = 0; i < n; ++i) {
      x[i] = i % 5 == 3 ? -0.0f : std::sin(static_cast<float>(i)) * 3.0f;
      weight[i] = 0.5f + std::cos(static_cast<float>(i)) * 0.25f;
      bias[i] = static_cast<float>(i) * 0.125f - 1.0f;
    }
    const double inverse = 1.7;
    for (double mean : {0.3, 0.0, -0.0})
      for (int variant = 0; variant < 3; ++variant) {
        const float *w = variant >= 1 ? weight.data() : nullptr;
        const float *b = variant == 2 ? bias.data() : nullptr;
        std::vector<float> y(static_cast<size_t>(n) + 1, 9.0f);
        normalizeInDouble(x.data(), n, mean, inverse, w, b, y.data());
        for (int64_t i = 0; i < n; ++i) {
          double expected = (x[i] - mean) * inverse;
          if (w)
            expected *= w[i];
          if (b)
            expected += b[i];
          EXPECT_EQ(bitsOf(y[i]), bitsOf(static_cast<float>(expected)))
              << "n = " << n << ", element " << i << ", variant " << variant
              << ", mean " << mean;
        }
        EXPECT_EQ(y[n], 9.0f) << "past the end, n = " << n;
      }
  }
}

/// How far `got` lies from `exact`, in ulps of the f32 nearest `exact`
/// (an ulp below FLT_MIN being the smallest subnormal's).
double ulpsFrom(float got, double exact) {
  float nearest = static_cast<float>(exact);
  int exponent = std::max(std::ilogb(nearest), -126);
  if (nearest == 0)
    exponent = -126;
  return std::abs(static_cast<double>(got) - exact) /
         std::ldexp(1.0, exponent - 23);
}

TEST(VectorMath, SiluAndSigmoidAreWithinThreeUlps) {
  // Every 256th bit pattern: 2^24 floats over every exponent and both
  // signs, infinities and NaNs included; then lengths that leave a tail.
  std::vector<float> x;
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 256)
    x.push_back(floatOf(static_cast<uint32_t>(bits)));
  for (float special :
       {0.0f, -0.0f, std::numeric_limits<float>::infinity(),
        -std::numeric_limits<float>::infinity(),
        std::numeric_limits<float>::denorm_min(), -88.8f, -100.0f, -103.9f})
    x.push_back(special);
  std::vector<float> silu(x.size()), sigmoid(x.size());
  siluF32(x.data(), static_cast<int64_t>(x.size()), silu.data());
  sigmoidF32(x.data(), static_cast<int64_t>(x.size()), sigmoid.data());
  int64_t failures = 0;
  auto expectNear = [&](const char *name, float input, float got,
                        double exact) {
    if (std::isnan(exact)   ? std::isnan(got)
        : std::isinf(exact) ? got == exact
                            : ulpsFrom(got, exact) <= 3.0)
      return;
    // Where exp(x) is subnormal (x < -87.3), silu's x * exp(x) carries
    // exp's absolute error, up to |x| <= 104 of the smallest subnormals.
    if (std::abs(got - exact) <= std::ldexp(1.0, -142))
      return;
    ADD_FAILURE() << name << "(" << input << ") = " << got << ", not " << exact
                  << " (" << ulpsFrom(got, exact) << " ulps)";
    ++failures;
  };
  for (size_t i = 0; i < x.size() && failures <= 10; ++i) {
    // The scalar functors' formulas, in double.
    double wide = x[i];
    expectNear("silu", x[i], silu[i], wide / (1.0 + std::exp(-wide)));
    expectNear("sigmoid", x[i], sigmoid[i], 1.0 / (1.0 + std::exp(-wide)));
  }
  // Below -88.7, exp(-x) overflows f32; the lanes take exp(x) instead.
  EXPECT_LT(silu[x.size() - 3], 0.0f);
  EXPECT_GT(sigmoid[x.size() - 2], 0.0f);
  for (int64_t n = 1; n <= 17; ++n) {
    std::vector<float> tail(static_cast<size_t>(n) + 1, -7.0f);
    siluF32(x.data() + 1000, n, tail.data());
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(bitsOf(tail[i]), bitsOf(silu[1000 + i])) << n;
    EXPECT_EQ(tail[n], -7.0f) << "wrote past the end, n = " << n;
  }
}

TEST(VectorMath, MaxOfIsTheScalarLoopsMax) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(maxOf(nullptr, 0), -inf);
  for (int64_t n = 1; n <= 70; ++n) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i)
      x[i] = std::cos(static_cast<float>(i * n)) * 50.0f;
    // The largest element in the middle, in the tail, then last; NaNs and
    // -inf about.
    x[static_cast<size_t>(n / 2)] = 60.0f + static_cast<float>(n);
    if (n > 3)
      x[1] = nan;
    if (n > 5)
      x[4] = -inf;
    float expected = -inf;
    for (float value : x)
      expected = std::max(expected, value);
    EXPECT_EQ(maxOf(x.data(), n), expected) << "n = " << n;
    x.back() = 1000.0f;
    EXPECT_EQ(maxOf(x.data(), n), 1000.0f) << "n = " << n;
  }
}

TEST(VectorMath, ScaleInDoubleIsTheScalarFormula) {
  for (double addend : {0.0, -0.0, 0.25}) {
    for (int64_t n = 0; n <= 20; ++n) {
      std::vector<float> x(static_cast<size_t>(n) + 1, 9.0f);
      for (int64_t i = 0; i < n; ++i)
        x[i] = i % 5 == 0 ? 0.0f : std::sin(static_cast<float>(i)) * 3.0f;
      std::vector<float> expected = x;
      for (int64_t i = 0; i < n; ++i)
        expected[i] =
            static_cast<float>(static_cast<double>(x[i]) * -0.3 + addend);
      scaleInDouble(x.data(), n, -0.3, addend);
      for (int64_t i = 0; i <= n; ++i) // x[n] is past the end: untouched
        EXPECT_EQ(bitsOf(x[i]), bitsOf(expected[i]))
            << "n = " << n << ", element " << i << ", addend " << addend;
    }
  }
}

TEST(VectorMath, GemvLoopsAreOneSumPerElementWhateverTheBand) {
  // Widths that take each path of axpyRows (bands of 2048, of 128, of 16,
  // single columns) and of dotRows (four rows, then one; k with a tail).
  std::mt19937 generator(7);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t k : {1, 37, 64}) {
    for (int64_t width : {1, 5, 16, 150, 300, 4096 + 2048 + 129}) {
      SCOPED_TRACE("k " + std::to_string(k) + " width " +
                   std::to_string(width));
      std::vector<float> b(static_cast<size_t>(k * width)), x(k);
      for (float &value : b)
        value = uniform(generator);
      for (float &value : x)
        value = uniform(generator);
      // x [k] against b [k, width], and b^T [width, k] against x.
      std::vector<float> columns(width), rows(width);
      axpyRows(b.data(), width, k, width, x.data(), 0.0f, columns.data());
      std::vector<float> transposed(b.size());
      for (int64_t i = 0; i < k; ++i)
        for (int64_t j = 0; j < width; ++j)
          transposed[j * k + i] = b[i * width + j];
      dotRows(transposed.data(), k, width, k, x.data(), 0.0f, rows.data());
      for (int64_t j = 0; j < width; ++j) {
        double exact = 0;
        for (int64_t i = 0; i < k; ++i)
          exact += static_cast<double>(b[i * width + j]) * x[i];
        EXPECT_NEAR(columns[j], exact, 1e-5) << j;
        EXPECT_NEAR(rows[j], exact, 1e-5) << j;
      }
      // Any band of the output, computed alone, has the same bits.
      for (int64_t begin : {int64_t(0), width / 3, width - 1}) {
        int64_t end = std::min(width, begin + width / 2 + 1);
        std::vector<float> band(static_cast<size_t>(end - begin), 2.0f);
        axpyRows(b.data() + begin, width, k, end - begin, x.data(), 1.0f,
                 band.data());
        for (int64_t j = begin; j < end; ++j)
          EXPECT_EQ(bitsOf(band[j - begin]), bitsOf(2.0f + columns[j])) << j;
        dotRows(transposed.data() + begin * k, k, end - begin, k, x.data(),
                0.0f, band.data());
        for (int64_t j = begin; j < end; ++j)
          EXPECT_EQ(bitsOf(band[j - begin]), bitsOf(rows[j])) << j;
      }
    }
  }
}
