//===- VectorMath.h - the CPU kernels' f32 vector loops (private) ---------===//
//
// The loops that dominated the CPU kernels once the GEMMs were split: exp
// over a softmax's row (the loss over the vocabulary, attention, softmax,
// the KV cache's decode), with the row's max before it and the loss
// gradient's scaling after it; SiLU and sigmoid over an MLP's
// activations; the norms' row sums; decode's matrix-vector products.
// libm evaluates one exp per call; these evaluate sixteen lanes at a time
// (exp with a polynomial), compiled for AVX-512, AVX2 and the default
// x86-64 target (GCC's target_clones) with contraction off, so every path
// computes the same bits: each lane is a fixed sequence of IEEE adds and
// multiplies, on any CPU and at any thread count.
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
/// Below -104 the exp is 0 (as libm's is); NaN stays NaN. A block of
/// sixteen that lies wholly below -104 (a causal mask's far side) is
/// written as zeros without evaluating the exp: the same bits.
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

/// y[i] = (x[i] - mean) * inverse * weight[i] + bias[i] for i in [0, n), in
/// double (that order), rounded once: a norm's row (Normalization.cpp).
/// `weight` and `bias` may be null (a factor of 1, an addend of 0).
void normalizeInDouble(const float *x, int64_t n, double mean, double inverse,
                       const float *weight, const float *bias, float *y);

/// y[i] = x / (1 + exp(-x)) for i in [0, n), in f32.
void siluF32(const float *x, int64_t n, float *y);

/// y[i] = 1 / (1 + exp(-x)) for i in [0, n), in f32.
void sigmoidF32(const float *x, int64_t n, float *y);

/// Decode's matrix-vector products (Matmul.cpp), split across the kernel
/// threads by output element: each element's sum has one fixed order, so
/// the bits do not depend on the split (OpenBLAS's GEMV gave other bits
/// for a band of the output than for the whole).
///
/// y[r] = beta * y[r] + sum_i b[r * ldb + i] * x[i] for r in [0, rows)
/// (a Linear weight [rows, k] against x): each row's products in sixteen
/// f32 lanes (element i in lane i % 16), the lanes added in order. beta is
/// 0 (y not read) or a scale of y.
void dotRows(const float *b, int64_t ldb, int64_t rows, int64_t k,
             const float *x, float beta, float *y);

/// y[j] = beta * y[j] + sum_i x[i] * b[i * ldb + j] for j in [0, columns)
/// (x against a weight [k, columns]): each column's sum over i in order.
void axpyRows(const float *b, int64_t ldb, int64_t k, int64_t columns,
              const float *x, float beta, float *y);

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_VECTORMATH_H
