//===- Loss.cu - the loss kernels on the device ---------------------------===//
//
// The CUDA twins of runtime/cpu/Loss.cpp, checked by the functions the CPU
// calls too (runtime/ops/LossOps.h): the row's maximum and its exps in
// the logits' type, every sum in double. The CPU checks every target before
// it writes anything; here the targets live on the device, so a kernel that
// meets a target outside [0, V) that is not ignore_index reports
// LabelOutOfRange (the backend fails the op at its next synchronize) and
// leaves that row out. bf16 logits (mixed precision) are widened as each
// element is loaded and computed in f32 (Logits).
//
// The mean divides by the number of rows not ignored, which only the
// targets know: it is counted on the device by one block (every thread
// strides over the targets, blockSum adds them), never read back.
//   - cross_entropy: one team per row (LineKernels.cuh) writes the row's
//     loss to the workspace; one block then adds them in a fixed order and
//     divides, so the loss is the same on every run.
//   - cross_entropy_grad: one block counts first and parks dloss / count in
//     the workspace; then one team per row writes the row's gradient.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/LineKernels.cuh"
#include "runtime/ops/LossOps.h"
#include "runtime/support/Bfloat16.h"

#include <type_traits>

namespace zplan::cuda {

using ops::CrossEntropyRows;

namespace {

/// The logits as the kernels read them: elements of T, the type the op
/// computes in, or bf16 ones (mixed precision's LM head, T = float) widened
/// as each is loaded -- what the f32 kernel reads from an f32 cast of them,
/// without that copy.
template <typename T, typename Stored> struct Logits {
  using Value = T;
  const Stored *data;
  __device__ T operator[](int64_t i) const {
    if constexpr (std::is_same_v<Stored, uint16_t>)
      return bf16ToFloat(data[i]);
    else
      return data[i];
  }
  __device__ Logits operator+(int64_t offset) const { return {data + offset}; }
};

/// Threads of the single-block kernels that count and add over all rows.
constexpr unsigned kTotalThreads = 1024;

/// The target of `row` if it counts in the loss; -1 when it is ignored or
/// out of range (reported then when `report`).
template <typename Index>
__device__ int64_t countedTarget(const Index *targets, int64_t row,
                                 const CrossEntropyRows &rows, bool report,
                                 uint32_t *errorWord, uint32_t errorTag) {
  int64_t target = targets[row];
  if (target == rows.ignoreIndex)
    return -1;
  if (target < 0 || target >= rows.classes) {
    if (report)
      reportKernelError(errorWord, errorTag, KernelError::LabelOutOfRange);
    return -1;
  }
  return target;
}

/// The sum over the team's row of exp(x - maximum), each exp in T, the sum
/// in double; `each(i, e)` sees every exp, for the gradient that keeps
/// them.
template <Team kTeam, typename T, typename Line, typename Each>
__device__ double sumShiftedExp(Line x, int64_t classes, T maximum,
                                double *scratch, Each &&each) {
  using Lines = LineTeam<kTeam>;
  double sum = 0;
  for (int64_t i = Lines::lane(); i < classes; i += Lines::size()) {
    T e = typedExp(x[i] - maximum);
    each(i, e);
    sum += e;
  }
  return Lines::sum(sum, scratch);
}

/// lossPerRow[row] = logsumexp(row) - row[target], 0 for a row left out.
template <Team kTeam, typename T, typename L, typename Index>
__global__ void rowLossKernel(L logits, const Index *targets,
                              CrossEntropyRows rows, double *lossPerRow,
                              uint32_t *errorWord, uint32_t errorTag) {
  using Lines = LineTeam<kTeam>;
  __shared__ T maxScratch[32];
  __shared__ double sumScratch[32];
  for (int64_t row = Lines::firstLine(); row < rows.rows;
       row += Lines::lineStride()) {
    int64_t target = countedTarget(targets, row, rows, Lines::lane() == 0,
                                   errorWord, errorTag);
    if (target < 0) { // uniform over the team: every thread read the same
      if (Lines::lane() == 0)
        lossPerRow[row] = 0;
      continue;
    }
    L x = logits + row * rows.classes;
    T maximum = lineMaximum<kTeam>(x, rows.classes, 1, maxScratch);
    double sum = sumShiftedExp<kTeam>(x, rows.classes, maximum, sumScratch,
                                      [](int64_t, T) {});
    if (Lines::lane() == 0)
      lossPerRow[row] = static_cast<double>(maximum) + log(sum) -
                        static_cast<double>(x[target]);
  }
}

/// The number of rows that count, added by one block of kTotalThreads:
/// every thread strides over the targets.
template <typename Index>
__device__ double
countTargets(const Index *targets, const CrossEntropyRows &rows, bool report,
             uint32_t *errorWord, uint32_t errorTag, double *scratch) {
  double counted = 0;
  for (int64_t row = threadIdx.x; row < rows.rows; row += blockDim.x)
    if (countedTarget(targets, row, rows, report, errorWord, errorTag) >= 0)
      counted += 1;
  return blockSum(counted, scratch);
}

/// loss = sum(lossPerRow) / count (0 when no row counts), one block.
template <typename T, typename Index>
__global__ void meanLossKernel(const double *lossPerRow, const Index *targets,
                               CrossEntropyRows rows, T *loss) {
  __shared__ double scratch[32];
  double total = 0;
  for (int64_t row = threadIdx.x; row < rows.rows; row += blockDim.x)
    total += lossPerRow[row];
  total = blockSum(total, scratch);
  // The rows were reported by rowLossKernel already.
  double counted =
      countTargets(targets, rows, /*report=*/false, nullptr, 0, scratch);
  if (threadIdx.x == 0)
    *loss = static_cast<T>(counted == 0 ? 0.0 : total / counted);
}

/// *scale = dloss / count (0 when no row counts), one block.
template <typename T, typename Index>
__global__ void gradientScaleKernel(const Index *targets, CrossEntropyRows rows,
                                    const T *dloss, double *scale,
                                    uint32_t *errorWord, uint32_t errorTag) {
  __shared__ double scratch[32];
  double counted = countTargets(targets, rows, /*report=*/true, errorWord,
                                errorTag, scratch);
  if (threadIdx.x == 0)
    *scale = counted == 0 ? 0.0 : static_cast<double>(*dloss) / counted;
}

/// dlogits = scale * (softmax(row) - onehot(target)), 0 for a row left
/// out: exp(x - maximum) parked in dlogits, then scaled by scale / sum, the
/// target's one subtracted before rounding (p - 1 near p = 1 keeps its
/// digits). Each thread rescales the exps it parked.
template <Team kTeam, typename T, typename L, typename Index>
__global__ void rowGradientKernel(L logits, const Index *targets,
                                  CrossEntropyRows rows, const double *scale,
                                  T *dlogits) {
  using Lines = LineTeam<kTeam>;
  __shared__ T maxScratch[32];
  __shared__ double sumScratch[32];
  double rowScale = *scale;
  int64_t classes = rows.classes;
  for (int64_t row = Lines::firstLine(); row < rows.rows;
       row += Lines::lineStride()) {
    L x = logits + row * classes;
    T *dx = dlogits + row * classes;
    // Out-of-range rows were reported by gradientScaleKernel.
    int64_t target = countedTarget(targets, row, rows, false, nullptr, 0);
    if (target < 0) {
      for (int64_t i = Lines::lane(); i < classes; i += Lines::size())
        dx[i] = T(0);
      continue;
    }
    T maximum = lineMaximum<kTeam>(x, classes, 1, maxScratch);
    double sum = sumShiftedExp<kTeam>(x, classes, maximum, sumScratch,
                                      [&](int64_t i, T e) { dx[i] = e; });
    double factor = rowScale / sum;
    for (int64_t i = Lines::lane(); i < classes; i += Lines::size())
      dx[i] = static_cast<T>(static_cast<double>(dx[i]) * factor -
                             (i == target ? rowScale : 0.0));
  }
}

/// logp[row] = row[target] - logsumexp(row), 0 for a row left out (an
/// out-of-range target is reported).
template <Team kTeam, typename T, typename L, typename Index>
__global__ void tokenLogprobsKernel(L logits, const Index *targets,
                                    CrossEntropyRows rows, T *logp,
                                    uint32_t *errorWord, uint32_t errorTag) {
  using Lines = LineTeam<kTeam>;
  __shared__ T maxScratch[32];
  __shared__ double sumScratch[32];
  for (int64_t row = Lines::firstLine(); row < rows.rows;
       row += Lines::lineStride()) {
    int64_t target = countedTarget(targets, row, rows, Lines::lane() == 0,
                                   errorWord, errorTag);
    if (target < 0) {
      if (Lines::lane() == 0)
        logp[row] = T(0);
      continue;
    }
    L x = logits + row * rows.classes;
    T maximum = lineMaximum<kTeam>(x, rows.classes, 1, maxScratch);
    double sum = sumShiftedExp<kTeam>(x, rows.classes, maximum, sumScratch,
                                      [](int64_t, T) {});
    if (Lines::lane() == 0)
      logp[row] = static_cast<T>(static_cast<double>(x[target]) -
                                 static_cast<double>(maximum) - log(sum));
  }
}

/// dlogits = dlogp[row] * (onehot(target) - softmax(row)), 0 for a row left
/// out; the exps parked in dlogits as rowGradientKernel parks them.
template <Team kTeam, typename T, typename L, typename Index>
__global__ void tokenLogprobsGradKernel(L logits, const Index *targets,
                                        CrossEntropyRows rows, const T *dlogp,
                                        T *dlogits, uint32_t *errorWord,
                                        uint32_t errorTag) {
  using Lines = LineTeam<kTeam>;
  __shared__ T maxScratch[32];
  __shared__ double sumScratch[32];
  int64_t classes = rows.classes;
  for (int64_t row = Lines::firstLine(); row < rows.rows;
       row += Lines::lineStride()) {
    L x = logits + row * classes;
    T *dx = dlogits + row * classes;
    int64_t target = countedTarget(targets, row, rows, Lines::lane() == 0,
                                   errorWord, errorTag);
    double scale = static_cast<double>(dlogp[row]);
    if (target < 0 || scale == 0) {
      for (int64_t i = Lines::lane(); i < classes; i += Lines::size())
        dx[i] = T(0);
      continue;
    }
    T maximum = lineMaximum<kTeam>(x, classes, 1, maxScratch);
    double sum = sumShiftedExp<kTeam>(x, classes, maximum, sumScratch,
                                      [&](int64_t i, T e) { dx[i] = e; });
    double factor = -scale / sum;
    for (int64_t i = Lines::lane(); i < classes; i += Lines::size())
      dx[i] = static_cast<T>(static_cast<double>(dx[i]) * factor +
                             (i == target ? scale : 0.0));
  }
}

/// entropy[row] = logsumexp(row) - sum(softmax(row) * row), as the CPU
/// computes it: log(sum e) - sum(e (x - max)) / sum e.
template <Team kTeam, typename T, typename L>
__global__ void tokenEntropyKernel(L logits, CrossEntropyRows rows,
                                   T *entropy) {
  using Lines = LineTeam<kTeam>;
  __shared__ T maxScratch[32];
  __shared__ double sumScratch[32];
  for (int64_t row = Lines::firstLine(); row < rows.rows;
       row += Lines::lineStride()) {
    L x = logits + row * rows.classes;
    T maximum = lineMaximum<kTeam>(x, rows.classes, 1, maxScratch);
    double weighted = 0;
    double sum = sumShiftedExp<kTeam>(
        x, rows.classes, maximum, sumScratch, [&](int64_t i, T e) {
          weighted += static_cast<double>(e) * (static_cast<double>(x[i]) -
                                                static_cast<double>(maximum));
        });
    weighted = Lines::sum(weighted, sumScratch);
    if (Lines::lane() == 0)
      entropy[row] = static_cast<T>(log(sum) - weighted / sum);
  }
}

/// Calls fn(TypeTag<T>{}, logits view) for T the type the op computes in
/// (ops::lossComputeType) and the view of the logits' storage.
template <typename Fn>
Status dispatchLogits(const KernelCall &call, const TensorRef &logits,
                      Fn &&fn) {
  if (logits.dtype == ElementType::BF16)
    return fn(ops::TypeTag<float>{},
              Logits<float, uint16_t>{logits.as<uint16_t>()});
  return ops::dispatchFloatType(call.host, "logits", logits.dtype,
                                [&](auto tag) -> Status {
                                  using T = typename decltype(tag)::type;
                                  return fn(tag, Logits<T, T>{logits.as<T>()});
                                });
}

/// Calls fn(TypeTag<Index>{}) for the targets' index type (i64 or i32, as
/// readCrossEntropy checked).
template <typename Fn> Status dispatchIndex(const TensorRef &targets, Fn &&fn) {
  if (targets.dtype == ElementType::I64)
    return fn(ops::TypeTag<int64_t>{});
  return fn(ops::TypeTag<int32_t>{});
}

/// dispatchLogits, then dispatchIndex of the targets:
/// fn(TypeTag<T>{}, logits view, TypeTag<Index>{}).
template <typename Fn>
Status dispatchLogitsAndTargets(const KernelCall &call, const TensorRef &logits,
                                const TensorRef &targets, Fn &&fn) {
  return dispatchLogits(call, logits, [&](auto tag, auto view) -> Status {
    return dispatchIndex(targets, [&](auto indexTag) -> Status {
      return fn(tag, view, indexTag);
    });
  });
}

} // namespace

Status runCrossEntropy(const KernelCall &call) {
  CrossEntropyRows rows;
  if (Status status = ops::readCrossEntropy(call.host, rows); !status.ok())
    return status;
  const TensorRef &logits = call.host.operands[0],
                  &targets = call.host.operands[1],
                  &loss = call.host.results[0];
  const DeviceContext &device = call.device;
  int64_t needed = rows.rows * int64_t(sizeof(double));
  if (needed > static_cast<int64_t>(device.workspaceBytes))
    return call.error("the losses of " + std::to_string(rows.rows) +
                      " rows need " + std::to_string(needed) +
                      " bytes of workspace, more than its " +
                      std::to_string(device.workspaceBytes));
  auto *lossPerRow = static_cast<double *>(device.workspace);
  return dispatchLogitsAndTargets(
      call, logits, targets, [&](auto tag, auto view, auto indexTag) -> Status {
        using T = typename decltype(tag)::type;
        using L = decltype(view);
        using Index = typename decltype(indexTag)::type;
        if (rows.rows > 0) {
          LineLaunch launch =
              chooseLineLaunch({rows.rows, rows.classes, 1}, device);
          launchLines(launch, [&](auto team) {
            rowLossKernel<decltype(team)::value, T, L, Index>
                <<<launch.blocks, launch.threads, 0, device.stream>>>(
                    view, targets.as<Index>(), rows, lossPerRow,
                    device.errorWord, call.errorTag());
          });
        }
        meanLossKernel<T, Index><<<1, kTotalThreads, 0, device.stream>>>(
            lossPerRow, targets.as<Index>(), rows, loss.as<T>());
        return launched(call);
      });
}

Status runCrossEntropyGrad(const KernelCall &call) {
  CrossEntropyRows rows;
  if (Status status = ops::readCrossEntropyGrad(call.host, rows); !status.ok())
    return status;
  const TensorRef &logits = call.host.operands[0],
                  &targets = call.host.operands[1],
                  &dloss = call.host.operands[2],
                  &dlogits = call.host.results[0];
  const DeviceContext &device = call.device;
  if (rows.rows == 0) // no targets to check, no gradient to write
    return Status::success();
  auto *scale = static_cast<double *>(device.workspace);
  return dispatchLogitsAndTargets(
      call, logits, targets, [&](auto tag, auto view, auto indexTag) -> Status {
        using T = typename decltype(tag)::type;
        using L = decltype(view);
        using Index = typename decltype(indexTag)::type;
        gradientScaleKernel<T, Index><<<1, kTotalThreads, 0, device.stream>>>(
            targets.as<Index>(), rows, dloss.as<T>(), scale, device.errorWord,
            call.errorTag());
        if (rows.classes > 0) {
          LineLaunch launch =
              chooseLineLaunch({rows.rows, rows.classes, 1}, device);
          launchLines(launch, [&](auto team) {
            rowGradientKernel<decltype(team)::value, T, L, Index>
                <<<launch.blocks, launch.threads, 0, device.stream>>>(
                    view, targets.as<Index>(), rows, scale, dlogits.as<T>());
          });
        }
        return launched(call);
      });
}

Status runTokenLogprobs(const KernelCall &call) {
  CrossEntropyRows rows;
  if (Status status = ops::readTokenLogprobs(call.host, rows); !status.ok())
    return status;
  const TensorRef &logits = call.host.operands[0],
                  &targets = call.host.operands[1],
                  &logp = call.host.results[0];
  const DeviceContext &device = call.device;
  if (rows.rows == 0)
    return Status::success();
  return dispatchLogitsAndTargets(
      call, logits, targets, [&](auto tag, auto view, auto indexTag) -> Status {
        using T = typename decltype(tag)::type;
        using L = decltype(view);
        using Index = typename decltype(indexTag)::type;
        LineLaunch launch =
            chooseLineLaunch({rows.rows, rows.classes, 1}, device);
        launchLines(launch, [&](auto team) {
          tokenLogprobsKernel<decltype(team)::value, T, L, Index>
              <<<launch.blocks, launch.threads, 0, device.stream>>>(
                  view, targets.as<Index>(), rows, logp.as<T>(),
                  device.errorWord, call.errorTag());
        });
        return launched(call);
      });
}

Status runTokenLogprobsGrad(const KernelCall &call) {
  CrossEntropyRows rows;
  if (Status status = ops::readTokenLogprobsGrad(call.host, rows); !status.ok())
    return status;
  const TensorRef &logits = call.host.operands[0],
                  &targets = call.host.operands[1],
                  &dlogp = call.host.operands[2],
                  &dlogits = call.host.results[0];
  const DeviceContext &device = call.device;
  if (rows.rows == 0 || rows.classes == 0)
    return Status::success();
  return dispatchLogitsAndTargets(
      call, logits, targets, [&](auto tag, auto view, auto indexTag) -> Status {
        using T = typename decltype(tag)::type;
        using L = decltype(view);
        using Index = typename decltype(indexTag)::type;
        LineLaunch launch =
            chooseLineLaunch({rows.rows, rows.classes, 1}, device);
        launchLines(launch, [&](auto team) {
          tokenLogprobsGradKernel<decltype(team)::value, T, L, Index>
              <<<launch.blocks, launch.threads, 0, device.stream>>>(
                  view, targets.as<Index>(), rows, dlogp.as<T>(),
                  dlogits.as<T>(), device.errorWord, call.errorTag());
        });
        return launched(call);
      });
}

Status runTokenEntropy(const KernelCall &call) {
  CrossEntropyRows rows;
  if (Status status = ops::readTokenEntropy(call.host, rows); !status.ok())
    return status;
  const TensorRef &logits = call.host.operands[0],
                  &entropy = call.host.results[0];
  const DeviceContext &device = call.device;
  if (rows.rows == 0)
    return Status::success();
  return dispatchLogits(call, logits, [&](auto tag, auto view) -> Status {
    using T = typename decltype(tag)::type;
    using L = decltype(view);
    LineLaunch launch = chooseLineLaunch({rows.rows, rows.classes, 1}, device);
    launchLines(launch, [&](auto team) {
      tokenEntropyKernel<decltype(team)::value, T, L>
          <<<launch.blocks, launch.threads, 0, device.stream>>>(
              view, rows, entropy.as<T>());
    });
    return launched(call);
  });
}

} // namespace zplan::cuda
