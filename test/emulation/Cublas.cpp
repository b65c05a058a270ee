//===- Cublas.cpp - the cuBLAS GEMMs Matmul.cpp calls, as reference loops -===//
//
// cublasGemmEx / cublasGemmStridedBatchedEx with cuBLAS's semantics, so
// that the emulation checks how Matmul.cpp maps row-major tensors onto a
// column-major GEMM: C[m, n] = alpha op(A)[m, k] op(B)[k, n] + beta C,
// element (i, j) of a matrix at i + j * ld; op(X) = X or its transpose;
// batch e at an offset of e * stride elements; alpha and beta read from
// host pointers (CUBLAS_POINTER_MODE_HOST); beta == 0 never reads C (it may
// hold NaN); k == 0 scales C by beta. Argument checks as cuBLAS documents
// them (CUBLAS_STATUS_INVALID_VALUE for negative sizes and short leading
// dimensions; NOT_SUPPORTED for type combinations other than all-32F with
// COMPUTE_32F, all-64F with COMPUTE_64F, or 16BF A and B with a 32F or 16BF
// C and COMPUTE_32F, the four Matmul.cpp uses: bf16 elements are widened
// exactly and summed in f32, and a 16BF C is read widened and written
// rounded to nearest even, once, after beta C is added).
// Sums accumulate in the compute type, in order of k: real cuBLAS may
// order (and, with split-k, block) them differently, within the diff
// test's GEMM tolerance.
//
//===----------------------------------------------------------------------===//

#include "runtime/support/Bfloat16.h"
#include "test/emulation/Prelude.h"

#include <vector>

namespace emu {
namespace {

/// An operand element as the compute type sees it: a bf16 (its bits in a
/// uint16_t) widened exactly.
template <typename T> T widened(T x) { return x; }
inline float widened(uint16_t bits) { return zplan::bf16ToFloat(bits); }

template <typename In, typename T>
void gemm(cublasOperation_t transa, cublasOperation_t transb, int m, int n,
          int k, T alpha, const In *A, int lda, const In *B, int ldb, T beta,
          T *C, int ldc) {
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i) {
      T sum = 0;
      for (int p = 0; p < k; ++p) {
        T a = widened(transa == CUBLAS_OP_N ? A[i + int64_t(p) * lda]
                                            : A[p + int64_t(i) * lda]);
        T b = widened(transb == CUBLAS_OP_N ? B[p + int64_t(j) * ldb]
                                            : B[j + int64_t(p) * ldb]);
        sum += a * b;
      }
      T &c = C[i + int64_t(j) * ldc];
      c = beta == T(0) ? alpha * sum : alpha * sum + beta * c;
    }
}

/// The GEMM into a bf16 C: beta C widened, the f32 result rounded.
void gemmBf16C(cublasOperation_t transa, cublasOperation_t transb, int m, int n,
               int k, float alpha, const uint16_t *A, int lda,
               const uint16_t *B, int ldb, float beta, uint16_t *C, int ldc) {
  std::vector<float> wide(static_cast<size_t>(m) * n);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i)
      wide[i + size_t(j) * m] =
          beta == 0.0f ? 0.0f : zplan::bf16ToFloat(C[i + int64_t(j) * ldc]);
  gemm<uint16_t, float>(transa, transb, m, n, k, alpha, A, lda, B, ldb, beta,
                        wide.data(), m);
  for (int j = 0; j < n; ++j)
    for (int i = 0; i < m; ++i)
      C[i + int64_t(j) * ldc] = zplan::floatToBf16(wide[i + size_t(j) * m]);
}

bool knownOperation(cublasOperation_t op) {
  return op == CUBLAS_OP_N || op == CUBLAS_OP_T;
}

} // namespace

cublasStatus_t gemmStridedBatchedEx(
    cublasHandle_t, cublasOperation_t transa, cublasOperation_t transb, int m,
    int n, int k, const void *alpha, const void *A, cudaDataType_t Atype,
    int lda, long long strideA, const void *B, cudaDataType_t Btype, int ldb,
    long long strideB, const void *beta, void *C, cudaDataType_t Ctype, int ldc,
    long long strideC, int batchCount, cublasComputeType_t compute,
    cublasGemmAlgo_t) {
  if (m < 0 || n < 0 || k < 0 || batchCount < 0 || !knownOperation(transa) ||
      !knownOperation(transb) ||
      lda < std::max(1, transa == CUBLAS_OP_N ? m : k) ||
      ldb < std::max(1, transb == CUBLAS_OP_N ? k : n) || ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  bool f32 = Atype == CUDA_R_32F && Btype == CUDA_R_32F &&
             Ctype == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F;
  bool f64 = Atype == CUDA_R_64F && Btype == CUDA_R_64F &&
             Ctype == CUDA_R_64F && compute == CUBLAS_COMPUTE_64F;
  bool bf16 = Atype == CUDA_R_16BF && Btype == CUDA_R_16BF &&
              Ctype == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F;
  bool bf16C = Atype == CUDA_R_16BF && Btype == CUDA_R_16BF &&
               Ctype == CUDA_R_16BF && compute == CUBLAS_COMPUTE_32F;
  if (!f32 && !f64 && !bf16 && !bf16C)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  for (int e = 0; e < batchCount; ++e) {
    if (bf16C)
      gemmBf16C(transa, transb, m, n, k, *static_cast<const float *>(alpha),
                static_cast<const uint16_t *>(A) + e * strideA, lda,
                static_cast<const uint16_t *>(B) + e * strideB, ldb,
                *static_cast<const float *>(beta),
                static_cast<uint16_t *>(C) + e * strideC, ldc);
    else if (bf16)
      gemm<uint16_t, float>(transa, transb, m, n, k,
                            *static_cast<const float *>(alpha),
                            static_cast<const uint16_t *>(A) + e * strideA, lda,
                            static_cast<const uint16_t *>(B) + e * strideB, ldb,
                            *static_cast<const float *>(beta),
                            static_cast<float *>(C) + e * strideC, ldc);
    else if (f32)
      gemm<float, float>(transa, transb, m, n, k,
                         *static_cast<const float *>(alpha),
                         static_cast<const float *>(A) + e * strideA, lda,
                         static_cast<const float *>(B) + e * strideB, ldb,
                         *static_cast<const float *>(beta),
                         static_cast<float *>(C) + e * strideC, ldc);
    else
      gemm<double, double>(transa, transb, m, n, k,
                           *static_cast<const double *>(alpha),
                           static_cast<const double *>(A) + e * strideA, lda,
                           static_cast<const double *>(B) + e * strideB, ldb,
                           *static_cast<const double *>(beta),
                           static_cast<double *>(C) + e * strideC, ldc);
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t gemmEx(cublasHandle_t handle, cublasOperation_t transa,
                      cublasOperation_t transb, int m, int n, int k,
                      const void *alpha, const void *A, cudaDataType_t Atype,
                      int lda, const void *B, cudaDataType_t Btype, int ldb,
                      const void *beta, void *C, cudaDataType_t Ctype, int ldc,
                      cublasComputeType_t compute, cublasGemmAlgo_t algo) {
  return gemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, Atype,
                              lda, 0, B, Btype, ldb, 0, beta, C, Ctype, ldc, 0,
                              1, compute, algo);
}

} // namespace emu
