//===- TrainDefaults.h - zrun train's defaults carried by a plan ----------===//
//
// What a DeepSpeed config says of the run rather than of the schedule
// (gradient_accumulation_steps, gradient_clipping, the optimizer's params):
// zcc --ds-config reads them (compiler/DsConfig.h) and the plan carries
// them (plan.proto's TrainDefaults), so that `zrun PLAN train` runs as the
// config says without repeating it in flags. A flag given to zrun wins.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_PLAN_TRAINDEFAULTS_H
#define ZPLAN_COMPILER_PLAN_TRAINDEFAULTS_H

#include <cstdint>
#include <optional>

namespace zplan {

/// Each unset field leaves zrun's own default.
struct TrainDefaults {
  std::optional<uint64_t> gradAccum;
  std::optional<double> clipGradNorm;
  std::optional<double> lr;
  std::optional<double> beta1;
  std::optional<double> beta2;
  std::optional<double> eps;
  std::optional<double> weightDecay;

  bool any() const {
    return gradAccum || clipGradNorm || lr || beta1 || beta2 || eps ||
           weightDecay;
  }
};

} // namespace zplan

#endif // ZPLAN_COMPILER_PLAN_TRAINDEFAULTS_H
