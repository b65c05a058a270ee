//===- ActivationGrad.cu - gelu_grad on the device ------------------------===//
//
// The CUDA twin of runtime/cpu/ActivationGrad.cpp: one thread per element
// (grid-stride) evaluates gelu's derivative in double with the very
// function the CPU kernel calls (runtime/ops/ActivationOps.h, compiled
// for the device too) and rounds dy * gelu'(x) once.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceSupport.cuh"
#include "runtime/ops/ActivationOps.h"

namespace zplan::cuda {

namespace {

constexpr unsigned kThreads = 256;

template <typename T>
__global__ void geluGradKernel(const T *dy, const T *input, T *dinput,
                               int64_t count, bool tanhForm) {
  ZPLAN_GRID_STRIDE(i, count) {
    double x = input[i];
    double derivative =
        tanhForm ? ops::geluTanhDerivative(x) : ops::geluDerivative(x);
    dinput[i] = static_cast<T>(static_cast<double>(dy[i]) * derivative);
  }
}

} // namespace

Status runGeluGrad(const KernelCall &call) {
  bool tanhForm;
  if (Status status = ops::readGeluGrad(call.host, tanhForm); !status.ok())
    return status;
  const TensorRef &dy = call.host.operands[0], &input = call.host.operands[1],
                  &dinput = call.host.results[0];
  int64_t count = dy.numElements();
  return ops::dispatchFloatType(call.host, "dy", dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (count == 0)
      return Status::success();
    geluGradKernel<T><<<gridFor(count, kThreads, call.device), kThreads, 0,
                        call.device.stream>>>(dy.as<T>(), input.as<T>(),
                                              dinput.as<T>(), count, tanhForm);
    return launched(call);
  });
}

} // namespace zplan::cuda
