//===- MatmulOps.h - nn.matmul's checks and shapes ------------------------===//
//
// Shared validation for every backend to call: every backend multiplies by
// the same numpy rules (the CPU through BLAS, runtime/cpu/Matmul.cpp; CUDA
// through cuBLAS, runtime/cuda/Matmul.cpp), so each checks its operands,
// infers the shapes and reads the bias's broadcast with these functions,
// and their messages are the same words. Both libraries take int extents:
// fitsBlas says whether one does.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_MATMULOPS_H
#define ZPLAN_RUNTIME_OPS_MATMULOPS_H

#include "runtime/ops/KernelCall.h"

#include <cstdint>
#include <vector>

namespace zplan::ops {

/// The shapes of one matmul, after rank-1 promotion.
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  bool transposeRhs = false, rhsVector = false;
  std::vector<int64_t> lhsBatch, rhsBatch, batch;
};

/// Arity (lhs, rhs, bias?), element types (all the lhs's -- bf16 too, see
/// isBf16RoundedProduct -- or bf16 lhs and rhs with an f32 result and bias:
/// see isBf16Product) and shapes (numpy
/// batch broadcasting, rank-1 promotion, transpose_rhs, the result's
/// shape); fills `shape`. The element type itself is the caller's to
/// dispatch on (f32 and f64).
Status checkMatmul(const KernelCall &call, MatmulShape &shape);

/// Mixed precision (docs/mixed-precision.md): bf16 operands multiplied
/// exactly and accumulated in f32 into an f32 result (after checkMatmul).
bool isBf16Product(const KernelCall &call);

/// Whether `call` (checked by checkMatmul) multiplies bf16 lhs and rhs into
/// a bf16 result (and takes a bf16 bias): the f32 sums, bias included,
/// rounded to bf16 once, to nearest even -- mixed precision's Linear
/// layers, as cuBLAS's GEMM with a bf16 C returns them.
bool isBf16RoundedProduct(const KernelCall &call);

/// The element strides with which the bias operand is read as it
/// broadcasts to the result's shape.
Status matmulBiasStrides(const KernelCall &call, std::vector<int64_t> &strides);

/// Whether `value` fits the BLAS integer (int) GEMMs take.
bool fitsBlas(int64_t value);

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_MATMULOPS_H
