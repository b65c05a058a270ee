//===- NormalizationSupport.h - what the norms and their gradients share --===//
//
// The gradient kernels (NormalizationGrad.cpp) differentiate exactly the
// functions the forward kernels (Normalization.cpp) evaluate, so both read
// the axis and check a weight by one set of rules and take a row's mean and
// 1/sqrt(variance + epsilon) with one function. The read* functions check
// an op's operands, results and attributes without reading an element, so
// the CUDA kernels (runtime/cuda) check with them too. Defined in
// Normalization.cpp and NormalizationGrad.cpp (rowStatistics here, inline:
// it runs once per row of the hot loops); private to the kernels.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_NORMALIZATIONSUPPORT_H
#define ZPLAN_RUNTIME_CPU_NORMALIZATIONSUPPORT_H

#include "runtime/ops/HostDevice.h"
#include "runtime/cpu/KernelSupport.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace zplan::cpu::detail {

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
/// null: dbias is results[2]). Defined in NormalizationGrad.cpp.
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

/// The statistics of `width` elements at `x`, all in double. The variance
/// is a second pass over the centred values, not E[x^2] - mean^2: it keeps
/// its digits for rows far from zero.
template <typename T>
RowStatistics rowStatistics(const T *x, int64_t width, double epsilon,
                            bool center) {
  RowStatistics statistics;
  if (center) {
    for (int64_t i = 0; i < width; ++i)
      statistics.mean += x[i];
    statistics.mean /= static_cast<double>(width);
  }
  double squares = 0;
  for (int64_t i = 0; i < width; ++i) {
    double centered = x[i] - statistics.mean;
    squares += centered * centered;
  }
  statistics.inverse =
      1.0 / std::sqrt(squares / static_cast<double>(width) + epsilon);
  return statistics;
}

//===----------------------------------------------------------------------===//
// reduce_mean, reduce_sum, reduce_max (shared with runtime/cuda/Reductions.cu)
//===----------------------------------------------------------------------===//

enum class Reduction { Mean, Sum, Max };

/// Which input elements each result element of a reduction reads: the kept
/// dimensions walk the (contiguous) result, the reduced ones are walked per
/// result element, both with the input's strides.
struct ReductionLayout {
  std::vector<int64_t> keptShape, keptStrides;
  std::vector<int64_t> reducedShape, reducedStrides;
  /// Elements reduced into each result element.
  int64_t reducedCount = 1;
};

/// Checks a reduction (one numeric operand, sorted unique "axes" below its
/// rank, "keepdims", the result's type and shape) and lays it out.
Status readReduction(const KernelCall &call, ReductionLayout &layout);

/// What floats sum in (double) and integers (uint64_t: wrapping).
template <typename T>
using ReductionSum =
    std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;

/// A reduce_max step: NaN wins, as in numpy's max (whatever the order the
/// elements are combined in).
template <typename T> ZPLAN_HOST_DEVICE T maxKeepingNan(T best, T value) {
  return value > best || value != value ? value : best;
}

/// reduce_max's start: -inf for floats, the lowest integer otherwise.
template <typename T> ZPLAN_HOST_DEVICE T reductionLowest() {
  if constexpr (std::is_floating_point_v<T>)
    return -std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::lowest();
}

/// A result element of reduce_sum (`mean` false) or reduce_mean from the
/// sum of its `count` elements: the mean of floats divides in double, that
/// of integers truncates toward zero (0 for no elements).
template <typename T>
ZPLAN_HOST_DEVICE T finishSum(ReductionSum<T> sum, bool mean, int64_t count) {
  if (!mean)
    return static_cast<T>(sum);
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(sum / static_cast<double>(count));
  } else {
    if (count == 0)
      return 0;
    return static_cast<T>(static_cast<int64_t>(sum) / count);
  }
}

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_NORMALIZATIONSUPPORT_H
