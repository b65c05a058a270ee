//===- NormalizationGrad.cu - norm and softmax gradients on the device ----===//
//
// The CUDA twins of runtime/cpu/NormalizationGrad.cpp, with its checks
// (runtime/ops/NormalizationOps.h), its formulas and its sums in double. The
// input gradient is row-wise: one team per row (LineKernels.cuh) recomputes the
// forward's statistics with the forward's own function
// (NormalizationSupport.cuh) and writes dx.
//
// The weight and bias gradients sum over rows, column by column. Atomics
// would make them depend on the order blocks run in; instead a fixed
// two-stage reduction keeps them the same on every run:
//   1. the row kernel parks each row's (mean, inverse) in the workspace;
//   2. a column kernel splits the rows into `chunks` fixed ranges; the
//      thread of (column, chunk) sums its range in row order (neighbouring
//      threads read neighbouring columns: coalesced) into a partial in the
//      workspace;
//   3. a last kernel adds each column's partials in chunk order.
// The chunk count depends only on the shape and the device's SM count.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/NormalizationSupport.cuh"

namespace zplan::cuda {

using ops::NormRows;

namespace {

/// Threads per block of the column kernels (one column each).
constexpr unsigned kColumnThreads = 256;
/// Rows a chunk should have at least: fewer and the partials cost more to
/// write and add than the rows they sum.
constexpr int64_t kMinimumChunkRows = 16;
/// gridDim.y is at most 65535; far fewer chunks already fill the device.
constexpr int64_t kMaximumChunks = 1024;

/// dx of one row per team, with g = dy * weight and xhat = (x - mean?) *
/// inverse: dx = inverse * (g - mean(g)? - xhat * mean(g * xhat)). The
/// row's (mean, inverse) go to statistics[2 row], [2 row + 1].
template <Team kTeam, typename T>
__global__ void
normalizeRowsBackwardKernel(const T *dy, const T *input, const T *weight,
                            T *dinput, double *statistics, int64_t rows,
                            int64_t width, double epsilon, bool center) {
  using Lines = LineTeam<kTeam>;
  __shared__ double scratch[32];
  for (int64_t row = Lines::firstLine(); row < rows;
       row += Lines::lineStride()) {
    const T *x = input + row * width, *g = dy + row * width;
    T *dx = dinput + row * width;
    RowStatistics rowStatistics =
        teamRowStatistics<kTeam>(x, width, epsilon, center, scratch);
    double mean = rowStatistics.mean, inverse = rowStatistics.inverse;
    double sumScaled = 0, sumScaledXhat = 0;
    for (int64_t i = Lines::lane(); i < width; i += Lines::size()) {
      double xhat = (x[i] - mean) * inverse;
      double scaled = static_cast<double>(g[i]) * weight[i];
      sumScaled += scaled;
      sumScaledXhat += scaled * xhat;
    }
    sumScaled = Lines::sum(sumScaled, scratch);
    sumScaledXhat = Lines::sum(sumScaledXhat, scratch);
    double meanScaled = center ? sumScaled / static_cast<double>(width) : 0;
    double meanScaledXhat = sumScaledXhat / static_cast<double>(width);
    for (int64_t i = Lines::lane(); i < width; i += Lines::size()) {
      double xhat = (x[i] - mean) * inverse;
      double scaled = static_cast<double>(g[i]) * weight[i];
      dx[i] = static_cast<T>(inverse *
                             (scaled - meanScaled - xhat * meanScaledXhat));
    }
    if (Lines::lane() == 0) {
      statistics[2 * row] = mean;
      statistics[2 * row + 1] = inverse;
    }
  }
}

/// Stage 2: the thread of (column, chunk blockIdx.y) sums dy * xhat and dy
/// over its chunk's rows into weightPartials / biasPartials[chunk][column].
template <typename T>
__global__ void
columnPartialsKernel(const T *dy, const T *input, const double *statistics,
                     int64_t rows, int64_t width, int64_t chunkRows,
                     double *weightPartials, double *biasPartials) {
  int64_t chunk = blockIdx.y;
  int64_t begin = chunk * chunkRows;
  int64_t end = begin + chunkRows < rows ? begin + chunkRows : rows;
  ZPLAN_GRID_STRIDE(column, width) {
    double weightSum = 0, biasSum = 0;
    for (int64_t row = begin; row < end; ++row) {
      int64_t at = row * width + column;
      double xhat = (input[at] - statistics[2 * row]) * statistics[2 * row + 1];
      weightSum += static_cast<double>(dy[at]) * xhat;
      biasSum += dy[at];
    }
    weightPartials[chunk * width + column] = weightSum;
    biasPartials[chunk * width + column] = biasSum;
  }
}

/// Stage 3: dweight (and dbias, unless null) = the column's partials added
/// in chunk order, rounded once.
template <typename T>
__global__ void columnTotalsKernel(const double *weightPartials,
                                   const double *biasPartials, int64_t chunks,
                                   int64_t width, T *dweight, T *dbias) {
  ZPLAN_GRID_STRIDE(column, width) {
    double weightSum = 0, biasSum = 0;
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      weightSum += weightPartials[chunk * width + column];
      biasSum += biasPartials[chunk * width + column];
    }
    dweight[column] = static_cast<T>(weightSum);
    if (dbias)
      dbias[column] = static_cast<T>(biasSum);
  }
}

/// layer_norm_grad (center, dbias) and rms_norm_grad: the three stages.
Status normalizeRowsBackward(const KernelCall &call, const NormRows &norm,
                             bool center, const TensorRef *dbias) {
  const TensorRef &dy = call.host.operands[0], &input = call.host.operands[1],
                  &dinput = call.host.results[0],
                  &dweight = call.host.results[1];
  int64_t rows = norm.rows, width = norm.width;
  if (width == 0)
    return Status::success();

  // Enough (column block, chunk) blocks to fill the device a few times,
  // within what the workspace holds: 2 doubles a row, 2 a partial.
  const DeviceContext &device = call.device;
  int64_t columnBlocks = (width + kColumnThreads - 1) / kColumnThreads;
  int64_t wanted = std::max(1, device.properties.multiProcessorCount) * 8;
  int64_t chunks = std::min({(wanted + columnBlocks - 1) / columnBlocks,
                             (rows + kMinimumChunkRows - 1) / kMinimumChunkRows,
                             kMaximumChunks});
  int64_t statisticsBytes = 2 * rows * int64_t(sizeof(double));
  int64_t partialBytes = 2 * width * int64_t(sizeof(double));
  int64_t room =
      (static_cast<int64_t>(device.workspaceBytes) - statisticsBytes) /
      partialBytes;
  chunks = std::clamp<int64_t>(chunks, 1, std::max<int64_t>(room, 1));
  int64_t needed = statisticsBytes + chunks * partialBytes;
  if (needed > static_cast<int64_t>(device.workspaceBytes))
    return call.error("the weight gradient of " + std::to_string(rows) +
                      " rows of " + std::to_string(width) + " needs " +
                      std::to_string(needed) + " bytes of workspace, more " +
                      "than its " + std::to_string(device.workspaceBytes));
  int64_t chunkRows = (rows + chunks - 1) / chunks;
  auto *statistics = static_cast<double *>(device.workspace);
  double *weightPartials = statistics + 2 * rows;
  double *biasPartials = weightPartials + chunks * width;

  return ops::dispatchFloatType(call.host, "dy", dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (rows > 0) {
      LineLaunch launch = chooseLineLaunch({rows, width, 1}, device);
      launchLines(launch, [&](auto team) {
        normalizeRowsBackwardKernel<decltype(team)::value, T>
            <<<launch.blocks, launch.threads, 0, device.stream>>>(
                dy.as<T>(), input.as<T>(), norm.weight->as<T>(), dinput.as<T>(),
                statistics, rows, width, norm.epsilon, center);
      });
    }
    dim3 partialGrid(static_cast<unsigned>(columnBlocks),
                     static_cast<unsigned>(chunks));
    columnPartialsKernel<T><<<partialGrid, kColumnThreads, 0, device.stream>>>(
        dy.as<T>(), input.as<T>(), statistics, rows, width, chunkRows,
        weightPartials, biasPartials);
    columnTotalsKernel<T>
        <<<gridFor(width, kColumnThreads, device), kColumnThreads, 0,
           device.stream>>>(weightPartials, biasPartials, chunks, width,
                            dweight.as<T>(), dbias ? dbias->as<T>() : nullptr);
    return launched(call);
  });
}

/// dx = y * (dy - sum(dy * y)) along each line, the sum in double.
template <Team kTeam, typename T>
__global__ void softmaxBackwardKernel(const T *dy, const T *y, T *dinput,
                                      LineShape shape) {
  using Lines = LineTeam<kTeam>;
  __shared__ double scratch[32];
  int64_t length = shape.length, inner = shape.inner;
  for (int64_t line = Lines::firstLine(); line < shape.lines;
       line += Lines::lineStride()) {
    int64_t first = shape.first(line);
    const T *g = dy + first, *p = y + first;
    T *dx = dinput + first;
    double dot = 0;
    for (int64_t j = Lines::lane(); j < length; j += Lines::size())
      dot += static_cast<double>(g[j * inner]) * p[j * inner];
    dot = Lines::sum(dot, scratch);
    for (int64_t j = Lines::lane(); j < length; j += Lines::size())
      dx[j * inner] = static_cast<T>(static_cast<double>(p[j * inner]) *
                                     (g[j * inner] - dot));
  }
}

} // namespace

Status runLayerNormGrad(const KernelCall &call) {
  NormRows norm;
  if (Status status = ops::readLayerNormGrad(call.host, norm); !status.ok())
    return status;
  return normalizeRowsBackward(call, norm, /*center=*/true,
                               &call.host.results[2]);
}

Status runRmsNormGrad(const KernelCall &call) {
  NormRows norm;
  if (Status status = ops::readRmsNormGrad(call.host, norm); !status.ok())
    return status;
  return normalizeRowsBackward(call, norm, /*center=*/false,
                               /*dbias=*/nullptr);
}

Status runSoftmaxGrad(const KernelCall &call) {
  ops::SoftmaxLines lines;
  if (Status status = ops::readSoftmaxGrad(call.host, lines); !status.ok())
    return status;
  const TensorRef &dy = call.host.operands[0], &y = call.host.operands[1],
                  &dinput = call.host.results[0];
  LineShape shape = softmaxLineShape(lines);
  return issueOnLines(
      call, "dy", dy.dtype, shape,
      [&](auto tag, auto team, const LineLaunch &launch) {
        using T = typename decltype(tag)::type;
        softmaxBackwardKernel<decltype(team)::value, T>
            <<<launch.blocks, launch.threads, 0, call.device.stream>>>(
                dy.as<T>(), y.as<T>(), dinput.as<T>(), shape);
      });
}

} // namespace zplan::cuda
