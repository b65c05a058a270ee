//===- Attention.cpp - nn.attention: softmax(mask(q k^T * scale)) v -------===//
//
// Per (batch, head) matrix -- every leading dimension of the query -- two
// GEMMs around a row softmax: scores[S, T] = scale * q[S, D] k[T, D]^T, the
// mask applied (added, or `masked_value` where a bool mask is false), each
// row turned into probabilities (max subtracted, the sum kept in double),
// then result[S, Dv] = scores[S, T] v[T, Dv]. The entries are split across
// the kernel threads (Parallel.h); each thread's scores live in one
// thread-local scratch buffer that only grows, so a steady-state call does
// not allocate. A bf16 query, key or value (mixed precision) is widened one
// entry at a time (WidenedSlabs). The probabilities are AttentionSupport.h's
// function, which
// attention_grad calls too; the shape and mask rules are the ops layer's
// (runtime/ops/AttentionOps.h), shared with every backend.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/AttentionSupport.h"
#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/VectorMath.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

namespace zplan::cpu::detail {

namespace {

/// Scores of one row into probabilities: exp(x - max) / sum, the exps
/// VectorMath's (as the loss and the KV cache's decode take them), summed in
/// double. A row that is -inf throughout becomes NaN, as in onnxruntime.
/// `capacity` (>= length): the floats the row may use; those past `length`
/// are scratch here. The max and the exps run on the row padded with -inf
/// to a whole number of VectorMath's blocks of 16 where it fits: a causal
/// row's tail (15 rows in 16 have one) would otherwise go through
/// VectorMath's copy of it to the stack and back, a third of the
/// exps' time. The same lanes with the same values: the same bits.
void softmaxRow(float *row, int64_t length, int64_t capacity) {
  constexpr int64_t kBlock = 16;
  int64_t padded = std::min(capacity, (length + kBlock - 1) / kBlock * kBlock);
  std::fill(row + length, row + padded,
            -std::numeric_limits<float>::infinity());
  double sum = expShiftedSum(row, padded, maxOf(row, padded), row);
  float inverse = static_cast<float>(1.0 / sum);
  for (int64_t t = 0; t < length; ++t)
    row[t] *= inverse;
}

} // namespace

Status checkBlasRange(const KernelCall &call, const AttentionShape &shape) {
  for (int64_t extent : {shape.s, shape.t, shape.d, shape.dv})
    if (extent > INT_MAX)
      return call.error("extent " + std::to_string(extent) +
                        " exceeds the BLAS integer range");
  return Status::success();
}

namespace {

/// Whether a mask value rules its element out: -inf, or the lowest float
/// (what transformers' exports add, torch.finfo(float32).min). Added to a
/// score of magnitude below 2^103 either gives a probability of exactly 0
/// once the row has a column that is not ruled out.
inline bool rulesOut(float value) {
  return value == -std::numeric_limits<float>::infinity() ||
         value == std::numeric_limits<float>::lowest();
}

/// Whether the mask rules out element `at`: its additive value, or a bool
/// mask's masked_value where it is false, rulesOut.
bool ruledOut(const AttentionMask &mask, int64_t at) {
  if (mask.additive)
    return rulesOut(mask.additive[at]);
  return mask.select && !mask.select[at] && rulesOut(mask.maskedValue);
}

void maskedExtents(const AttentionShape &shape, const AttentionMask &mask,
                   int64_t maskOffset, int64_t *extents) {
  int64_t t = shape.t;
  for (int64_t row = 0; row < shape.s; ++row) {
    int64_t rowMask = maskOffset + row * mask.rowStride, extent = t;
    if (mask.additive && mask.columnStride == 1) {
      const float *values = mask.additive + rowMask;
      while (extent > 0 && rulesOut(values[extent - 1]))
        --extent;
    } else if (mask.additive || mask.select) {
      while (extent > 0 &&
             ruledOut(mask, rowMask + (extent - 1) * mask.columnStride))
        --extent;
    }
    // A row the mask rules out throughout is computed whole (onnxruntime's
    // uniform or NaN row).
    extents[row] = extent == 0 ? t : extent;
  }
}

} // namespace

int attentionBlocks(int64_t s) {
  return static_cast<int>((s + kAttentionRowBlock - 1) / kAttentionRowBlock);
}

AttentionScratch threadAttentionScratch(int64_t s, int64_t floats) {
  thread_local std::vector<float> values;
  thread_local std::vector<int64_t> extents;
  thread_local std::vector<int> reach;
  if (values.size() < static_cast<size_t>(floats))
    values.resize(floats);
  if (extents.size() < static_cast<size_t>(s))
    extents.resize(s);
  if (reach.size() < static_cast<size_t>(attentionBlocks(s)))
    reach.resize(attentionBlocks(s));
  return {values.data(), extents.data(), reach.data()};
}

void attentionProbabilities(const float *q, const float *k, float scale,
                            const AttentionShape &shape,
                            const AttentionMask &mask, int64_t maskOffset,
                            float *probabilities, int64_t *extents,
                            int *blockReach, bool extentsKnown) {
  int64_t s = shape.s, t = shape.t;
  int is = static_cast<int>(s), it = static_cast<int>(t),
      id = static_cast<int>(shape.d);
  // Leading dimensions are at least 1 even for an empty contraction.
  int ldqk = std::max(id, 1);
  if (!extentsKnown) {
    maskedExtents(shape, mask, maskOffset, extents);
    for (int block = 0; block < attentionBlocks(s); ++block) {
      int64_t first = block * kAttentionRowBlock;
      int64_t end = std::min(s, first + kAttentionRowBlock);
      blockReach[block] =
          static_cast<int>(*std::max_element(extents + first, extents + end));
    }
  }
  // scores[S, T] = scale * q k^T; zplan's GEMM computes each block of rows
  // only as far along T as the block reaches (a causal mask's lower
  // triangle: about half the products).
  if (takesAvx512Gemm(s)) {
    RaggedRows ragged{static_cast<int>(kAttentionRowBlock), blockReach,
                      /*depth=*/nullptr};
    sgemmAvx512(/*transposeB=*/true, is, it, id, scale, q, ldqk, k, ldqk, 0.0f,
                probabilities, it, /*streamC=*/false, &ragged);
  } else {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, is, it, id, scale, q,
                ldqk, k, ldqk, 0.0f, probabilities, it);
  }
  // The rows on the kernel threads (an exp per score is the costly part;
  // inline when the caller's entries already are on them).
  parallelFor(s, grainFor(8 * t), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      float *line = probabilities + row * t;
      int64_t length = extents[row];
      int64_t rowMask = maskOffset + row * mask.rowStride;
      if (mask.additive && mask.columnStride == 1) {
        // A row of the mask in place (a causal mask's): a loop the
        // compiler vectorizes.
        const float *additive = mask.additive + rowMask;
        for (int64_t col = 0; col < length; ++col)
          line[col] += additive[col];
      } else if (mask.additive) {
        for (int64_t col = 0; col < length; ++col)
          line[col] += mask.additive[rowMask + col * mask.columnStride];
      } else if (mask.select) {
        for (int64_t col = 0; col < length; ++col)
          if (!mask.select[rowMask + col * mask.columnStride])
            line[col] = mask.maskedValue;
      }
      softmaxRow(line, length, t);
      std::fill(line + length, line + t, 0.0f);
    }
  });
}

Status runAttention(const KernelCall &call) {
  AttentionShape shape;
  float scale;
  AttentionMask mask;
  if (Status status = checkAttention(call, shape, scale, mask); !status.ok())
    return status;
  const TensorRef &query = call.operands[0], &key = call.operands[1],
                  &value = call.operands[2], &result = call.results[0];
  const std::vector<int64_t> &batch = shape.batch;
  int64_t s = shape.s, d = shape.d, t = shape.t, dv = shape.dv;

  if (s == 0 || dv == 0 || product(batch) == 0)
    return Status::success();
  if (Status status = checkBlasRange(call, shape); !status.ok())
    return status;

  float *out = result.as<float>();
  int is = static_cast<int>(s), it = static_cast<int>(t),
      idv = static_cast<int>(dv);

  // Every leading index is one independent (batch, head) matrix; only the
  // mask may broadcast across them. The entries run on the kernel threads,
  // each thread with its own scores (scratch that only grows) and each
  // chunk with its own widened slabs.
  parallelForEachAttentionEntry(shape, mask, s * t * 4, [&] {
    AttentionScratch scratch = threadAttentionScratch(s, s * t);
    return [&, scores = scratch.floats, extents = scratch.extents,
            blockReach = scratch.blockReach, knownMaskOffset = int64_t(-1),
            q = WidenedSlabs<float>(query, s * d),
            k = WidenedSlabs<float>(key, t * d),
            v = WidenedSlabs<float>(value, t * dv)](
               int64_t entry, int64_t maskOffset) mutable {
      if (t == 0) { // softmax over nothing: the empty sum of values
        std::fill(out + entry * s * dv, out + (entry + 1) * s * dv, 0.0f);
        return;
      }
      // The heads of a batch entry share its mask: the extents are read
      // once for them (each chunk's entries run in order).
      attentionProbabilities(q(entry), k(entry), scale, shape, mask, maskOffset,
                             scores, extents, blockReach,
                             maskOffset == knownMaskOffset);
      knownMaskOffset = maskOffset;
      // result = P v; zplan's GEMM sums each block of rows over the keys it
      // reaches (past them P is 0).
      float *entryOut = out + entry * s * dv;
      if (takesAvx512Gemm(s)) {
        RaggedRows ragged{static_cast<int>(kAttentionRowBlock),
                          /*columns=*/nullptr, blockReach};
        sgemmAvx512(/*transposeB=*/false, is, idv, it, 1.0f, scores, it,
                    v(entry), idv, 0.0f, entryOut, idv, /*streamC=*/false,
                    &ragged);
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, is, idv, it,
                    1.0f, scores, it, v(entry), idv, 0.0f, entryOut, idv);
      }
    };
  });
  return Status::success();
}

} // namespace zplan::cpu::detail
