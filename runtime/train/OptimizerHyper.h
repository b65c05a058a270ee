//===- OptimizerHyper.h - the hyper-parameters of optimizer_step ---------===//
//
// optimizer_step takes one input of role BINDING_ROLE_HYPER_PARAMETERS, an
// f32 tensor whose slots plan.proto's HyperParameter enum lists, that zrun
// writes before each optimizer step: the learning rate, beta1 (adamw) or
// momentum (sgd), beta2, eps, weight decay, the gradient scale, and the bias
// corrections 1 - beta1^t and 1 - beta2^t with t the 1-based optimizer step
// (a resumed run continues t from its checkpoint's step). The bias
// corrections are computed in double and rounded once, so that they match
// torch's for t in the millions.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_OPTIMIZERHYPER_H
#define ZPLAN_RUNTIME_TRAIN_OPTIMIZERHYPER_H

#include "runtime/plan/plan.pb.h"

#include <array>
#include <cstdint>

namespace zplan::train {

struct OptimizerSettings {
  /// beta1 for AdamW, momentum for SGD.
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.0;
};

/// The hyper-parameter tensor, indexed by plan::HyperParameter.
using HyperParameters = std::array<float, plan::HyperParameter_ARRAYSIZE>;

/// The hyper-parameters of optimizer step `t` (1-based) at learning rate
/// `lr`, with gradients scaled by `gradScale` (1 / (K * N) in `zrun
/// train`). SGD reads the learning rate, beta1 (its momentum), the weight
/// decay and the gradient scale only; the rest is filled all the same.
HyperParameters optimizerHyper(const OptimizerSettings &settings, double lr,
                               double gradScale, uint64_t t);

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_OPTIMIZERHYPER_H
