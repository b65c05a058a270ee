//===- OptimizerOps.h - adamw and sgd: checks, and the element updates ----===//
//
// Shared validation for every backend to call, and the formulas every
// backend compiles (HostDevice.h): the operand checks of adamw and sgd, and
// the update of one parameter element by each, in double with torch.optim's
// formulas and order, written once. The CPU kernels
// (runtime/cpu/Optimizers.cpp) loop over the elements with the
// hyper-parameters read on the host, the CUDA kernels
// (runtime/cuda/Optimizers.cu) run one thread per element with them read
// from the device buffer zrun writes.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_OPTIMIZEROPS_H
#define ZPLAN_RUNTIME_OPS_OPTIMIZEROPS_H

#include "runtime/ops/HostDevice.h"
#include "runtime/ops/KernelCall.h"

#include <cmath>
#include <vector>

namespace zplan::ops {

// The hyper tensor's slots are plan.proto's HyperParameter enum: zrun
// writes them before each optimizer step (runtime/train/OptimizerHyper.h),
// every backend's optimizer kernels read them here.

/// `names.size() + 1` operands, the last the f32 hyper tensor (one element
/// per plan::HyperParameter), the
/// others f32 of the parameter's shape (named by `names`); no results.
Status checkOptimizerOperands(const KernelCall &call,
                              const std::vector<const char *> &names);

/// One adamw step's constants, derived from the hyper tensor once.
struct AdamWStep {
  double beta1, beta2, epsilon, gradScale;
  /// lr / bc1, sqrt(bc2), 1 - lr * wd.
  double stepSize, correction2Root, decay;
  /// bc1 and bc2 in (0, 1] (t >= 1): otherwise the step is refused.
  bool valid;
};

ZPLAN_HOST_DEVICE inline AdamWStep adamwStep(const float *hyper) {
  AdamWStep step;
  double lr = hyper[plan::HYPER_LEARNING_RATE],
         correction1 = hyper[plan::HYPER_BIAS_CORRECTION1],
         correction2 = hyper[plan::HYPER_BIAS_CORRECTION2];
  step.beta1 = hyper[plan::HYPER_BETA1];
  step.beta2 = hyper[plan::HYPER_BETA2];
  step.epsilon = hyper[plan::HYPER_EPSILON];
  step.gradScale = hyper[plan::HYPER_GRADIENT_SCALE];
  step.valid = correction1 > 0 && correction1 <= 1 && correction2 > 0 &&
               correction2 <= 1;
  step.stepSize = lr / correction1;
  step.correction2Root = std::sqrt(correction2);
  step.decay = 1.0 - lr * hyper[plan::HYPER_WEIGHT_DECAY];
  return step;
}

/// torch.optim.AdamW (foreach=False) on one element, g = grad * grad_scale:
///   p *= 1 - lr * wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
///   p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps).
/// The caller zeroes the gradient.
ZPLAN_HOST_DEVICE inline void adamwUpdate(const AdamWStep &step, float &param,
                                          float grad, float &m, float &v) {
  double g = static_cast<double>(grad) * step.gradScale;
  double p = static_cast<double>(param) * step.decay;
  double first = step.beta1 * m + (1.0 - step.beta1) * g;
  double second = step.beta2 * v + (1.0 - step.beta2) * g * g;
  p -= step.stepSize * first /
       (std::sqrt(second) / step.correction2Root + step.epsilon);
  param = static_cast<float>(p);
  m = static_cast<float>(first);
  v = static_cast<float>(second);
}

/// One sgd step's constants.
struct SgdStep {
  double lr, momentum, weightDecay, gradScale;
};

ZPLAN_HOST_DEVICE inline SgdStep sgdStep(const float *hyper) {
  return {hyper[plan::HYPER_LEARNING_RATE], hyper[plan::HYPER_BETA1],
          hyper[plan::HYPER_WEIGHT_DECAY], hyper[plan::HYPER_GRADIENT_SCALE]};
}

/// torch.optim.SGD (dampening 0, no nesterov) on one element:
///   g = grad * grad_scale + wd * p; if momentum != 0 { buf = momentum buf
///   + g; g = buf }; p -= lr g.
/// The caller zeroes the gradient.
ZPLAN_HOST_DEVICE inline void sgdUpdate(const SgdStep &step, float &param,
                                        float grad, float &buffer) {
  double p = param;
  double g = static_cast<double>(grad) * step.gradScale + step.weightDecay * p;
  if (step.momentum != 0) {
    g = step.momentum * buffer + g;
    buffer = static_cast<float>(g);
  }
  param = static_cast<float>(p - step.lr * g);
}

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_OPTIMIZEROPS_H
