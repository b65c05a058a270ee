//===- ActivationGrad.cpp - gelu_grad -------------------------------------===//
//
// The backward of the activations whose derivative is not itself a few nn
// ops. gelu's derivative is evaluated in double, from the same formula (and
// the tanh form's argument and constants, ActivationSupport.h) as
// Elementwise.cpp's gelu, and rounded once.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/ActivationSupport.h"

#include <cmath>

namespace zplan::cpu::detail {

namespace {

constexpr double kInverseSqrtTwoPi = 0.39894228040143267794; // 1/sqrt(2 pi)

/// d/dx of x/2 (1 + erf(x/sqrt 2)) = Phi(x) + x phi(x), Phi written with
/// erfc as the forward writes it (no cancellation for large negative x).
double geluDerivative(double x) {
  return 0.5 * std::erfc(-x * kSqrtHalf) +
         x * kInverseSqrtTwoPi * std::exp(-0.5 * x * x);
}

/// d/dx of x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
double geluTanhDerivative(double x) {
  double tanhU = std::tanh(geluTanhArgument(x));
  double du = kSqrtTwoOverPi * (1.0 + 3.0 * kGeluTanhCubic * x * x);
  return 0.5 * (1.0 + tanhU) + 0.5 * x * (1.0 - tanhU * tanhU) * du;
}

} // namespace

/// gelu_grad(dy, input; approximate "none"/"tanh") -> dinput = dy *
/// gelu'(input), input being the gelu's INPUT; dy, input and the result of
/// one float type and shape.
Status runGeluGrad(const KernelCall &call) {
  if (Status status = expectArity(call, 2, 2); !status.ok())
    return status;
  const TensorRef &dy = call.operands[0], &input = call.operands[1],
                  &dinput = call.results[0];
  bool tanhForm;
  if (Status status = readGeluApproximation(call, tanhForm); !status.ok())
    return status;
  for (const auto &[what, tensor] :
       {std::pair{"input", &input}, std::pair{"result", &dinput}}) {
    if (Status status = expectType(call, what, *tensor, dy.dtype); !status.ok())
      return status;
    if (Status status = expectShape(call, what, *tensor, dy.shape);
        !status.ok())
      return status;
  }
  int64_t count = dy.numElements();
  return dispatchFloatType(call, "dy", dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *g = dy.as<T>(), *x = input.as<T>();
    T *dx = dinput.as<T>();
    for (int64_t i = 0; i < count; ++i) {
      double derivative =
          tanhForm ? geluTanhDerivative(x[i]) : geluDerivative(x[i]);
      dx[i] = static_cast<T>(static_cast<double>(g[i]) * derivative);
    }
    return Status::success();
  });
}

} // namespace zplan::cpu::detail
