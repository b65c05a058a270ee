//===- Normalization.cpp - layer_norm, rms_norm, softmax, reductions ------===//
//
// Everything here sums many elements, so every sum of floats is kept in
// double (and integer sums in int64) and rounded once: the results then
// stay within an ulp or two of the exact value whatever the row length,
// which is what lets them match onnxruntime to 1e-5 on transformer-sized
// rows. layer_norm takes the variance in a second pass over the row
// (sum of (x - mean)^2), not as E[x^2] - mean^2, which cancels. The norms
// and softmax split their rows across the kernel threads (Parallel.h); a
// row's sums stay on one thread.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/NormalizationSupport.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/ops/ReductionOps.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace zplan::cpu::detail {

//===----------------------------------------------------------------------===//
// layer_norm, rms_norm
//===----------------------------------------------------------------------===//

/// The row loop both norms share: y = (x - mean?) / sqrt(mean square +
/// epsilon) * weight? + bias?, accumulated in double. layer_norm centres
/// each row first; rms_norm does not (and has no bias).
static Status normalizeRows(const KernelCall &call, const TensorRef &input,
                            const TensorRef &result, int64_t rows,
                            int64_t width, double epsilon,
                            const TensorRef *weight, const TensorRef *bias,
                            bool center) {
  return dispatchFloatType(call, "input", input.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *w = weight ? weight->as<T>() : nullptr;
    const T *b = bias ? bias->as<T>() : nullptr;
    parallelFor(rows, grainFor(4 * width), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const T *x = input.as<T>() + row * width;
        T *y = result.as<T>() + row * width;
        RowStatistics statistics = rowStatistics(x, width, epsilon, center);
        double mean = statistics.mean, inverse = statistics.inverse;
        if constexpr (std::is_same_v<T, float>) {
          // The same doubles, eight lanes at a time (VectorMath.h).
          normalizeInDouble(x, width, mean, inverse, w, b, y);
          continue;
        }
        for (int64_t i = 0; i < width; ++i) {
          double normalized = (x[i] - mean) * inverse;
          if (w)
            normalized *= w[i];
          if (b)
            normalized += b[i];
          y[i] = static_cast<T>(normalized);
        }
      }
    });
    return Status::success();
  });
}

Status runLayerNorm(const KernelCall &call) {
  NormRows norm;
  if (Status status = readLayerNorm(call, norm); !status.ok())
    return status;
  return normalizeRows(call, call.operands[0], call.results[0], norm.rows,
                       norm.width, norm.epsilon, norm.weight, norm.bias,
                       /*center=*/true);
}

Status runRmsNorm(const KernelCall &call) {
  NormRows norm;
  if (Status status = readRmsNorm(call, norm); !status.ok())
    return status;
  return normalizeRows(call, call.operands[0], call.results[0], norm.rows,
                       norm.width, norm.epsilon, norm.weight,
                       /*bias=*/nullptr, /*center=*/false);
}

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

Status runSoftmax(const KernelCall &call) {
  SoftmaxLines lines;
  if (Status status = readSoftmax(call, lines); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  int64_t length = lines.length, inner = lines.inner;
  return dispatchFloatType(call, "input", input.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    parallelForEachLine(lines, [&](int64_t first) {
      const T *x = input.as<T>() + first;
      T *y = result.as<T>() + first;
      T maximum = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < length; ++j)
        maximum = std::max(maximum, x[j * inner]);
      double sum = 0;
      bool contiguousF32 = false;
      if constexpr (std::is_same_v<T, float>) {
        // A contiguous f32 line: VectorMath's exp, as attention takes it.
        contiguousF32 = inner == 1;
        if (contiguousF32)
          sum = expShiftedSum(x, length, maximum, y);
      }
      if (!contiguousF32) {
        for (int64_t j = 0; j < length; ++j) {
          T e = softmaxExp(x[j * inner] - maximum);
          y[j * inner] = e;
          sum += e;
        }
      }
      double inverse = 1.0 / sum;
      for (int64_t j = 0; j < length; ++j)
        y[j * inner] = static_cast<T>(y[j * inner] * inverse);
    });
    return Status::success();
  });
}

//===----------------------------------------------------------------------===//
// reduce_mean, reduce_sum, reduce_max
//===----------------------------------------------------------------------===//

namespace {

Status reduce(const KernelCall &call, Reduction reduction) {
  ReductionLayout layout;
  if (Status status = readReduction(call, layout); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  StridedWalk<1> reducedWalk(layout.reducedShape, {layout.reducedStrides});

  return dispatchType(call, "input", input.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using Sum = ReductionSum<T>;
    const T *x = input.as<T>();
    T *y = result.as<T>();
    auto reduceAt = [&](int64_t base) -> T {
      if (reduction == Reduction::Max) {
        T best = reductionLowest<T>();
        reducedWalk.run({base},
                        [&](int64_t, const std::array<int64_t, 1> &at,
                            const std::array<int64_t, 1> &step, int64_t count) {
                          for (int64_t j = 0; j < count; ++j) {
                            best = maxKeepingNan(best, x[at[0] + j * step[0]]);
                            if (best != best)
                              return;
                          }
                        });
        return best;
      }
      Sum sum = 0;
      reducedWalk.run({base},
                      [&](int64_t, const std::array<int64_t, 1> &at,
                          const std::array<int64_t, 1> &step, int64_t count) {
                        for (int64_t j = 0; j < count; ++j)
                          sum += static_cast<Sum>(x[at[0] + j * step[0]]);
                      });
      return finishSum<T>(sum, reduction == Reduction::Mean,
                          layout.reducedCount);
    };
    forEachRun<1>(layout.keptShape, {layout.keptStrides}, {0},
                  [&](int64_t out, const std::array<int64_t, 1> &at,
                      const std::array<int64_t, 1> &step, int64_t count) {
                    for (int64_t j = 0; j < count; ++j)
                      y[out + j] = reduceAt(at[0] + j * step[0]);
                  });
    return Status::success();
  });
}

} // namespace

Status runReduceMean(const KernelCall &call) {
  return reduce(call, Reduction::Mean);
}

Status runReduceSum(const KernelCall &call) {
  return reduce(call, Reduction::Sum);
}

Status runReduceMax(const KernelCall &call) {
  return reduce(call, Reduction::Max);
}

} // namespace zplan::cpu::detail
