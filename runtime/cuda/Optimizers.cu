//===- Optimizers.cu - adamw and sgd on the device, in place --------------===//
//
// The CUDA twins of runtime/cpu/Optimizers.cpp: one thread per element
// (grid-stride) applies the same per-element update, in double, written
// once in runtime/ops/OptimizerOps.h, and zeroes the gradient
// accumulator as the CPU kernel does. The hyper-parameters are an f32[8]
// device buffer that zrun writes each step: every thread reads them there
// (eight cached loads), never the host, so a step's instruction can be
// issued before the step's values are written. adamw refuses bias
// corrections outside (0, 1] as the CPU does: then no element is touched
// and HyperParameterOutOfRange is reported.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceSupport.cuh"
#include "runtime/ops/OptimizerOps.h"

namespace zplan::cuda {

using ops::AdamWStep;
using ops::adamwStep;
using ops::adamwUpdate;
using ops::checkOptimizerOperands;
using ops::SgdStep;
using ops::sgdStep;
using ops::sgdUpdate;

namespace {

constexpr unsigned kThreads = 256;

__global__ void adamwKernel(float *param, float *grad, float *m, float *v,
                            const float *hyper, int64_t count,
                            uint32_t *errorWord, uint32_t errorTag) {
  AdamWStep step = adamwStep(hyper);
  if (!step.valid) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
      reportKernelError(errorWord, errorTag,
                        KernelError::HyperParameterOutOfRange);
    return;
  }
  ZPLAN_GRID_STRIDE(i, count) {
    adamwUpdate(step, param[i], grad[i], m[i], v[i]);
    grad[i] = 0.0f;
  }
}

__global__ void sgdKernel(float *param, float *grad, float *buffer,
                          const float *hyper, int64_t count) {
  SgdStep step = sgdStep(hyper);
  ZPLAN_GRID_STRIDE(i, count) {
    sgdUpdate(step, param[i], grad[i], buffer[i]);
    grad[i] = 0.0f;
  }
}

} // namespace

Status runAdamW(const KernelCall &call) {
  if (Status status =
          checkOptimizerOperands(call.host, {"param", "grad", "m", "v"});
      !status.ok())
    return status;
  const std::vector<TensorRef> &operands = call.host.operands;
  int64_t count = operands[0].numElements();
  // Launched even for an empty parameter: the hyper check still runs.
  adamwKernel<<<gridFor(count, kThreads, call.device), kThreads, 0,
                call.device.stream>>>(
      operands[0].as<float>(), operands[1].as<float>(), operands[2].as<float>(),
      operands[3].as<float>(), operands[4].as<float>(), count,
      call.device.errorWord, call.errorTag());
  return launched(call);
}

Status runSgd(const KernelCall &call) {
  if (Status status = checkOptimizerOperands(
          call.host, {"param", "grad", "momentum_buffer"});
      !status.ok())
    return status;
  const std::vector<TensorRef> &operands = call.host.operands;
  int64_t count = operands[0].numElements();
  if (count == 0)
    return Status::success();
  sgdKernel<<<gridFor(count, kThreads, call.device), kThreads, 0,
              call.device.stream>>>(
      operands[0].as<float>(), operands[1].as<float>(), operands[2].as<float>(),
      operands[3].as<float>(), count);
  return launched(call);
}

} // namespace zplan::cuda
