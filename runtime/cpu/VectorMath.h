//===- VectorMath.h - exp, SiLU and sigmoid over f32 arrays (private) -----===//
//
// The transcendental loops that dominated the CPU kernels once the GEMMs
// were split: exp over a softmax's row (the loss over the vocabulary,
// attention, softmax, the KV cache's decode), with the row's max before it
// and the loss gradient's scaling after it, and SiLU and sigmoid over an
// MLP's activations. libm evaluates one element per call; these evaluate
// sixteen at a time with a polynomial, compiled for AVX-512, AVX2 and the
// default x86-64 target (GCC's target_clones) with contraction off, so
// every path computes the same bits: each lane is a fixed sequence of IEEE
// adds and multiplies, on any CPU and at any thread count.
//
// Accuracy (VectorMathTest checks it against libm): f32 exp within an ulp
// of the correctly rounded value (over [-104, 0], 0.85% of the results
// are an ulp off it); SiLU and sigmoid in f32 from that exp, within three
// ulps of the exact value (torch, too, computes them in f32; the scalar
// functors of runtime/ops/ElementwiseOps.h, which f64 tensors and the
// CUDA kernels use, compute them in double).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_VECTORMATH_H
#define ZPLAN_RUNTIME_CPU_VECTORMATH_H

#include <cstdint>

namespace zplan::cpu::detail {

/// y[i] = exp(x[i] - shift) for i in [0, n), the difference taken in f32
/// (as a softmax subtracts its row's max); returns the sum of the y[i] in
/// double. The sum runs in sixteen lanes (element i in lane i % 16), added
/// in lane order at the end: a fixed order, the same for a row wherever
/// the row is computed. `y` may be null when only the sum is wanted.
/// Below -104 the exp is 0 (as libm's is); NaN stays NaN.
double expShiftedSum(const float *x, int64_t n, float shift, float *y);

/// The sum of x[0, n) in double, in sixteen lanes as expShiftedSum's: the
/// norms' row statistics (NormalizationSupport.h).
double sumInDouble(const float *x, int64_t n);

/// The sum of (x[i] - center)^2 for i in [0, n), each term in double, in
/// the same sixteen lanes.
double centeredSquareSum(const float *x, int64_t n, double center);

/// The largest of x[0, n), -inf for n = 0, as a loop of
/// m = std::max(m, x[i]) from -inf finds it: NaNs are passed over (a zero's
/// sign may differ, which no softmax sees). Sixteen lanes, then the lanes.
float maxOf(const float *x, int64_t n);

/// x[i] = x[i] * factor + addend for i in [0, n), in double, rounded once:
/// the loss gradients' last pass over a row.
void scaleInDouble(float *x, int64_t n, double factor, double addend);

/// y[i] = x / (1 + exp(-x)) for i in [0, n), in f32.
void siluF32(const float *x, int64_t n, float *y);

/// y[i] = 1 / (1 + exp(-x)) for i in [0, n), in f32.
void sigmoidF32(const float *x, int64_t n, float *y);

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_VECTORMATH_H
