//===- Gemm.h - zplan's f32 GEMM for AVX-512 CPUs (private) ---------------===//
//
// The f32 GEMMs of a transformer's forward (its projections, the MLP, the
// LM head) are nine tenths of a step on CPU ranks. On this project's AMD
// Zen 4 machine (one core's FMA peak: 117 GFLOP/s) this kernel runs them
// at 1.01-1.10x OpenBLAS's SGEMM (bench/gemm_bench.cpp), and the forwards
// of bench/train_vs_torch.py at 1.08-1.12x (bench/README.md). Matmul.cpp
// and attention call it instead of OpenBLAS where the CPU has AVX-512 and
// the product has rows enough.
//
// The shape of it, BLIS's without the cache blocking these sizes did not
// need (blocking K or M measured slower): op(B) is copied, 96 columns
// at a time, into a panel of the calling thread's own ([K][96],
// contiguous), and a 4 x 96 register tile of C (24 zmm accumulators) runs
// down the rows of A against it, reading A in place (one broadcast per
// row and k). 4 x 96 rather than 12 x 32: each element of A read feeds 96
// columns, and A and C are what come from L3 or memory in a forward (up
// to 8% faster there in a standalone comparison of the tile shapes; alike
// when everything is in cache). K is not blocked:
// each element of C is one chain of fused multiply-adds over k = 0 .. K-1
// in order, starting from C or from 0 -- the same chain whichever rows and
// columns a call covers, so the kernel threads' bands give the same bits
// as one call (GemmTest, CpuKernelThreadsTest). A result larger than a
// core's caches is stored with non-temporal stores: nothing reads it soon
// (the LM head's logits), and it skips the read a cached store does first.
// The next panel's op(B) is prefetched into L2 while the current one
// runs (1% of the large forward, whose weights stream from memory);
// prefetching A's and C's next rows measured nothing. A weight that stays
// the same across runs is packed once instead (packB, then
// sgemmAvx512Packed: StationaryWeights.h), as onnxruntime's MLAS packs its
// constant weights at load: 1-7% faster on the forward's products in
// gemm_bench (bench/README.md), the transposes and stores of a copy per
// call saved.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_GEMM_H
#define ZPLAN_RUNTIME_CPU_GEMM_H

#include <cstdint>

namespace zplan::cpu::detail {

/// Whether Matmul.cpp's f32 GEMMs run sgemmAvx512: the CPU has AVX-512 F,
/// and the environment does not set ZPLAN_GEMM=openblas (which keeps
/// OpenBLAS's SGEMM, for comparing the two: bench/train_vs_torch.py).
bool useAvx512Gemm();

/// The fewest rows (M) for which Matmul.cpp and attention take sgemmAvx512:
/// below it, copying each panel of op(B) for so few rows costs more than
/// it saves, and OpenBLAS stays. Decided on a whole product's M, never a
/// thread's band of it, so that every band runs the same kernel.
constexpr int kAvx512GemmMinRows = 12;

/// Whether an f32 product of `m` rows runs sgemmAvx512: the CPU has it
/// (useAvx512Gemm) and m >= kAvx512GemmMinRows.
inline bool takesAvx512Gemm(int64_t m) {
  return m >= kAvx512GemmMinRows && useAvx512Gemm();
}

/// A result larger than this is worth storing past the caches (`streamC`
/// below): the LM head's logits, 16 MiB for 512 rows of an 8192
/// vocabulary, which nothing reads soon.
constexpr int64_t kStreamedResultBytes = int64_t(4) << 20;

/// A product computed in blocks of rows that each reach only part of C
/// and of K: attention's under a causal mask, whose row r's scores past
/// column r are never needed. Rows [rowBlock b, rowBlock (b + 1)) compute
/// (and write) only C's columns below columns[b], each a sum over
/// k < depth[b] only; a null `columns` or `depth` is N or K for every
/// block. rowBlock is a multiple of 4 (the register tile's rows); a column
/// past N or a depth past K is cut to it.
struct RaggedRows {
  int rowBlock = 0;
  const int *columns = nullptr;
  const int *depth = nullptr;
};

/// Row-major C = alpha * A * op(B) + beta * C, for A [M, K] (row stride
/// lda), op(B) = B [K, N] (row stride ldb), or B^T with B [N, K] when
/// `transposeB`, and C [M, N] (row stride ldc). `beta` is 0 (C is not
/// read) or 1, and 1 only with `alpha` 1 (the sums then start from C);
/// otherwise each sum starts from 0 and is multiplied by alpha once, at
/// the end. Runs on the calling thread. `streamC`: store C with
/// non-temporal stores (where a row is 64-byte aligned); for a C larger
/// than the caches. `ragged`, where given: the parts of C and K each block
/// of rows computes (RaggedRows). Only to be called where useAvx512Gemm().
void sgemmAvx512(bool transposeB, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc, bool streamC,
                 const RaggedRows *ragged = nullptr);

/// The floats packB writes for an op(B) of `n` columns and depth `k`: its
/// panels of 96 columns, [K][96] each, one after another.
int64_t packedBFloats(int n, int k);

/// op(B) (as sgemmAvx512 takes it) packed into `packed`, 64-byte aligned
/// and packedBFloats(n, k) long: every panel a call of sgemmAvx512 would
/// pack, in column order. A weight that stays the same across runs is
/// packed once (StationaryWeights.h) instead of by every call.
void packB(bool transposeB, int n, int k, const float *b, int ldb,
           float *packed);

/// C = A * op(B) + beta * C (beta 0 or 1) from an op(B) that packB packed:
/// `packed` points at the panel of C's column 0 (a column band starts at a
/// multiple of 96 of op(B)'s columns), and `n` counts the columns from
/// there. The same tiles on the same panels as sgemmAvx512: the same bits.
void sgemmAvx512Packed(int m, int n, int k, const float *a, int lda,
                       const float *packed, float beta, float *c, int ldc,
                       bool streamC);

/// The columns of one panel (the register tile's 6 vectors of 16).
constexpr int kPackedPanelColumns = 96;

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_GEMM_H
