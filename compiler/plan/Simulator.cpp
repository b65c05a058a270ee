//===- Simulator.cpp - two-queue timeline of a plan -----------------------===//

#include "compiler/plan/Simulator.h"

#include <algorithm>

using namespace zplan;

Timeline zplan::simulate(const plan::Program &program,
                         const std::vector<double> &seconds) {
  Timeline timeline;
  timeline.finish.assign(program.instructions_size(), 0);
  double computeFree = 0, commFree = 0;
  // wait_for only names earlier instructions (the emitter issues a
  // collective after the compute before it, and a wait after its
  // collective), so one pass in index order sees every dependency done.
  for (const plan::Instruction &instruction : program.instructions()) {
    double ready = 0;
    for (uint32_t dependency : instruction.wait_for())
      if (dependency < instruction.index())
        ready = std::max(ready, timeline.finish[dependency]);
    double duration = seconds[instruction.index()];
    if (instruction.queue() == plan::COMM) {
      double start = std::max(commFree, ready);
      commFree = start + duration;
      timeline.finish[instruction.index()] = commFree;
      timeline.commSeconds += duration;
    } else {
      double start = std::max(computeFree, ready);
      timeline.exposedCommSeconds += start - computeFree;
      computeFree = start + duration;
      timeline.finish[instruction.index()] = computeFree;
      timeline.computeSeconds += duration;
    }
  }
  timeline.totalSeconds = std::max(computeFree, commFree);
  return timeline;
}
