//===- ReductionOps.h - reduce_mean, reduce_sum, reduce_max, shared -------===//
//
// Shared validation for every backend to call, and the formulas every
// backend compiles (HostDevice.h): a reduction's checks and layout (which
// input elements each result element reads), what its elements are summed
// in, how NaN wins a max, and how a sum becomes a mean. The CPU kernels
// (runtime/cpu/Normalization.cpp) and the CUDA kernels
// (runtime/cuda/Reductions.cu) combine the elements in their own orders
// with these steps.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_REDUCTIONOPS_H
#define ZPLAN_RUNTIME_OPS_REDUCTIONOPS_H

#include "runtime/ops/HostDevice.h"
#include "runtime/ops/KernelCall.h"

#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

namespace zplan::ops {

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

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_REDUCTIONOPS_H
