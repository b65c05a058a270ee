//===- Matmul.cpp - nn.matmul through a GEMM ------------------------------===//
//
// numpy matmul semantics (batch dimensions broadcast, a rank-1 operand is
// promoted and its unit dimension dropped from the result), `transpose_rhs`
// read by the GEMM itself, and the optional bias broadcast to the result:
// the bias is written into the result first and the GEMM accumulates onto
// it (beta = 1), so a Linear layer is one pass over its output.
//
// When the rhs has no batch of its own (a weight shared by every batch
// entry), the lhs batch is contiguous rows of one [B*M, K] matrix and the
// whole product is a single GEMM -- the case that dominates a transformer.
// Otherwise one GEMM runs per result batch entry. The f32 GEMM is zplan's
// own on a CPU with AVX-512 (Gemm.h), OpenBLAS's elsewhere and for f64.
// The operand checks, the shapes and the bias's broadcast are the ops
// layer's (runtime/ops/MatmulOps.h), shared with the cuBLAS kernel.
//
// bf16 operands with an f32 result (mixed precision) are widened to f32
// (exactly) and multiplied by SGEMM: the products of two bf16 values are
// exact in f32 and the sums are f32's, as a tensor core's bf16 GEMM with
// f32 accumulation computes them (in its own order). Debian's OpenBLAS
// 0.3.21 declares cblas_sbgemm in cblas.h but is built without it (the
// library exports no such symbol), so widening is the only way here; the
// widened copies are scratch of the kernel's own, outside the plan's arena.
// With a bf16 result (and bias) the f32 sums land in such a scratch and
// are rounded into the result, once, after the bias.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/StationaryWeights.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/ops/MatmulOps.h"
#include "runtime/support/Bfloat16.h"

#include <cblas.h>

#include <algorithm>
#include <type_traits>

namespace zplan::cpu::detail {

namespace {

/// Row-major C = A * op(B) + beta * C, one BLAS call.
void blasGemm(bool transposeB, int m, int n, int k, const float *a, int lda,
              const float *b, int ldb, float beta, float *c, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans,
              transposeB ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b,
              ldb, beta, c, ldc);
}

void blasGemm(bool transposeB, int m, int n, int k, const double *a, int lda,
              const double *b, int ldb, double beta, double *c, int ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans,
              transposeB ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, lda, b,
              ldb, beta, c, ldc);
}

/// One thread's block of a GEMM: zplan's own kernel (Gemm.h) for f32 where
/// `own`, reading op(B) from `packed` where given (StationaryWeights.h: the
/// block's first panel), else OpenBLAS's.
void blockGemm(bool own, bool streamC, bool transposeB, int m, int n, int k,
               const float *a, int lda, const float *b, int ldb,
               const float *packed, float beta, float *c, int ldc) {
  if (packed)
    sgemmAvx512Packed(m, n, k, a, lda, packed, beta, c, ldc, streamC);
  else if (own)
    sgemmAvx512(transposeB, m, n, k, 1.0f, a, lda, b, ldb, beta, c, ldc,
                streamC);
  else
    blasGemm(transposeB, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

void blockGemm(bool, bool, bool transposeB, int m, int n, int k,
               const double *a, int lda, const double *b, int ldb,
               const double *, double beta, double *c, int ldc) {
  blasGemm(transposeB, m, n, k, a, lda, b, ldb, beta, c, ldc);
}

/// Row-major C = A * op(B) + beta * C (beta 0 or 1) on the kernel threads
/// (Parallel.h): each runs one single-threaded GEMM on its block of C, a
/// band of rows when M >= N (each thread packs all of op(B)), else a band
/// of columns (each packs all of A). The kernel is chosen once, on the
/// whole product's shape: f32 that takesAvx512Gemm runs zplan's AVX-512
/// GEMM (faster than OpenBLAS's here: Gemm.h), anything else OpenBLAS,
/// whose own threads stay at one: they declined to split the 512 x 512 x
/// 512 GEMMs of a Llama layer at all, and spun on the cores the other
/// kernels needed between GEMMs. K is never split: each element is the
/// same chain of multiply-adds over K as in one call, and the bits are the
/// same at any thread count -- CpuKernelThreadsTest checks splits whose
/// boundaries cut the tiles, test/train/threads.test whole training runs.
/// (OpenBLAS promises
/// nothing of the kind; its GEMV, split, did differ: gemv below is
/// zplan's own.) `packed`, where given: op(B) as packB packed it (f32 that
/// takesAvx512Gemm only; StationaryWeights.h), whose bands of columns are
/// whole 96-column panels.
template <typename T>
void gemm(bool transposeB, int m, int n, int k, const T *a, int lda, const T *b,
          int ldb, T beta, T *c, int ldc, const T *packed = nullptr) {
  // A block worth a thread: about 4 MFLOP, some 40 us of one core's GEMM.
  constexpr int64_t kBlockFlops = int64_t(1) << 22;
  bool own = std::is_same_v<T, float> && takesAvx512Gemm(m);
  bool streamC = int64_t(m) * n * int64_t(sizeof(T)) > kStreamedResultBytes;
  if (m >= n) {
    int64_t rowFlops = std::max<int64_t>(2 * int64_t(n) * k, 1);
    parallelFor(m, std::max<int64_t>(kBlockFlops / rowFlops, 1),
                [&](int64_t begin, int64_t end) {
                  blockGemm(own, streamC, transposeB,
                            static_cast<int>(end - begin), n, k,
                            a + begin * lda, lda, b, ldb, packed, beta,
                            c + begin * ldc, ldc);
                });
    return;
  }
  // Bands of `unit` columns: one, or a packed copy's panel.
  int64_t unit = packed ? kPackedPanelColumns : 1;
  int64_t unitFlops = std::max<int64_t>(2 * int64_t(m) * k * unit, 1);
  parallelFor(
      (n + unit - 1) / unit, std::max<int64_t>(kBlockFlops / unitFlops, 1),
      [&](int64_t begin, int64_t end) {
        int64_t first = begin * unit;
        int64_t last = std::min<int64_t>(end * unit, n);
        const T *columns = transposeB ? b + first * ldb : b + first;
        blockGemm(own, streamC, transposeB, m, static_cast<int>(last - first),
                  k, a, lda, columns, ldb,
                  packed ? packed + first * k : nullptr, beta, c + first, ldc);
      });
}

/// y[n] = sum_k x[k] * op(B)[k, n] (+ beta * y): op(B) is B [K, N], or
/// B^T when `transposeB` (B [N, K], a Linear weight). f32 products run on
/// the kernel threads, each a band of y, through VectorMath's loops, whose
/// every element is one fixed sum: OpenBLAS's GEMV is not the same sum for
/// a band of y as for the whole of it (split, it gave other bits in
/// CpuKernelThreadsTest). Memory-bound: each thread streams its rows or
/// columns of B once.
void gemv(bool transposeB, int n, int k, const float *b, int ldb,
          const float *x, float beta, float *y) {
  parallelFor(n, grainFor(k), [&](int64_t begin, int64_t end) {
    if (transposeB)
      dotRows(b + begin * ldb, ldb, end - begin, k, x, beta, y + begin);
    else
      axpyRows(b + begin, ldb, k, end - begin, x, beta, y + begin);
  });
}

void gemv(bool transposeB, int n, int k, const double *b, int ldb,
          const double *x, double beta, double *y) {
  if (transposeB)
    cblas_dgemv(CblasRowMajor, CblasNoTrans, n, k, 1.0, b, ldb, x, 1, beta, y,
                1);
  else
    cblas_dgemv(CblasRowMajor, CblasTrans, k, n, 1.0, b, ldb, x, 1, beta, y, 1);
}

/// The product of `lhs` and `rhs` (call's operands 0 and 1, or their
/// widened copies) into call's result, which has element type T.
/// `stationary`, where given: the rhs's packed copy (runMatmulStationary).
template <typename T>
Status multiply(const KernelCall &call, const MatmulShape &shape, const T *lhs,
                const T *rhs, PackedRhs *stationary = nullptr) {
  const TensorRef &resultRef = call.results[0];
  T *result = resultRef.as<T>();
  int64_t m = shape.m, n = shape.n, k = shape.k;
  int64_t batchCount = product(shape.batch);

  T beta = 0;
  if (call.operands.size() == 3) {
    std::vector<int64_t> strides;
    if (Status status = matmulBiasStrides(call, strides); !status.ok())
      return status;
    stridedCopy(call.operands[2].as<T>(), 0, strides, resultRef.shape, result);
    beta = 1;
  }
  if (m == 0 || n == 0 || batchCount == 0)
    return Status::success();
  if (k == 0) { // an empty sum: the bias, or zeros
    if (beta == 0)
      std::fill(result, result + resultRef.numElements(), T(0));
    return Status::success();
  }
  if (!fitsBlas(m) || !fitsBlas(n) || !fitsBlas(k))
    return call.error("dimensions M=" + std::to_string(m) +
                      " N=" + std::to_string(n) + " K=" + std::to_string(k) +
                      " exceed the BLAS integer range");
  int lda = static_cast<int>(k);
  int ldb = shape.rhsVector ? 1 : static_cast<int>(shape.transposeRhs ? k : n);
  int ldc = static_cast<int>(n);

  // One row against a shared weight (a decoded token's projections): a
  // matrix-vector product. GEMM with M = 1 is several times slower in
  // OpenBLAS than a GEMV on the same bytes, and decode is nothing but these.
  if (product(shape.rhsBatch) == 1 && batchCount * m == 1 && !shape.rhsVector) {
    gemv(shape.transposeRhs, static_cast<int>(n), static_cast<int>(k), rhs, ldb,
         lhs, beta, result);
    return Status::success();
  }

  // A weight shared by the whole batch: the lhs batch entries are the
  // consecutive row blocks of one [batch * M, K] matrix.
  if (product(shape.rhsBatch) == 1 && fitsBlas(batchCount * m)) {
    int rows = static_cast<int>(batchCount * m);
    const T *packed = nullptr;
    if constexpr (std::is_same_v<T, float>)
      if (stationary && takesAvx512Gemm(rows))
        packed = stationary->forRun(
            call.operands[1].weightsVersion->load(std::memory_order_acquire),
            shape.transposeRhs, static_cast<int>(n), static_cast<int>(k), rhs,
            ldb);
    gemm(shape.transposeRhs, rows, static_cast<int>(n), static_cast<int>(k),
         lhs, lda, rhs, ldb, beta, result, ldc, packed);
    return Status::success();
  }

  // One GEMM per result batch entry; strides count whole matrices.
  std::vector<int64_t> lhsStrides, rhsStrides;
  broadcastStrides(shape.lhsBatch, shape.batch, lhsStrides);
  broadcastStrides(shape.rhsBatch, shape.batch, rhsStrides);
  int64_t lhsMatrix = m * k, rhsMatrix = k * n, resultMatrix = m * n;
  forEachRun<2>(shape.batch, {lhsStrides, rhsStrides}, {0, 0},
                [&](int64_t out, const std::array<int64_t, 2> &in,
                    const std::array<int64_t, 2> &step, int64_t count) {
                  for (int64_t j = 0; j < count; ++j)
                    gemm(shape.transposeRhs, static_cast<int>(m),
                         static_cast<int>(n), static_cast<int>(k),
                         lhs + (in[0] + j * step[0]) * lhsMatrix, lda,
                         rhs + (in[1] + j * step[1]) * rhsMatrix, ldb, beta,
                         result + (out + j) * resultMatrix, ldc);
                });
  return Status::success();
}

/// `tensor`'s bf16 elements widened to f32.
std::vector<float> widen(const TensorRef &tensor) {
  std::vector<float> wide(static_cast<size_t>(tensor.numElements()));
  widenBf16(tensor.as<uint16_t>(), tensor.numElements(), wide.data());
  return wide;
}

} // namespace

Status runMatmul(const KernelCall &call) {
  MatmulShape shape;
  if (Status status = checkMatmul(call, shape); !status.ok())
    return status;
  bool rounded = isBf16RoundedProduct(call);
  if (rounded || isBf16Product(call)) {
    std::vector<float> lhs = widen(call.operands[0]);
    std::vector<float> rhs = widen(call.operands[1]);
    if (!rounded)
      return multiply<float>(call, shape, lhs.data(), rhs.data());
    // A bf16 result: the f32 product (onto the widened bias) in a scratch
    // result, then rounded into the bf16 one: one rounding, after the bias.
    std::vector<TensorRef> operands = call.operands;
    std::vector<TensorRef> results = call.results;
    std::vector<float> bias,
        sums(static_cast<size_t>(results[0].numElements()));
    if (operands.size() == 3) {
      bias = widen(operands[2]);
      operands[2].data = bias.data();
      operands[2].dtype = ElementType::F32;
    }
    results[0].data = sums.data();
    results[0].dtype = ElementType::F32;
    KernelCall wide{call.instruction, operands, results};
    if (Status status = multiply<float>(wide, shape, lhs.data(), rhs.data());
        !status.ok())
      return status;
    narrowBf16(sums.data(), static_cast<int64_t>(sums.size()),
               call.results[0].as<uint16_t>());
    return Status::success();
  }
  return dispatchFloatType(call, "lhs", call.operands[0].dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return multiply<T>(call, shape, call.operands[0].as<T>(),
                       call.operands[1].as<T>());
  });
}

Status runMatmulStationary(const KernelCall &call, PackedRhs &rhs) {
  MatmulShape shape;
  if (Status status = checkMatmul(call, shape); !status.ok())
    return status;
  // bf16 products widen their operands per call: nothing to keep.
  if (call.operands[0].dtype != ElementType::F32 ||
      call.operands[1].dtype != ElementType::F32 ||
      call.results[0].dtype != ElementType::F32 ||
      !call.operands[1].weightsVersion)
    return runMatmul(call);
  return multiply<float>(call, shape, call.operands[0].as<float>(),
                         call.operands[1].as<float>(), &rhs);
}

} // namespace zplan::cpu::detail
