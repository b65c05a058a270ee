//===- NormalizationSupport.cuh - a row's statistics, on the device -------===//
//
// The forward norms (Normalization.cu) and their gradients
// (NormalizationGrad.cu) divide by the same statistics, so both take them
// with one function: the device form of the CPU's rowStatistics
// (runtime/cpu/NormalizationSupport.h), the sums spread over a team of
// threads (LineKernels.cuh) and kept in double, into the RowStatistics both
// backends share (runtime/ops/NormalizationOps.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_NORMALIZATIONSUPPORT_CUH
#define ZPLAN_RUNTIME_CUDA_NORMALIZATIONSUPPORT_CUH

#include "runtime/cuda/LineKernels.cuh"
#include "runtime/ops/NormalizationOps.h"

namespace zplan::cuda {

using ops::RowStatistics;

/// The row's mean (centred norms) and 1 / sqrt(mean square + epsilon), in
/// double, as the CPU's rowStatistics computes them; returned to every
/// thread of the team.
template <Team kTeam, typename T>
__device__ RowStatistics teamRowStatistics(const T *x, int64_t width,
                                           double epsilon, bool center,
                                           double *scratch) {
  using Lines = LineTeam<kTeam>;
  RowStatistics statistics;
  if (center) {
    double sum = 0;
    for (int64_t i = Lines::lane(); i < width; i += Lines::size())
      sum += x[i];
    statistics.mean = Lines::sum(sum, scratch) / static_cast<double>(width);
  }
  double squares = 0;
  for (int64_t i = Lines::lane(); i < width; i += Lines::size()) {
    double centered = x[i] - statistics.mean;
    squares += centered * centered;
  }
  squares = Lines::sum(squares, scratch);
  statistics.inverse =
      1.0 / sqrt(squares / static_cast<double>(width) + epsilon);
  return statistics;
}

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_NORMALIZATIONSUPPORT_CUH
