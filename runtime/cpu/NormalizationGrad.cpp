//===- NormalizationGrad.cpp - norm and softmax gradients -----------------===//
//
// The backward of Normalization.cpp's kernels. Each recomputes what its
// forward kernel computed, with the forward's own rowStatistics
// (NormalizationSupport.h: the row mean, the variance as a second pass over
// the centred row, 1/sqrt(variance + epsilon), all in double) so that the
// gradient is the derivative of exactly the function the forward evaluated;
// every sum is kept in double and rounded once. dx is computed a row at a
// time, the rows split across the kernel threads (Parallel.h); the weight
// and bias gradients sum over rows, one row after another, into a double
// scratch that only grows, the columns split across the threads:
// deterministic at any thread count, and no allocation in a steady state.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/NormalizationSupport.h"

#include <algorithm>

namespace zplan::cpu::detail {

namespace {

/// The rows loop of layer_norm_grad (center) and rms_norm_grad: with
/// xhat = (x - mean?) * inverse and g = dy * weight,
///   dx = inverse * (g - mean(g)? - xhat * mean(g * xhat)),
///   dweight += dy * xhat, dbias += dy (over rows).
Status normalizeRowsBackward(const KernelCall &call, int64_t rows,
                             int64_t width, double epsilon, bool center,
                             const TensorRef *dbias) {
  const TensorRef &dy = call.operands[0], &input = call.operands[1],
                  &weight = call.operands[2], &dinput = call.results[0],
                  &dweight = call.results[1];
  // The row statistics, taken once per row; scratch of the caller's that
  // only grows.
  thread_local std::vector<RowStatistics> statisticsScratch;
  statisticsScratch.resize(
      std::max<size_t>(statisticsScratch.size(), static_cast<size_t>(rows)));
  RowStatistics *statistics = statisticsScratch.data();
  thread_local std::vector<double> scratch;
  if (scratch.size() < static_cast<size_t>(2 * width))
    scratch.resize(2 * width);
  double *weightSums = scratch.data(), *biasSums = scratch.data() + width;
  std::fill(weightSums, weightSums + 2 * width, 0.0);
  return dispatchFloatType(call, "dy", dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *w = weight.as<T>();
    // Three passes, each split across the kernel threads: the rows'
    // statistics; the weight and bias sums over rows, split by columns so
    // that each column's rows are summed in order (the same bits at any
    // thread count); then dx, row by row, last, so that it may overwrite
    // dy.
    parallelFor(rows, grainFor(2 * width), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row)
        statistics[row] =
            rowStatistics(input.as<T>() + row * width, width, epsilon, center);
    });
    parallelFor(width, grainFor(2 * rows), [&](int64_t begin, int64_t end) {
      for (int64_t row = 0; row < rows; ++row) {
        const T *x = input.as<T>() + row * width;
        const T *g = dy.as<T>() + row * width;
        double mean = statistics[row].mean, inverse = statistics[row].inverse;
        for (int64_t i = begin; i < end; ++i) {
          double xhat = (x[i] - mean) * inverse;
          weightSums[i] += static_cast<double>(g[i]) * xhat;
          biasSums[i] += g[i];
        }
      }
    });
    parallelFor(rows, grainFor(4 * width), [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const T *x = input.as<T>() + row * width;
        const T *g = dy.as<T>() + row * width;
        T *dx = dinput.as<T>() + row * width;
        double mean = statistics[row].mean, inverse = statistics[row].inverse;
        double sumScaled = 0, sumScaledXhat = 0;
        for (int64_t i = 0; i < width; ++i) {
          double xhat = (x[i] - mean) * inverse;
          double scaled = static_cast<double>(g[i]) * w[i];
          sumScaled += scaled;
          sumScaledXhat += scaled * xhat;
        }
        double meanScaled = center ? sumScaled / static_cast<double>(width) : 0;
        double meanScaledXhat = sumScaledXhat / static_cast<double>(width);
        for (int64_t i = 0; i < width; ++i) {
          double xhat = (x[i] - mean) * inverse;
          double scaled = static_cast<double>(g[i]) * w[i];
          dx[i] = static_cast<T>(inverse *
                                 (scaled - meanScaled - xhat * meanScaledXhat));
        }
      }
    });
    T *dw = dweight.as<T>();
    for (int64_t i = 0; i < width; ++i)
      dw[i] = static_cast<T>(weightSums[i]);
    if (dbias) {
      T *db = dbias->as<T>();
      for (int64_t i = 0; i < width; ++i)
        db[i] = static_cast<T>(biasSums[i]);
    }
    return Status::success();
  });
}

} // namespace

/// layer_norm_grad(dy, input, weight; axis, epsilon) -> dinput (input's
/// shape), dweight, dbias (weight's shape = input.shape[axis:]). The
/// derivative of layer_norm with that weight and any bias; the forward's
/// absent weight is a ones tensor here (autodiff passes one).
Status runLayerNormGrad(const KernelCall &call) {
  NormRows norm;
  if (Status status = readLayerNormGrad(call, norm); !status.ok())
    return status;
  return normalizeRowsBackward(call, norm.rows, norm.width, norm.epsilon,
                               /*center=*/true, &call.results[2]);
}

/// rms_norm_grad(dy, input, weight; epsilon) -> dinput (input's shape),
/// dweight (weight's shape = [input.shape[-1]]): the derivative of rms_norm
/// over the last axis with that weight.
Status runRmsNormGrad(const KernelCall &call) {
  NormRows norm;
  if (Status status = readRmsNormGrad(call, norm); !status.ok())
    return status;
  return normalizeRowsBackward(call, norm.rows, norm.width, norm.epsilon,
                               /*center=*/false, /*dbias=*/nullptr);
}

/// softmax_grad(dy, y; axis) -> dinput = y * (dy - sum(dy * y, axis)), y
/// being the softmax's OUTPUT; the sum in double.
Status runSoftmaxGrad(const KernelCall &call) {
  SoftmaxLines lines;
  if (Status status = readSoftmaxGrad(call, lines); !status.ok())
    return status;
  const TensorRef &dy = call.operands[0], &y = call.operands[1],
                  &dinput = call.results[0];
  int64_t length = lines.length, inner = lines.inner;
  return dispatchFloatType(call, "dy", dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    parallelForEachLine(lines, [&](int64_t first) {
      const T *g = dy.as<T>() + first, *p = y.as<T>() + first;
      T *dx = dinput.as<T>() + first;
      double dot = 0;
      for (int64_t j = 0; j < length; ++j)
        dot += static_cast<double>(g[j * inner]) * p[j * inner];
      for (int64_t j = 0; j < length; ++j)
        dx[j * inner] = static_cast<T>(static_cast<double>(p[j * inner]) *
                                       (g[j * inner] - dot));
    });
    return Status::success();
  });
}

} // namespace zplan::cpu::detail
