//===- NormalizationOps.h - the norms', softmax's and gradients' checks ---===//
//
// Shared validation for every backend to call: the gradient kernels
// differentiate exactly the functions the forward kernels evaluate, so
// every backend's layer_norm, rms_norm, softmax and their gradients read
// the axis, check a weight and see the rows (or softmax's lines) by one set
// of rules. The read* functions check an op's operands, results and
// attributes without reading an element. A row's statistics are each
// backend's to sum (a loop on the CPU, a team of threads on CUDA), into
// the one RowStatistics here.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_NORMALIZATIONOPS_H
#define ZPLAN_RUNTIME_OPS_NORMALIZATIONOPS_H

#include "runtime/ops/KernelCall.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zplan::ops {

/// The "axis" attribute as a non-negative axis below `rank` (a negative one
/// counts from the end); out of range is an error naming the value read.
Status axisAttribute(const KernelCall &call, size_t rank, size_t &axis);

/// The lines a softmax (and softmax_grad) runs along: the tensor seen as
/// [outer, length, inner], one line of `length` elements `inner` apart for
/// every (outer, inner) pair.
struct SoftmaxLines {
  int64_t outer = 0, length = 0, inner = 0;

  /// Calls fn(first) with the element offset of every line's first element,
  /// outer index by outer index.
  template <typename Fn> void forEach(Fn &&fn) const {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i)
        fn(o * length * inner + i);
  }
};

/// Reads the "axis" attribute (as axisAttribute) of a tensor of `shape` and
/// the lines along it.
Status readSoftmaxLines(const KernelCall &call,
                        const std::vector<int64_t> &shape, SoftmaxLines &lines);

/// A weight or bias (called `what`): `input`'s element type, and the shape
/// of its normalised dimensions input.shape[axis:].
Status expectNormalizedParameter(const KernelCall &call, const char *what,
                                 const TensorRef &parameter,
                                 const TensorRef &input, size_t axis);

/// What layer_norm, rms_norm and their gradients read before touching any
/// element: `rows` rows of `width` elements (input.shape[axis:]), epsilon,
/// and the weight and bias, null when the op has none.
struct NormRows {
  int64_t rows = 0, width = 0;
  double epsilon = 0;
  const TensorRef *weight = nullptr, *bias = nullptr;
};

/// Checks layer_norm's operands (input, optional weight and bias, told
/// apart by operandSegmentSizes), result and attributes; reads `norm`.
Status readLayerNorm(const KernelCall &call, NormRows &norm);
/// Checks rms_norm's operands (input, optional weight), result and
/// epsilon; reads `norm` (the last axis).
Status readRmsNorm(const KernelCall &call, NormRows &norm);
/// Checks softmax's operand, result and axis; reads the lines.
Status readSoftmax(const KernelCall &call, SoftmaxLines &lines);

/// Checks layer_norm_grad's operands (dy, input, weight), results (dinput,
/// dweight, dbias) and attributes; reads `norm` (weight is operand 2, bias
/// null: dbias is results[2]).
Status readLayerNormGrad(const KernelCall &call, NormRows &norm);
/// As readLayerNormGrad, for rms_norm_grad (results dinput, dweight).
Status readRmsNormGrad(const KernelCall &call, NormRows &norm);
/// Checks softmax_grad's operands (dy, y), result and axis; reads the lines.
Status readSoftmaxGrad(const KernelCall &call, SoftmaxLines &lines);

/// What a norm divides a row by, and subtracts from it first.
struct RowStatistics {
  /// The row's mean (layer_norm), 0 when not centred (rms_norm).
  double mean = 0;
  /// 1 / sqrt(mean((x - mean)^2) + epsilon).
  double inverse = 0;
};

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_NORMALIZATIONOPS_H
