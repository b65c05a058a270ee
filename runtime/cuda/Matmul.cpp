//===- Matmul.cpp - nn.matmul through cuBLAS ------------------------------===//
//
// The CUDA twin of runtime/cpu/Matmul.cpp, with the same rules read by the
// same functions (runtime/ops/MatmulOps.h): numpy batch broadcasting, rank-1
// promotion, `transpose_rhs` read by the GEMM itself, and the optional bias
// written into the result first (MatmulBias.cu) so that the GEMM
// accumulates onto it (beta = 1).
//
// cuBLAS is column-major; a row-major [R, C] matrix is its transpose seen
// column-major, so the row-major C = A op(B) is issued as the column-major
// C^T = op(B)^T A^T: the operands swap, and the rhs's transpose flag says
// whether cuBLAS transposes it.
//
// How many GEMMs:
//  - the rhs has no batch of its own (a weight shared by every batch entry,
//    the case that dominates a transformer): the lhs batch is the
//    consecutive row blocks of one [batch * M, K] matrix, one GEMM;
//  - otherwise the batch is walked as runs of entries at uniform strides
//    (ops::StridedWalk merges what it can): one strided-batched
//    GEMM per run -- a single call when the batch dimensions are uniform
//    (attention-style [B, H] batches), a broadcast operand stepping with
//    stride 0 inside a run.
//
// bf16 operands with an f32 result (mixed precision, docs/mixed-precision.md)
// are one GemmEx with A and B in CUDA_R_16BF, C in CUDA_R_32F and
// CUBLAS_COMPUTE_32F: tensor cores, exact products, f32 accumulation -- the
// CPU kernel's widened SGEMM, summed in another order. With a bf16 result
// (and bias) C is CUDA_R_16BF too: cuBLAS adds the bias written into C to
// the f32 sums and rounds once, as the CPU kernel does after its SGEMM.
//
// Precision: CUBLAS_COMPUTE_32F for f32 (64F for f64), not
// CUBLAS_COMPUTE_32F_FAST_TF32: the CPU oracle is plain fp32 and the diff
// test's tolerance is fp32's. cuBLAS could still round to TF32 if the
// handle's math mode allowed it (CUBLAS_TF32_TENSOR_OP_MATH); the backend
// leaves it at the default, which does not. alpha and beta are passed by
// host pointer: the handle is in the default CUBLAS_POINTER_MODE_HOST.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/MatmulBias.h"
#include "runtime/ops/MatmulOps.h"
#include "runtime/ops/StridedWalk.h"

#include <algorithm>
#include <climits>

namespace zplan::cuda {

using namespace zplan::ops;

namespace {

/// cuBLAS's names for element type T, its accumulation, and the type of
/// alpha and beta (uint16_t: the bits of a bf16, accumulated in f32).
template <typename T> struct GemmTypes;
template <> struct GemmTypes<uint16_t> {
  static constexpr cudaDataType_t data = CUDA_R_16BF;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using Scalar = float;
};
template <> struct GemmTypes<float> {
  static constexpr cudaDataType_t data = CUDA_R_32F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  using Scalar = float;
};
template <> struct GemmTypes<double> {
  static constexpr cudaDataType_t data = CUDA_R_64F;
  static constexpr cublasComputeType_t compute = CUBLAS_COMPUTE_64F;
  using Scalar = double;
};

/// One matmul's GEMM arguments in cuBLAS's column-major terms: C^T [N, M] =
/// op(B)^T [N, K] A^T [K, M], leading dimensions those of the row-major
/// operands.
struct Gemm {
  cublasOperation_t rhsOperation = CUBLAS_OP_N;
  int m = 0, n = 0, k = 0;
  int lda = 0, ldb = 0, ldc = 0;
};

/// `count` GEMMs of `gemm`'s extents, entry j reading lhs + j * lhsStride,
/// rhs + j * rhsStride and writing result + j * resultStride (elements).
/// Operands of type In, result (and accumulation) of type T.
template <typename In, typename T>
Status issueGemms(const KernelCall &call, const Gemm &gemm, const In *lhs,
                  int64_t lhsStride, const In *rhs, int64_t rhsStride,
                  typename GemmTypes<T>::Scalar beta, T *result,
                  int64_t resultStride, int64_t count) {
  using Types = GemmTypes<T>;
  const typename Types::Scalar alpha = 1;
  constexpr cudaDataType_t in = GemmTypes<In>::data;
  if (count == 1)
    return checkCublas(call,
                       cublasGemmEx(call.device.cublas, gemm.rhsOperation,
                                    CUBLAS_OP_N, gemm.n, gemm.m, gemm.k, &alpha,
                                    rhs, in, gemm.ldb, lhs, in, gemm.lda, &beta,
                                    result, Types::data, gemm.ldc,
                                    Types::compute, CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx");
  // cuBLAS counts a batch in an int; a longer run is issued in pieces.
  for (int64_t first = 0; first < count; first += INT_MAX) {
    int batch = static_cast<int>(std::min<int64_t>(count - first, INT_MAX));
    if (Status status = checkCublas(
            call,
            cublasGemmStridedBatchedEx(
                call.device.cublas, gemm.rhsOperation, CUBLAS_OP_N, gemm.n,
                gemm.m, gemm.k, &alpha, rhs + first * rhsStride, in, gemm.ldb,
                rhsStride, lhs + first * lhsStride, in, gemm.lda, lhsStride,
                &beta, result + first * resultStride, Types::data, gemm.ldc,
                resultStride, batch, Types::compute, CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx");
        !status.ok())
      return status;
  }
  return Status::success();
}

template <typename In, typename T>
Status multiply(const KernelCall &call, const MatmulShape &shape) {
  const TensorRef &resultRef = call.host.results[0];
  const In *lhs = call.host.operands[0].as<In>();
  const In *rhs = call.host.operands[1].as<In>();
  T *result = resultRef.as<T>();
  int64_t m = shape.m, n = shape.n, k = shape.k;
  int64_t batchCount = product(shape.batch);

  typename GemmTypes<T>::Scalar beta = 0;
  if (call.host.operands.size() == 3) {
    std::vector<int64_t> strides;
    if (Status status = matmulBiasStrides(call.host, strides); !status.ok())
      return status;
    if (Status status = writeMatmulBias<T>(call, strides); !status.ok())
      return status;
    beta = 1;
  }
  if (m == 0 || n == 0 || batchCount == 0)
    return Status::success();
  if (k == 0) { // an empty sum: the bias, or zeros
    if (beta == 0)
      return checkCuda(call,
                       cudaMemsetAsync(result, 0,
                                       resultRef.numElements() * sizeof(T),
                                       call.device.stream),
                       "cudaMemsetAsync");
    return Status::success();
  }
  if (!fitsBlas(m) || !fitsBlas(n) || !fitsBlas(k))
    return call.error("dimensions M=" + std::to_string(m) +
                      " N=" + std::to_string(n) + " K=" + std::to_string(k) +
                      " exceed the BLAS integer range");
  Gemm gemm;
  gemm.rhsOperation = shape.transposeRhs ? CUBLAS_OP_T : CUBLAS_OP_N;
  gemm.m = static_cast<int>(m);
  gemm.n = static_cast<int>(n);
  gemm.k = static_cast<int>(k);
  gemm.lda = static_cast<int>(k);
  // A rank-1 rhs is a [K, 1] column: its leading dimension is 1 (= N).
  gemm.ldb = shape.rhsVector ? 1 : static_cast<int>(shape.transposeRhs ? k : n);
  gemm.ldc = static_cast<int>(n);

  // A weight shared by the whole batch: one [batch * M, K] GEMM.
  if (product(shape.rhsBatch) == 1 && fitsBlas(batchCount * m)) {
    gemm.m = static_cast<int>(batchCount * m);
    return issueGemms<In, T>(call, gemm, lhs, 0, rhs, 0, beta, result, 0, 1);
  }

  // Runs of batch entries at uniform strides, one strided-batched GEMM
  // each; strides count whole matrices.
  std::vector<int64_t> lhsStrides, rhsStrides;
  broadcastStrides(shape.lhsBatch, shape.batch, lhsStrides);
  broadcastStrides(shape.rhsBatch, shape.batch, rhsStrides);
  int64_t lhsMatrix = m * k, rhsMatrix = k * n, resultMatrix = m * n;
  Status status = Status::success();
  forEachRun<2>(shape.batch, {lhsStrides, rhsStrides}, {0, 0},
                [&](int64_t out, const std::array<int64_t, 2> &in,
                    const std::array<int64_t, 2> &step, int64_t count) {
                  if (!status.ok())
                    return;
                  status = issueGemms<In, T>(
                      call, gemm, lhs + in[0] * lhsMatrix, step[0] * lhsMatrix,
                      rhs + in[1] * rhsMatrix, step[1] * rhsMatrix, beta,
                      result + out * resultMatrix, resultMatrix, count);
                });
  return status;
}

} // namespace

Status runMatmul(const KernelCall &call) {
  MatmulShape shape;
  if (Status status = checkMatmul(call.host, shape); !status.ok())
    return status;
  if (isBf16Product(call.host))
    return multiply<uint16_t, float>(call, shape);
  if (isBf16RoundedProduct(call.host))
    return multiply<uint16_t, uint16_t>(call, shape);
  return dispatchFloatType(call.host, "lhs", call.host.operands[0].dtype,
                           [&](auto tag) {
                             using T = typename decltype(tag)::type;
                             return multiply<T, T>(call, shape);
                           });
}

} // namespace zplan::cuda
