//===- AttentionGrad.cpp - attention_grad: dq, dk, dv ---------------------===//
//
// The backward of Attention.cpp, per (batch, head) matrix. The probabilities
// are recomputed by the forward kernel's own attentionProbabilities
// (AttentionSupport.h: the same GEMM, mask rules and row softmax), then
//   dv = P^T dout,  dP = dout v^T,  dS = P * (dP - rowsum(dP * P)),
//   dq = scale * dS k,  dk = scale * dS^T q,
// where dS is zero at every score a select mask replaced by masked_value
// (the forward's output does not depend on q and k there). An additive mask
// passes the gradient through unchanged (the mask itself gets none). A row
// whose scores are all masked behaves as in the forward: with a finite
// masked_value its probabilities are uniform (dv gets its share, dq and dk
// nothing from it); with -inf they are NaN, and so are the gradients it
// reaches, as the forward's output is. The entries are split across the
// kernel threads (Parallel.h); each thread's scratch (P and dP) is
// thread-local and only grows.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/AttentionSupport.h"

#include <cblas.h>

#include <algorithm>

namespace zplan::cpu::detail {

/// attention_grad(dout [..., S, Dv], query [..., S, D], key [..., T, D],
/// value [..., T, Dv], mask?; scale, mask_kind, masked_value) -> dquery,
/// dkey, dvalue (the shapes of q, k, v): the gradient of nn.attention with
/// the same operands and attributes (the mask broadcasts to [..., S, T]);
/// f32 gradients, of f32 or bf16 (widened) q, k and v.
Status runAttentionGrad(const KernelCall &call) {
  AttentionShape shape;
  float scale;
  AttentionMask mask;
  if (Status status = checkAttentionGrad(call, shape, scale, mask);
      !status.ok())
    return status;
  const TensorRef &dout = call.operands[0], &query = call.operands[1],
                  &key = call.operands[2], &value = call.operands[3];
  const std::vector<int64_t> &batch = shape.batch;
  int64_t s = shape.s, d = shape.d, t = shape.t, dv = shape.dv;

  const float *g = dout.as<float>();
  float *dq = call.results[0].as<float>(), *dk = call.results[1].as<float>(),
        *dvOut = call.results[2].as<float>();
  int64_t entries = product(batch);
  // Nothing reaches an empty dimension's partners: their gradients are 0.
  if (s == 0 || t == 0 || entries == 0) {
    std::fill(dq, dq + entries * s * d, 0.0f);
    std::fill(dk, dk + entries * t * d, 0.0f);
    std::fill(dvOut, dvOut + entries * t * dv, 0.0f);
    return Status::success();
  }
  if (Status status = checkBlasRange(call, shape); !status.ok())
    return status;

  int is = static_cast<int>(s), it = static_cast<int>(t),
      id = static_cast<int>(d), idv = static_cast<int>(dv);
  int ldqk = std::max(id, 1), ldv = std::max(idv, 1);

  // The entries on the kernel threads, each thread with its own P and dP
  // (scratch that only grows), each chunk with its own widened slabs.
  parallelForEachAttentionEntry(shape, mask, s * t * 8, [&] {
    AttentionScratch scratch = threadAttentionScratch(s, 2 * s * t);
    return [&, probabilities = scratch.floats, extents = scratch.extents,
            blockReach = scratch.blockReach, knownMaskOffset = int64_t(-1),
            dprobabilities = scratch.floats + s * t,
            q = WidenedSlabs<float>(query, s * d),
            k = WidenedSlabs<float>(key, t * d),
            v = WidenedSlabs<float>(value, t * dv)](
               int64_t entry, int64_t maskOffset) mutable {
      const float *qe = q(entry), *ke = k(entry), *ve = v(entry),
                  *ge = g + entry * s * dv;
      // P, as the forward computed it.
      attentionProbabilities(qe, ke, scale, shape, mask, maskOffset,
                             probabilities, extents, blockReach,
                             maskOffset == knownMaskOffset);
      knownMaskOffset = maskOffset;
      // dv[T, Dv] = P^T dout; dP[S, T] = dout v^T.
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, it, idv, is, 1.0f,
                  probabilities, it, ge, ldv, 0.0f, dvOut + entry * t * dv,
                  ldv);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, is, it, idv, 1.0f,
                  ge, ldv, ve, ldv, 0.0f, dprobabilities, it);
      // dS = P * (dP - rowsum(dP * P)), overwriting dP; zero where a
      // select mask replaced the score. The rows on the kernel threads
      // (inline when the entries already are: one entry, a long sequence).
      parallelFor(s, grainFor(4 * t), [&](int64_t begin, int64_t end) {
        for (int64_t row = begin; row < end; ++row) {
          const float *p = probabilities + row * t;
          float *line = dprobabilities + row * t;
          double dot = 0;
          for (int64_t col = 0; col < t; ++col)
            dot += static_cast<double>(line[col]) * p[col];
          for (int64_t col = 0; col < t; ++col)
            line[col] = static_cast<float>(static_cast<double>(p[col]) *
                                           (line[col] - dot));
          if (mask.select) {
            int64_t rowMask = maskOffset + row * mask.rowStride;
            for (int64_t col = 0; col < t; ++col)
              if (!mask.select[rowMask + col * mask.columnStride])
                line[col] = 0.0f;
          }
        }
      });
      // dq[S, D] = scale dS k; dk[T, D] = scale dS^T q.
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, is, id, it, scale,
                  dprobabilities, it, ke, ldqk, 0.0f, dq + entry * s * d, ldqk);
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, it, id, is, scale,
                  dprobabilities, it, qe, ldqk, 0.0f, dk + entry * t * d, ldqk);
    };
  });
  return Status::success();
}

} // namespace zplan::cpu::detail
