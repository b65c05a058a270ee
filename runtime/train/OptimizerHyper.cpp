//===- OptimizerHyper.cpp - the `hyper` input of optimizer_step ----------===//

#include "runtime/train/OptimizerHyper.h"

#include <cmath>

using namespace zplan::train;

std::array<float, 8>
zplan::train::optimizerHyper(const OptimizerSettings &settings, double lr,
                             double gradScale, uint64_t t) {
  double steps = static_cast<double>(t);
  return {static_cast<float>(lr),
          static_cast<float>(settings.beta1),
          static_cast<float>(settings.beta2),
          static_cast<float>(settings.eps),
          static_cast<float>(settings.weightDecay),
          static_cast<float>(gradScale),
          static_cast<float>(1.0 - std::pow(settings.beta1, steps)),
          static_cast<float>(1.0 - std::pow(settings.beta2, steps))};
}
