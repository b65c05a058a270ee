//===- Simulator.cpp - two-queue timeline of a plan -----------------------===//

#include "compiler/plan/Simulator.h"

#include <algorithm>
#include <cmath>

using namespace zplan;

Timeline zplan::simulate(const plan::Program &program,
                         const std::vector<double> &seconds,
                         const CostModel *cost) {
  Timeline timeline;
  timeline.finish.assign(program.instructions_size(), 0);
  double computeFree = 0, commFree = 0;
  // wait_for only names earlier instructions (the emitter issues a
  // collective after the compute before it, and a wait after its
  // collective), so one pass in index order sees every dependency done.
  for (const plan::Instruction &instruction : program.instructions()) {
    uint32_t index = instruction.index();
    if (index >= timeline.finish.size())
      continue;
    double ready = 0;
    for (uint32_t dependency : instruction.wait_for())
      if (dependency < index)
        ready = std::max(ready, timeline.finish[dependency]);
    // An instruction without a time (or with a non-finite one, which would
    // poison every total after it) counts as instantaneous.
    double duration = index < seconds.size() && std::isfinite(seconds[index])
                          ? std::max(seconds[index], 0.0)
                          : 0.0;
    if (instruction.queue() == plan::COMM) {
      double start = std::max(commFree, ready);
      commFree = start + duration;
      timeline.finish[index] = commFree;
      timeline.commSeconds += duration;
    } else {
      double start = std::max(computeFree, ready);
      timeline.exposedCommSeconds += start - computeFree;
      // The collectives issued before it are still running until commFree.
      if (cost)
        duration =
            cost->computeSecondsBesideCollective(duration, commFree - start);
      computeFree = start + duration;
      timeline.finish[index] = computeFree;
      timeline.computeSeconds += duration;
    }
  }
  timeline.totalSeconds = std::max(computeFree, commFree);
  return timeline;
}
