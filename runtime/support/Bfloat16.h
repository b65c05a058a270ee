//===- Bfloat16.h - f32 <-> bf16, the one rounding every backend uses ----===//
//
// Mixed precision (docs/mixed-precision.md) stores parameters' gathered
// copies, and optionally reduced gradients, as bfloat16: the top 16 bits of
// an IEEE f32. Rounding f32 to bf16 is round-to-nearest-even on those bits,
// as torch's `tensor.to(torch.bfloat16)`, `__float2bfloat16_rn` and
// OpenBLAS's conversion do; NaN stays a (quiet) NaN. Widening is exact.
// Written once here and compiled by every backend (as ops/HostDevice.h's
// functions are: __host__ __device__ under nvcc), so that
// the CPU, the CUDA kernels, the emulation and the MPI communicator's bf16
// sum round the same bits. In support, not ops, because the communicator
// (below ops) sums bf16 too.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SUPPORT_BFLOAT16_H
#define ZPLAN_RUNTIME_SUPPORT_BFLOAT16_H

#ifdef __CUDACC__
#define ZPLAN_BF16_FN __host__ __device__ inline
#else
#define ZPLAN_BF16_FN inline
#endif

#include <cstdint>
#include <cstring>

namespace zplan {

/// `x` rounded to the nearest bf16 (ties to even), as its 16 bits.
ZPLAN_BF16_FN uint16_t floatToBf16(float x) {
#ifdef __CUDA_ARCH__
  uint32_t bits = __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
#endif
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu) != 0)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u); // quiet NaN
  uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7FFFu + lsb;
  return static_cast<uint16_t>(bits >> 16);
}

/// The f32 whose top 16 bits are `h` (exact).
ZPLAN_BF16_FN float bf16ToFloat(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
#ifdef __CUDA_ARCH__
  return __uint_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
#endif
}

/// `count` bf16 values widened to f32 into `out` (exact): what the CPU
/// kernels that read bf16 through f32 BLAS or f32 arithmetic read.
ZPLAN_BF16_FN void widenBf16(const uint16_t *bits, int64_t count, float *out) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = bf16ToFloat(bits[i]);
}

/// `count` f32 values rounded to bf16 into `out` (floatToBf16 each).
ZPLAN_BF16_FN void narrowBf16(const float *values, int64_t count,
                              uint16_t *out) {
  for (int64_t i = 0; i < count; ++i)
    out[i] = floatToBf16(values[i]);
}

/// `x` rounded to bf16 and widened back: the f32 value a bf16 copy holds.
ZPLAN_BF16_FN float roundThroughBf16(float x) {
  return bf16ToFloat(floatToBf16(x));
}

} // namespace zplan

#endif // ZPLAN_RUNTIME_SUPPORT_BFLOAT16_H
