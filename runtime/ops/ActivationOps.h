//===- ActivationOps.h - gelu's rules and derivatives, for every backend --===//
//
// Shared validation for every backend to call, and the formulas every
// backend compiles: gelu_grad differentiates exactly the function gelu
// evaluates, so every backend's gelu and gelu_grad read the approximate
// attribute by one rule and take the tanh form's argument, the constants
// and the derivatives from here (HostDevice.h: the CPU and CUDA kernels
// evaluate one definition).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_ACTIVATIONOPS_H
#define ZPLAN_RUNTIME_OPS_ACTIVATIONOPS_H

#include "runtime/ops/HostDevice.h"
#include "runtime/ops/KernelCall.h"

#include <cmath>

namespace zplan::ops {

constexpr double kSqrtHalf = 0.70710678118654752440;      // 1/sqrt(2)
constexpr double kSqrtTwoOverPi = 0.79788456080286535588; // sqrt(2/pi)
constexpr double kGeluTanhCubic = 0.044715;
constexpr double kInverseSqrtTwoPi = 0.39894228040143267794; // 1/sqrt(2 pi)

/// The "approximate" attribute: "none" (the default: x/2 (1 + erf(x /
/// sqrt 2))) or "tanh" (x/2 (1 + tanh(u))); anything else is an error.
Status readGeluApproximation(const KernelCall &call, bool &tanhForm);

/// Checks gelu_grad's operands (dy, input), result and attribute; reads
/// the form.
Status readGeluGrad(const KernelCall &call, bool &tanhForm);

/// u = sqrt(2/pi) (x + 0.044715 x^3) of the tanh form.
ZPLAN_HOST_DEVICE inline double geluTanhArgument(double x) {
  return kSqrtTwoOverPi * (x + kGeluTanhCubic * x * x * x);
}

/// d/dx of x/2 (1 + erf(x/sqrt 2)) = Phi(x) + x phi(x), Phi written with
/// erfc as the forward writes it (no cancellation for large negative x).
ZPLAN_HOST_DEVICE inline double geluDerivative(double x) {
  return 0.5 * std::erfc(-x * kSqrtHalf) +
         x * kInverseSqrtTwoPi * std::exp(-0.5 * x * x);
}

/// d/dx of x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3).
ZPLAN_HOST_DEVICE inline double geluTanhDerivative(double x) {
  double tanhU = std::tanh(geluTanhArgument(x));
  double du = kSqrtTwoOverPi * (1.0 + 3.0 * kGeluTanhCubic * x * x);
  return 0.5 * (1.0 + tanhU) + 0.5 * x * (1.0 - tanhU * tanhU) * du;
}

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_ACTIVATIONOPS_H
