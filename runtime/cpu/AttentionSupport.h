//===- AttentionSupport.h - attention's probabilities on the CPU (private) ===//
//
// The backward kernel (AttentionGrad.cpp) differentiates exactly the
// function the forward kernel (Attention.cpp) evaluates, so both compute
// the probabilities P = softmax(mask(scale * q k^T)) with one function and
// walk the (batch, head) entries alike. Their checks are the ops layer's
// (runtime/ops/AttentionOps.h), shared with the CUDA kernels. Defined in
// Attention.cpp; private to runtime/cpu.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_ATTENTIONSUPPORT_H
#define ZPLAN_RUNTIME_CPU_ATTENTIONSUPPORT_H

#include "runtime/cpu/KernelSupport.h"
#include "runtime/ops/AttentionOps.h"

namespace zplan::cpu::detail {

/// Calls fn(entry, maskOffset) for every (batch, head) matrix of `shape`
/// in order: its index among the leading dimensions, and where its mask
/// elements start (only the mask may broadcast across entries).
template <typename Fn>
void forEachAttentionEntry(const AttentionShape &shape,
                           const AttentionMask &mask, Fn &&fn) {
  forEachRun<1>(shape.batch, {mask.batchStrides}, {0},
                [&](int64_t first, const std::array<int64_t, 1> &maskBase,
                    const std::array<int64_t, 1> &maskStep, int64_t count) {
                  for (int64_t j = 0; j < count; ++j)
                    fn(first + j, maskBase[0] + j * maskStep[0]);
                });
}

/// forEachAttentionEntry with the entries split across the kernel threads
/// (Parallel.h): each chunk of entries calls makeWorker() once, for a
/// worker that owns the chunk's scratch, then worker(entry, maskOffset)
/// for each of its entries. Each entry's outputs are its own. `perEntry`
/// is an entry's work in elements, for the split's grain.
template <typename MakeWorker>
void parallelForEachAttentionEntry(const AttentionShape &shape,
                                   const AttentionMask &mask, int64_t perEntry,
                                   MakeWorker &&makeWorker) {
  std::vector<int64_t> maskOffsets;
  maskOffsets.reserve(static_cast<size_t>(product(shape.batch)));
  forEachAttentionEntry(shape, mask, [&](int64_t, int64_t maskOffset) {
    maskOffsets.push_back(maskOffset);
  });
  parallelFor(static_cast<int64_t>(maskOffsets.size()), grainFor(perEntry),
              [&](int64_t begin, int64_t end) {
                auto worker = makeWorker();
                for (int64_t entry = begin; entry < end; ++entry)
                  worker(entry, maskOffsets[entry]);
              });
}

/// Every extent of `shape` fits the BLAS integer (int) the GEMMs take.
Status checkBlasRange(const KernelCall &call, const AttentionShape &shape);

/// The rows of scores that attention computes together: zplan's GEMM
/// takes each block of rows only as far along T as its rows reach.
constexpr int64_t kAttentionRowBlock = 16;

/// The blocks of kAttentionRowBlock rows that S rows make.
int attentionBlocks(int64_t s);

/// The calling thread's scratch for attention's entries, which only grows
/// and is kept for its next call: `floats` floats (the scores, and the
/// gradient's), the extents of S rows and the reaches of their blocks
/// (attentionProbabilities). Shared by the forward and the gradient
/// kernels, which never run inside one another.
struct AttentionScratch {
  float *floats;
  int64_t *extents;
  int *blockReach;
};
AttentionScratch threadAttentionScratch(int64_t s, int64_t floats);

/// P[S, T] = softmax(mask(scale * q[S, D] k[T, D]^T)) of one batch entry,
/// its mask elements starting at `maskOffset`: row by row, max subtracted,
/// the sum in double; a row that is -inf throughout becomes NaN, as in
/// onnxruntime. The extents must fit BLAS integers and T must be > 0.
///
/// extents[r] (S of them, filled here) is 1 + the last column of row r
/// that the mask does not rule out (-inf or the lowest float added, or
/// selected as masked_value), t for a row it rules out throughout;
/// blockReach[b] (attentionBlocks(S) of them) is the largest extent of
/// block b's rows. P is 0 past a row's extent, and no exp is taken there;
/// zplan's GEMM (Gemm.h) computes no score past the block's reach -- under
/// a causal mask, half the scores and exps. That 0 is the probability
/// computing them gives for any score of magnitude below 2^103 (an
/// infinite or NaN score there no longer reaches the row).
/// `extentsKnown`: extents and blockReach already hold those of this
/// `maskOffset` (the previous call's, for another head of the same batch
/// entry), and are not read from the mask again.
void attentionProbabilities(const float *q, const float *k, float scale,
                            const AttentionShape &shape,
                            const AttentionMask &mask, int64_t maskOffset,
                            float *probabilities, int64_t *extents,
                            int *blockReach, bool extentsKnown);

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_ATTENTIONSUPPORT_H
