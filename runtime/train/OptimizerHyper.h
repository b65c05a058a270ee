//===- OptimizerHyper.h - the `hyper` input of optimizer_step ------------===//
//
// optimizer_step takes one f32[8] program input, `hyper`, that zrun writes
// before each optimizer step (TRAIN_SPEC 1):
//   [0] lr, [1] beta1 (adamw) or momentum (sgd), [2] beta2, [3] eps,
//   [4] weight_decay, [5] grad_scale, [6] 1 - beta1^t, [7] 1 - beta2^t
// with t the 1-based optimizer step (a resumed run continues t from its
// checkpoint's step). The bias corrections are computed in double and
// rounded once, so that they match torch's for t in the millions.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_OPTIMIZERHYPER_H
#define ZPLAN_RUNTIME_TRAIN_OPTIMIZERHYPER_H

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

/// `hyper` for optimizer step `t` (1-based) at learning rate `lr`, with
/// gradients scaled by `gradScale` (1 / (K * N) in `zrun train`). SGD reads
/// [0], [1], [4], [5] only; the rest is filled all the same.
std::array<float, 8> optimizerHyper(const OptimizerSettings &settings,
                                    double lr, double gradScale, uint64_t t);

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_OPTIMIZERHYPER_H
