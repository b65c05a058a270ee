//===- AttentionSupport.h - what attention and attention_grad share -------===//
//
// The backward kernel (AttentionGrad.cpp) differentiates exactly the
// function the forward kernel (Attention.cpp) evaluates, so both read their
// operands' shapes, the mask and its attributes by one set of rules and
// compute the probabilities P = softmax(mask(scale * q k^T)) with one
// function. Defined in Attention.cpp; private to runtime/cpu.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_ATTENTIONSUPPORT_H
#define ZPLAN_RUNTIME_CPU_ATTENTIONSUPPORT_H

#include "runtime/cpu/KernelSupport.h"

namespace zplan::cpu::detail {

/// The extents of query [..., S, D], key [..., T, D], value [..., T, Dv].
struct AttentionShape {
  /// The leading dimensions: one (batch, head) matrix per index.
  std::vector<int64_t> batch;
  int64_t s = 0, d = 0, t = 0, dv = 0;

  /// [..., S, Dv]: the result's shape, and dout's.
  std::vector<int64_t> outputShape() const;
};

/// Checks that query has rank >= 2 and that key, value and `output`
/// (called `outputName`: the result, or dout) have the shapes query
/// implies; fills `shape`. Types are the caller's to check first.
Status checkAttentionShapes(const KernelCall &call, const TensorRef &query,
                            const TensorRef &key, const TensorRef &value,
                            const char *outputName, const TensorRef &output,
                            AttentionShape &shape);

/// How the mask, broadcast to the scores [..., S, T], is applied: added
/// (additive, f32), or `maskedValue` where it is false (select, bool).
/// At most one of `additive` and `select` is set; neither without a mask.
struct AttentionMask {
  const float *additive = nullptr;
  const uint8_t *select = nullptr;
  float maskedValue = 0;
  /// Where the element for (batch entry, s, t) lives: the entry's base
  /// offset comes from a walk of the leading dimensions with these strides,
  /// s and t step with the other two (0 where the mask broadcasts).
  std::vector<int64_t> batchStrides;
  int64_t rowStride = 0, columnStride = 0;
};

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

/// nn.attention's operands (query, key, value, mask?) and result: arity,
/// f32 types, shapes, then the scale and mask attributes; fills `shape`,
/// `scale` and `mask`. Both backends' forward kernels start here.
Status checkAttention(const KernelCall &call, AttentionShape &shape,
                      float &scale, AttentionMask &mask);

/// nn.attention_grad's operands (dout, query, key, value, mask?) and
/// results (dquery, dkey, dvalue), as checkAttention. Defined in
/// AttentionGrad.cpp.
Status checkAttentionGrad(const KernelCall &call, AttentionShape &shape,
                          float &scale, AttentionMask &mask);

/// Every extent of `shape` fits the BLAS integer (int) the GEMMs take.
Status checkBlasRange(const KernelCall &call, const AttentionShape &shape);

/// Reads the scale attribute, then the mask operand (`maskOperand`, null
/// when there is none) with the mask_kind and masked_value attributes, and
/// checks the mask's type and that it broadcasts to the scores of `shape`.
Status readAttentionAttributes(const KernelCall &call,
                               const TensorRef *maskOperand,
                               const AttentionShape &shape, float &scale,
                               AttentionMask &mask);

/// P[S, T] = softmax(mask(scale * q[S, D] k[T, D]^T)) of one batch entry,
/// its mask elements starting at `maskOffset`: row by row, max subtracted,
/// the sum in double; a row that is -inf throughout becomes NaN, as in
/// onnxruntime. The extents must fit BLAS integers and T must be > 0.
void attentionProbabilities(const float *q, const float *k, float scale,
                            const AttentionShape &shape,
                            const AttentionMask &mask, int64_t maskOffset,
                            float *probabilities);

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_ATTENTIONSUPPORT_H
