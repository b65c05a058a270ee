//===- MatmulBias.h - matmul's bias broadcast into its result (private) ---===//
//
// Matmul.cpp is host code (cuBLAS calls); the one kernel it needs -- the
// bias broadcast into the result before the GEMM accumulates onto it -- is
// compiled by nvcc in MatmulBias.cu and issued through this function.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_MATMULBIAS_H
#define ZPLAN_RUNTIME_CUDA_MATMULBIAS_H

#include "runtime/cuda/CudaKernels.h"

#include <vector>

namespace zplan::cuda {

/// Issues result[i] = bias[offset(i)] on the call's stream for every
/// element of the matmul's result, the bias (operand 2, T = float, double,
/// or uint16_t for bf16 bits) read with element `strides` aligned to the
/// result's shape (0 along broadcast dimensions, as ops::matmulBiasStrides
/// gives).
template <typename T>
Status writeMatmulBias(const KernelCall &call,
                       const std::vector<int64_t> &strides);

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_MATMULBIAS_H
