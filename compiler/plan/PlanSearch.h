//===- PlanSearch.h - which schedule zcc keeps, and why -------------------===//
//
// zcc does not emit the first schedule it makes. Three searches sit between
// the passes and the plan file. (1) Budget retries: the schedule keeps the
// live bytes within the memory budget, but the arena planned afterwards can
// exceed them by its fragmentation; the schedule is then made again under a
// budget lowered by the overshoot, a few times. (2) Placement: under the
// default policy the prefetch pass moves one gather at a time in program
// order, and under a tight budget the early ones can take the headroom the
// later ones need, so the hook-distance (jit) placement is compiled too and
// kept when the cost model simulates it faster. (3) The carry: the copy
// zplan-cross-step-prefetch carries across decode steps sits at one arena
// offset in every program (docs/generation.md section 6), and under a tight
// budget the arena planned around it can exceed what the schedule's live
// bytes allowed for; the same schedule without the carry is kept then, when
// it fits. This component owns those decisions; the step that schedules and
// emits is injected, so the decisions are unit-tested on canned sizes and
// times without MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_PLAN_PLANSEARCH_H
#define ZPLAN_COMPILER_PLAN_PLANSEARCH_H

#include "compiler/ScheduleChoices.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace zplan {

/// What the search needs to know of one scheduled and emitted plan.
struct PlanMeasure {
  /// Per-rank bytes outside the arena: shards and persistent groups.
  uint64_t residentBytes = 0;
  uint64_t arenaBytes = 0;
  /// The arena's lower bound and where it peaks, for the over-budget message.
  uint64_t lowerBound = 0;
  int64_t peakIndex = -1;
  /// The most any program's arena placement exceeds its own live peak
  /// (fragmentation), which the scheduling passes do not see.
  uint64_t arenaExcess = 0;
  /// The simulated time of the plan's program on the hardware profile.
  double simulatedSeconds = 0;
  /// The plan carries a gather across decode steps (the module has
  /// `zplan.carry`).
  bool carried = false;
};

/// Schedules the module under `policy` with `budget` bytes per rank (0: no
/// budget) and emits its plan; with `crossStepPrefetch` false, without
/// zplan-cross-step-prefetch. The caller keeps each plan it emits, in call
/// order: PlanSearchResult refers to them by call index.
using ScheduleAndEmitFn = std::function<llvm::Expected<PlanMeasure>(
    SchedulePolicy policy, uint64_t budget, bool crossStepPrefetch)>;

/// Why a plan kept instead of its carried twin has no carry (the report's
/// "carried group" line).
inline constexpr llvm::StringLiteral kCarryOverBudget =
    "its copy, pinned at one arena offset, makes the arena exceed the budget";

/// One call of the ScheduleAndEmitFn the search made.
struct PlanAttempt {
  SchedulePolicy policy;
  /// The budget the schedule was given (lowered on a retry).
  uint64_t budget;
  /// Whether zplan-cross-step-prefetch ran.
  bool crossStepPrefetch = true;
  /// Empty when scheduling failed.
  std::optional<PlanMeasure> measure;
  /// Set on a plan kept instead of a carried one that did not fit the
  /// budget: the call of that carried plan, the same schedule otherwise.
  std::optional<size_t> carryDroppedFrom;
};

struct PlanSearchResult {
  /// Every call, in order.
  std::vector<PlanAttempt> attempts;
  /// The call whose plan zcc writes.
  size_t chosen = 0;
  /// The call whose plan is the jit placement, when one was compiled and
  /// fits: the report's baseline reuses it instead of scheduling again.
  std::optional<size_t> jitPlan;
  /// One line for the report: what was chosen and why.
  std::string summary;
};

/// The most budget retries after the first schedule.
inline constexpr int kMaxBudgetRetries = 3;

/// Runs the search for `policy` under `budget` (0: none). Under the default
/// policy both placements are searched; the hook-distance one is kept when it
/// simulates faster or when it alone fits. Fails when no candidate fits: with
/// the first schedule's error of `policy`, or, when that schedule fits the
/// live bytes but its arena does not, with that first overshoot explained (a
/// retry that cannot be scheduled explains less).
llvm::Expected<PlanSearchResult>
searchPlan(SchedulePolicy policy, uint64_t budget,
           const ScheduleAndEmitFn &scheduleAndEmit);

} // namespace zplan

#endif // ZPLAN_COMPILER_PLAN_PLANSEARCH_H
