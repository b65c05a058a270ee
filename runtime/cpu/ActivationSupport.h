//===- ActivationSupport.h - what gelu and gelu_grad share ----------------===//
//
// gelu_grad (ActivationGrad.cpp) differentiates exactly the function gelu
// (Elementwise.cpp) evaluates, so both read the approximate attribute by
// one rule and take the tanh form's argument and the constants from here.
// readGeluApproximation is defined in Elementwise.cpp; private to
// runtime/cpu.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_ACTIVATIONSUPPORT_H
#define ZPLAN_RUNTIME_CPU_ACTIVATIONSUPPORT_H

#include "runtime/cpu/KernelSupport.h"

namespace zplan::cpu::detail {

constexpr double kSqrtHalf = 0.70710678118654752440;      // 1/sqrt(2)
constexpr double kSqrtTwoOverPi = 0.79788456080286535588; // sqrt(2/pi)
constexpr double kGeluTanhCubic = 0.044715;

/// The "approximate" attribute: "none" (the default: x/2 (1 + erf(x /
/// sqrt 2))) or "tanh" (x/2 (1 + tanh(u))); anything else is an error.
Status readGeluApproximation(const KernelCall &call, bool &tanhForm);

/// u = sqrt(2/pi) (x + 0.044715 x^3) of the tanh form.
/// constexpr: the CUDA kernels call it in device code too.
constexpr double geluTanhArgument(double x) {
  return kSqrtTwoOverPi * (x + kGeluTanhCubic * x * x * x);
}

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_ACTIVATIONSUPPORT_H
