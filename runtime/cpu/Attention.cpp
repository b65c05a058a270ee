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

namespace zplan::cpu::detail {

namespace {

/// Scores of one row into probabilities: exp(x - max) / sum, the exps
/// VectorMath's (as the loss and the KV cache's decode take them), summed in
/// double. A row that is -inf throughout becomes NaN, as in onnxruntime.
void softmaxRow(float *row, int64_t length) {
  double sum = expShiftedSum(row, length, maxOf(row, length), row);
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

void attentionProbabilities(const float *q, const float *k, float scale,
                            const AttentionShape &shape,
                            const AttentionMask &mask, int64_t maskOffset,
                            float *probabilities) {
  int64_t s = shape.s, t = shape.t;
  int is = static_cast<int>(s), it = static_cast<int>(t),
      id = static_cast<int>(shape.d);
  // Leading dimensions are at least 1 even for an empty contraction.
  int ldqk = std::max(id, 1);
  if (s >= kAvx512GemmMinRows && useAvx512Gemm())
    sgemmAvx512(/*transposeB=*/true, is, it, id, scale, q, ldqk, k, ldqk, 0.0f,
                probabilities, it, /*streamC=*/false);
  else
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, is, it, id, scale, q,
                ldqk, k, ldqk, 0.0f, probabilities, it);
  // The rows on the kernel threads (an exp per score is the costly part;
  // inline when the caller's entries already are on them).
  parallelFor(s, grainFor(8 * t), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      float *line = probabilities + row * t;
      int64_t rowMask = maskOffset + row * mask.rowStride;
      if (mask.additive && mask.columnStride == 1) {
        // A row of the mask in place (a causal mask's): a loop the
        // compiler vectorizes.
        const float *additive = mask.additive + rowMask;
        for (int64_t col = 0; col < t; ++col)
          line[col] += additive[col];
      } else if (mask.additive) {
        for (int64_t col = 0; col < t; ++col)
          line[col] += mask.additive[rowMask + col * mask.columnStride];
      } else if (mask.select) {
        for (int64_t col = 0; col < t; ++col)
          if (!mask.select[rowMask + col * mask.columnStride])
            line[col] = mask.maskedValue;
      }
      softmaxRow(line, t);
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
    thread_local std::vector<float> scratch;
    if (scratch.size() < static_cast<size_t>(s * t))
      scratch.resize(s * t);
    return [&, scores = scratch.data(), q = WidenedSlabs<float>(query, s * d),
            k = WidenedSlabs<float>(key, t * d),
            v = WidenedSlabs<float>(value, t * dv)](
               int64_t entry, int64_t maskOffset) mutable {
      if (t == 0) { // softmax over nothing: the empty sum of values
        std::fill(out + entry * s * dv, out + (entry + 1) * s * dv, 0.0f);
        return;
      }
      attentionProbabilities(q(entry), k(entry), scale, shape, mask, maskOffset,
                             scores);
      float *entryOut = out + entry * s * dv;
      if (s >= kAvx512GemmMinRows && useAvx512Gemm())
        sgemmAvx512(/*transposeB=*/false, is, idv, it, 1.0f, scores, it,
                    v(entry), idv, 0.0f, entryOut, idv, /*streamC=*/false);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, is, idv, it,
                    1.0f, scores, it, v(entry), idv, 0.0f, entryOut, idv);
    };
  });
  return Status::success();
}

} // namespace zplan::cpu::detail
