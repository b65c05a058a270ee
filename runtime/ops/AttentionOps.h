//===- AttentionOps.h - attention's and attention_grad's checks -----------===//
//
// Shared validation for every backend to call: the backward kernels
// differentiate exactly the function the forward kernels evaluate, so every
// backend's attention and attention_grad read their operands' shapes, the
// mask and its attributes by one set of rules, and find each (batch, head)
// entry's mask elements with the same strides.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_ATTENTIONOPS_H
#define ZPLAN_RUNTIME_OPS_ATTENTIONOPS_H

#include "runtime/ops/KernelCall.h"

#include <cstdint>
#include <vector>

namespace zplan::ops {

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

/// nn.attention's operands (query, key, value, mask?) and result: arity,
/// f32 types, shapes, then the scale and mask attributes; fills `shape`,
/// `scale` and `mask`. Both backends' forward kernels start here.
Status checkAttention(const KernelCall &call, AttentionShape &shape,
                      float &scale, AttentionMask &mask);

/// nn.attention_grad's operands (dout, query, key, value, mask?) and
/// results (dquery, dkey, dvalue), as checkAttention.
Status checkAttentionGrad(const KernelCall &call, AttentionShape &shape,
                          float &scale, AttentionMask &mask);

/// Reads the scale attribute, then the mask operand (`maskOperand`, null
/// when there is none) with the mask_kind and masked_value attributes, and
/// checks the mask's type and that it broadcasts to the scores of `shape`.
Status readAttentionAttributes(const KernelCall &call,
                               const TensorRef *maskOperand,
                               const AttentionShape &shape, float &scale,
                               AttentionMask &mask);

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_ATTENTIONOPS_H
