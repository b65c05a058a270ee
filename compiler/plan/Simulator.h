//===- Simulator.h - two-queue timeline of a plan -------------------------===//
//
// Replays a program's instructions on the two queues the runtime has, with
// each instruction's cost-model time: the compute queue runs its
// instructions in order, the comm queue its collectives in order, and an
// instruction starts only when the ones in its wait_for have finished. The
// compute queue's idle time spent waiting for collectives is the *exposed*
// communication: what prefetching failed to hide.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_PLAN_SIMULATOR_H
#define ZPLAN_COMPILER_PLAN_SIMULATOR_H

#include "compiler/analysis/CostModel.h"
#include "runtime/plan/plan.pb.h"

#include <vector>

namespace zplan {

struct Timeline {
  double totalSeconds = 0;
  double computeSeconds = 0;
  double commSeconds = 0;
  /// Time the compute queue sat idle waiting for collectives.
  double exposedCommSeconds = 0;
  /// Per instruction: when it finished.
  std::vector<double> finish;
};

/// `seconds[i]` is instruction i's duration; a missing, negative or
/// non-finite one counts as zero, so the totals are always finite. A compute
/// instruction that starts while the comm queue is busy runs slower by
/// CostModel::computeSecondsBesideCollective of `cost` (0 on a GPU profile:
/// no change); null: as if 0.
Timeline simulate(const plan::Program &program,
                  const std::vector<double> &seconds,
                  const CostModel *cost = nullptr);

} // namespace zplan

#endif // ZPLAN_COMPILER_PLAN_SIMULATOR_H
