//===- LrSchedule.h - the learning rate of each optimizer step -----------===//
//
// `zrun train --lr --warmup`: linear warmup from lr/W over W steps, then
// constant. Step s (0-based) of W >= 1 warmup steps gets lr * (s + 1) / W, so
// the first step takes lr / W and step W - 1 the full lr. `--lr-schedule
// cosine` then decays from lr to `--min-lr` along half a cosine over the
// remaining steps, as Hugging Face's get_cosine_schedule_with_warmup does (with
// a floor):
//   p = (s - W) / (S - W),  lr(s) = min + (lr - min) * (1 + cos(pi p)) / 2
// for total steps S, so the last step is just above the floor. The schedule
// is a pure function of the step, so a resumed run continues it exactly.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_LRSCHEDULE_H
#define ZPLAN_RUNTIME_TRAIN_LRSCHEDULE_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <string_view>

namespace zplan::train {

enum class LrDecay { Constant, Cosine };

/// Parses `--lr-schedule`: "constant" or "cosine".
Status parseLrDecay(std::string_view text, LrDecay &decay);

struct LrSchedule {
  double peak = 3e-4;
  /// W: 0 means no warmup.
  uint64_t warmupSteps = 0;
  LrDecay decay = LrDecay::Constant;
  /// The cosine's floor.
  double minimum = 0.0;
  /// S: the run's total optimizer steps (the cosine's length).
  uint64_t totalSteps = 1;

  /// The learning rate of optimizer step `step` (0-based).
  double at(uint64_t step) const;
};

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_LRSCHEDULE_H
