//===- OptimizerHyper.cpp - the hyper-parameters of optimizer_step -------===//

#include "runtime/train/OptimizerHyper.h"

#include <cmath>

using namespace zplan;
using namespace zplan::train;

HyperParameters zplan::train::optimizerHyper(const OptimizerSettings &settings,
                                             double lr, double gradScale,
                                             uint64_t t) {
  double steps = static_cast<double>(t);
  HyperParameters hyper{};
  hyper[plan::HYPER_LEARNING_RATE] = static_cast<float>(lr);
  hyper[plan::HYPER_BETA1] = static_cast<float>(settings.beta1);
  hyper[plan::HYPER_BETA2] = static_cast<float>(settings.beta2);
  hyper[plan::HYPER_EPSILON] = static_cast<float>(settings.eps);
  hyper[plan::HYPER_WEIGHT_DECAY] = static_cast<float>(settings.weightDecay);
  hyper[plan::HYPER_GRADIENT_SCALE] = static_cast<float>(gradScale);
  hyper[plan::HYPER_BIAS_CORRECTION1] =
      static_cast<float>(1.0 - std::pow(settings.beta1, steps));
  hyper[plan::HYPER_BIAS_CORRECTION2] =
      static_cast<float>(1.0 - std::pow(settings.beta2, steps));
  return hyper;
}
