//===- ActivationGrad.cpp - gelu_grad -------------------------------------===//
//
// The backward of the activations whose derivative is not itself a few nn
// ops. gelu's derivative is evaluated in double, from the same formula (and
// the tanh form's argument and constants) as Elementwise.cpp's gelu, and
// rounded once; the derivatives and the checks live in
// runtime/ops/ActivationOps.h, shared with the CUDA kernel.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"
#include "runtime/ops/ActivationOps.h"

#include <cmath>

namespace zplan::cpu::detail {

/// gelu_grad(dy, input; approximate "none"/"tanh") -> dinput = dy *
/// gelu'(input), input being the gelu's INPUT; dy, input and the result of
/// one float type and shape.
Status runGeluGrad(const KernelCall &call) {
  bool tanhForm;
  if (Status status = readGeluGrad(call, tanhForm); !status.ok())
    return status;
  const TensorRef &dy = call.operands[0], &input = call.operands[1],
                  &dinput = call.results[0];
  int64_t count = dy.numElements();
  return dispatchFloatType(call, "dy", dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *g = dy.as<T>(), *x = input.as<T>();
    T *dx = dinput.as<T>();
    parallelFor(count, grainFor(4), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        double derivative =
            tanhForm ? geluTanhDerivative(x[i]) : geluDerivative(x[i]);
        dx[i] = static_cast<T>(static_cast<double>(g[i]) * derivative);
      }
    });
    return Status::success();
  });
}

} // namespace zplan::cpu::detail
