//===- Normalization.cu - layer_norm, rms_norm, softmax on the device -----===//
//
// The CUDA twins of runtime/cpu/Normalization.cpp's row kernels, with the
// same checks (runtime/ops/NormalizationOps.h) and the same arithmetic: every
// sum of a row is kept in double (the CPU's sums are), the variance is a second
// pass over the centred row, softmax takes the row's maximum and its exps in
// the element type and sums them in double. A row is reduced by one team of
// threads (LineKernels.cuh: a warp for rows up to 1024 elements, a block for
// longer ones, a thread per line for a softmax over a strided axis), which
// re-reads the row from global memory for each pass: rows are at most a few
// tens of KiB, so the second and third reads hit L1/L2, and no shared-memory
// cache limits the width. Loads are scalar: a view may start at any element, so
// float4 is not known to be aligned.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/NormalizationSupport.cuh"

namespace zplan::cuda {

using ops::NormRows;

namespace {

/// y = (x - mean?) * inverse * weight? + bias?, row by row; weight and bias
/// null when absent.
template <Team kTeam, typename T>
__global__ void normalizeRowsKernel(const T *input, T *result, const T *weight,
                                    const T *bias, int64_t rows, int64_t width,
                                    double epsilon, bool center) {
  using Lines = LineTeam<kTeam>;
  __shared__ double scratch[32];
  for (int64_t row = Lines::firstLine(); row < rows;
       row += Lines::lineStride()) {
    const T *x = input + row * width;
    T *y = result + row * width;
    RowStatistics statistics =
        teamRowStatistics<kTeam>(x, width, epsilon, center, scratch);
    for (int64_t i = Lines::lane(); i < width; i += Lines::size()) {
      double normalized = (x[i] - statistics.mean) * statistics.inverse;
      if (weight)
        normalized *= weight[i];
      if (bias)
        normalized += bias[i];
      y[i] = static_cast<T>(normalized);
    }
  }
}

Status normalizeRows(const KernelCall &call, const NormRows &norm,
                     bool center) {
  const TensorRef &input = call.host.operands[0],
                  &result = call.host.results[0];
  return issueOnLines(
      call, "input", input.dtype, {norm.rows, norm.width, 1},
      [&](auto tag, auto team, const LineLaunch &launch) {
        using T = typename decltype(tag)::type;
        normalizeRowsKernel<decltype(team)::value, T>
            <<<launch.blocks, launch.threads, 0, call.device.stream>>>(
                input.as<T>(), result.as<T>(),
                norm.weight ? norm.weight->as<T>() : nullptr,
                norm.bias ? norm.bias->as<T>() : nullptr, norm.rows, norm.width,
                norm.epsilon, center);
      });
}

/// Softmax along each line: the maximum in T, exp(x - maximum) in T parked
/// in the result, their sum in double, then the result scaled by 1 / sum.
/// The thread that parks an exp is the one that rescales it.
template <Team kTeam, typename T>
__global__ void softmaxKernel(const T *input, T *result, LineShape shape) {
  using Lines = LineTeam<kTeam>;
  __shared__ T maxScratch[32];
  __shared__ double sumScratch[32];
  int64_t length = shape.length, inner = shape.inner;
  for (int64_t line = Lines::firstLine(); line < shape.lines;
       line += Lines::lineStride()) {
    const T *x = input + shape.first(line);
    T *y = result + shape.first(line);
    T maximum = lineMaximum<kTeam>(x, length, inner, maxScratch);
    double sum = 0;
    for (int64_t j = Lines::lane(); j < length; j += Lines::size()) {
      T e = typedExp(x[j * inner] - maximum);
      y[j * inner] = e;
      sum += e;
    }
    double inverse = 1.0 / Lines::sum(sum, sumScratch);
    for (int64_t j = Lines::lane(); j < length; j += Lines::size())
      y[j * inner] = static_cast<T>(y[j * inner] * inverse);
  }
}

} // namespace

Status runLayerNorm(const KernelCall &call) {
  NormRows norm;
  if (Status status = ops::readLayerNorm(call.host, norm); !status.ok())
    return status;
  return normalizeRows(call, norm, /*center=*/true);
}

Status runRmsNorm(const KernelCall &call) {
  NormRows norm;
  if (Status status = ops::readRmsNorm(call.host, norm); !status.ok())
    return status;
  return normalizeRows(call, norm, /*center=*/false);
}

Status runSoftmax(const KernelCall &call) {
  ops::SoftmaxLines lines;
  if (Status status = ops::readSoftmax(call.host, lines); !status.ok())
    return status;
  const TensorRef &input = call.host.operands[0],
                  &result = call.host.results[0];
  LineShape shape = softmaxLineShape(lines);
  return issueOnLines(
      call, "input", input.dtype, shape,
      [&](auto tag, auto team, const LineLaunch &launch) {
        using T = typename decltype(tag)::type;
        softmaxKernel<decltype(team)::value, T>
            <<<launch.blocks, launch.threads, 0, call.device.stream>>>(
                input.as<T>(), result.as<T>(), shape);
      });
}

} // namespace zplan::cuda
