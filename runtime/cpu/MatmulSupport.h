//===- MatmulSupport.h - the rules of nn.matmul both backends read --------===//
//
// The CPU kernel (Matmul.cpp, BLAS) and the CUDA kernel
// (runtime/cuda/Matmul.cpp, cuBLAS) multiply by the same numpy rules, so
// they check their operands, infer the shapes and read the bias's
// broadcast with these functions, and their messages are the same words.
// Defined in Matmul.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_MATMULSUPPORT_H
#define ZPLAN_RUNTIME_CPU_MATMULSUPPORT_H

#include "runtime/cpu/KernelSupport.h"

namespace zplan::cpu::detail {

/// The shapes of one matmul, after rank-1 promotion.
struct MatmulShape {
  int64_t m = 0, n = 0, k = 0;
  bool transposeRhs = false, rhsVector = false;
  std::vector<int64_t> lhsBatch, rhsBatch, batch;
};

/// Arity (lhs, rhs, bias?), element types (all the lhs's) and shapes
/// (numpy batch broadcasting, rank-1 promotion, transpose_rhs, the
/// result's shape); fills `shape`. The element type itself is the caller's
/// to dispatch on (f32 and f64).
Status checkMatmul(const KernelCall &call, MatmulShape &shape);

/// The element strides with which the bias operand is read as it
/// broadcasts to the result's shape.
Status matmulBiasStrides(const KernelCall &call, std::vector<int64_t> &strides);

/// Whether `value` fits the BLAS integer (int) GEMMs take.
bool fitsBlas(int64_t value);

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_MATMULSUPPORT_H
