//===- LrSchedule.cpp - the learning rate of each optimizer step ---------===//

#include "runtime/train/LrSchedule.h"

#include <cmath>

using namespace zplan;
using namespace zplan::train;

Status zplan::train::parseLrDecay(std::string_view text, LrDecay &decay) {
  if (text == "constant")
    decay = LrDecay::Constant;
  else if (text == "cosine")
    decay = LrDecay::Cosine;
  else
    return failure("--lr-schedule takes constant or cosine, got ",
                   inQuotes(text));
  return Status::success();
}

double LrSchedule::at(uint64_t step) const {
  if (step < warmupSteps)
    return peak * static_cast<double>(step + 1) /
           static_cast<double>(warmupSteps);
  if (decay == LrDecay::Constant || totalSteps <= warmupSteps)
    return peak;
  double progress = static_cast<double>(step - warmupSteps) /
                    static_cast<double>(totalSteps - warmupSteps);
  if (progress > 1.0)
    progress = 1.0;
  return minimum + (peak - minimum) * 0.5 * (1.0 + std::cos(M_PI * progress));
}
