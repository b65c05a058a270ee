//===- NormalizationSupport.h - a norm's row statistics on the CPU --------===//
//
// The gradient kernels (NormalizationGrad.cpp) differentiate exactly the
// functions the forward kernels (Normalization.cpp) evaluate, so both take
// a row's mean and 1/sqrt(variance + epsilon) with one function, here
// inline: it runs once per row of the hot loops. Their checks are the ops
// layer's (runtime/ops/NormalizationOps.h), shared with the CUDA kernels,
// whose team form of these statistics (runtime/cuda/NormalizationSupport.cuh)
// sums as this one does. And the softmax kernels' lines on the kernel
// threads. Private to runtime/cpu.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_NORMALIZATIONSUPPORT_H
#define ZPLAN_RUNTIME_CPU_NORMALIZATIONSUPPORT_H

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/ops/NormalizationOps.h"

#include <cmath>
#include <type_traits>

namespace zplan::cpu::detail {

/// The statistics of `width` elements at `x`, all in double. The variance
/// is a second pass over the centred values, not E[x^2] - mean^2: it keeps
/// its digits for rows far from zero.
template <typename T>
RowStatistics rowStatistics(const T *x, int64_t width, double epsilon,
                            bool center) {
  RowStatistics statistics;
  double squares = 0;
  if constexpr (std::is_same_v<T, float>) {
    // Sixteen lanes at a time (VectorMath.h): a row's sum is a fixed
    // order of double adds, the same at any thread count.
    if (center)
      statistics.mean = sumInDouble(x, width) / static_cast<double>(width);
    squares = centeredSquareSum(x, width, statistics.mean);
  } else {
    if (center) {
      for (int64_t i = 0; i < width; ++i)
        statistics.mean += x[i];
      statistics.mean /= static_cast<double>(width);
    }
    for (int64_t i = 0; i < width; ++i) {
      double centered = x[i] - statistics.mean;
      squares += centered * centered;
    }
  }
  statistics.inverse =
      1.0 / std::sqrt(squares / static_cast<double>(width) + epsilon);
  return statistics;
}

/// Calls fn(first) for every line of `lines` (SoftmaxLines::forEach's
/// offsets), the lines split across the kernel threads.
template <typename Fn>
void parallelForEachLine(const SoftmaxLines &lines, Fn &&fn) {
  int64_t inner = lines.inner, length = lines.length;
  parallelFor(lines.outer * inner, grainFor(4 * length),
              [&](int64_t begin, int64_t end) {
                for (int64_t line = begin; line < end; ++line)
                  fn(line / inner * length * inner + line % inner);
              });
}

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_NORMALIZATIONSUPPORT_H
