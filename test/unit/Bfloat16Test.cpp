//===- Bfloat16Test.cpp - the one f32 <-> bf16 rounding -------------------===//
//
// runtime/support/Bfloat16.h rounds every bf16 copy the runtime makes (the
// mixed-precision gathers and gradient reductions, the cast kernel, the MPI
// bf16 sum). It must be torch's `tensor.to(torch.bfloat16)`: round to
// nearest, ties to even, overflow to infinity, NaN kept a NaN. The known
// values below are IEEE facts (bf16 is f32's top 16 bits); the sweep checks
// nearest-even on every exponent against a double-precision reference.
//
//===----------------------------------------------------------------------===//

#include "runtime/support/Bfloat16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

using namespace zplan;

namespace {

float fromBits(uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

TEST(Bfloat16, KnownValues) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBf16(-2.0f), 0xC000);
  EXPECT_EQ(floatToBf16(0.0f), 0x0000);
  EXPECT_EQ(floatToBf16(-0.0f), 0x8000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(floatToBf16(1.0f + 1.0f / 256), 0x3F80);
  // 1 + 3 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: even is up.
  EXPECT_EQ(floatToBf16(1.0f + 3.0f / 256), 0x3F82);
  // Just above the halfway point rounds up.
  EXPECT_EQ(floatToBf16(fromBits(0x3F808001)), 0x3F81);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::infinity()), 0x7F80);
  // The largest f32 is past bf16's largest finite value: infinity.
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7F80);
  // A NaN whose payload sits in the low bits stays a (quiet) NaN.
  uint16_t nan = floatToBf16(fromBits(0x7F800001));
  EXPECT_EQ(nan & 0x7F80, 0x7F80);
  EXPECT_NE(nan & 0x007F, 0);
  EXPECT_EQ(bf16ToFloat(0x3F80), 1.0f);
  EXPECT_EQ(bf16ToFloat(0x4049), 3.140625f);
}

TEST(Bfloat16, RoundsToNearestEvenOnEveryExponent) {
  for (uint32_t exponent = 1; exponent < 255; ++exponent)
    for (uint32_t low : {0u, 1u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) {
      for (uint32_t mantissaTop : {0u, 1u, 0x7Eu, 0x7Fu}) {
        uint32_t bits = (exponent << 23) | (mantissaTop << 16) | low;
        float x = fromBits(bits);
        float rounded = roundThroughBf16(x);
        float below = fromBits(bits & 0xFFFF0000u);
        // The next bf16 up, one ulp (2^(e - 127 - 7)) above `below`; past
        // the largest finite value it is 2^128, which rounds to infinity.
        double ulp = std::ldexp(1.0, static_cast<int>(exponent) - 127 - 7);
        double above = static_cast<double>(below) + ulp;
        double dBelow = static_cast<double>(x) - below;
        double dAbove = above - static_cast<double>(x);
        bool up = dAbove < dBelow || (dAbove == dBelow && ((bits >> 16) & 1));
        float expected = up ? static_cast<float>(above) : below;
        EXPECT_EQ(rounded, expected) << std::hex << "bits 0x" << bits;
      }
    }
}

} // namespace
