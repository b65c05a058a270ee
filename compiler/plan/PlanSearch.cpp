//===- PlanSearch.cpp - which schedule zcc keeps, and why -----------------===//
//
// The decisions are plain arithmetic on PlanMeasure; sizes are added with
// checked arithmetic, so a plan whose bytes wrap can never look as if it
// fitted the budget.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/PlanSearch.h"

#include "compiler/Errors.h"
#include "compiler/plan/Dumps.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/CheckedArithmetic.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>

using namespace zplan;

namespace {

/// The outcome of scheduling one policy under the budget, with retries.
struct BudgetOutcome {
  /// The attempt whose plan fits.
  size_t attempt = 0;
  int retries = 0;
  /// How far the first plan's memory was over the budget (0: it fitted).
  uint64_t firstOvershoot = 0;
};

} // namespace

/// Per-rank bytes of `measure`; nullopt when the sum wraps.
static std::optional<uint64_t> totalBytes(const PlanMeasure &measure) {
  return llvm::checkedAddUnsigned(measure.residentBytes, measure.arenaBytes);
}

/// Schedules `policy` under `target` and returns the call whose plan is
/// kept: the first one, unless it carries a gather across decode steps and
/// exceeds `budget` while the same schedule without the carry fits it.
static llvm::Expected<size_t>
scheduleKeepingCarryWithinBudget(SchedulePolicy policy, uint64_t target,
                                 uint64_t budget,
                                 const ScheduleAndEmitFn &scheduleAndEmit,
                                 std::vector<PlanAttempt> &attempts) {
  llvm::Expected<PlanMeasure> measure =
      scheduleAndEmit(policy, target, /*crossStepPrefetch=*/true);
  attempts.push_back({policy, target, true, std::nullopt, std::nullopt});
  if (!measure)
    return measure.takeError();
  size_t carried = attempts.size() - 1;
  attempts.back().measure = *measure;
  // A sum that wraps is searchBudget's to report.
  std::optional<uint64_t> total = totalBytes(*measure);
  if (!measure->carried || budget == 0 || !total || *total <= budget)
    return carried;
  llvm::Expected<PlanMeasure> without =
      scheduleAndEmit(policy, target, /*crossStepPrefetch=*/false);
  attempts.push_back({policy, target, false, std::nullopt, std::nullopt});
  if (!without) {
    llvm::consumeError(without.takeError());
    return carried;
  }
  attempts.back().measure = *without;
  std::optional<uint64_t> withoutTotal = totalBytes(*without);
  if (!withoutTotal || *withoutTotal > budget)
    return carried;
  attempts.back().carryDroppedFrom = carried;
  return attempts.size() - 1;
}

/// Schedules `policy` under `budget`; while the planned memory exceeds the
/// budget, schedules again under a budget lowered by the overshoot.
static llvm::Expected<BudgetOutcome>
searchBudget(SchedulePolicy policy, uint64_t budget,
             const ScheduleAndEmitFn &scheduleAndEmit,
             std::vector<PlanAttempt> &attempts) {
  BudgetOutcome outcome;
  uint64_t target = budget;
  std::string overBudget;
  for (int retry = 0;; ++retry) {
    llvm::Expected<size_t> kept = scheduleKeepingCarryWithinBudget(
        policy, target, budget, scheduleAndEmit, attempts);
    if (!kept) {
      // A tighter retry that cannot be scheduled: the first plan's overshoot
      // is the better explanation.
      if (retry > 0) {
        llvm::consumeError(kept.takeError());
        return makeError(overBudget);
      }
      return kept.takeError();
    }
    const PlanMeasure measure = *attempts[*kept].measure;
    std::optional<uint64_t> sum = totalBytes(measure);
    uint64_t total = sum.value_or(0);
    if (!sum)
      return makeError("the planned memory per rank (policy " + spell(policy) +
                       ") overflows 64 bits: shards and persistent groups " +
                       llvm::Twine(measure.residentBytes) + " B + arena " +
                       llvm::Twine(measure.arenaBytes) + " B");
    if (budget == 0 || total <= budget) {
      outcome.attempt = *kept;
      outcome.retries = retry;
      return outcome;
    }
    uint64_t over = total - budget;
    if (overBudget.empty()) {
      outcome.firstOvershoot = over;
      overBudget = ("the planned memory does not fit the budget of " +
                    llvm::Twine(budget) + " B per rank (policy " +
                    spell(policy) + "): shards and persistent groups " +
                    llvm::Twine(measure.residentBytes) + " B + arena " +
                    llvm::Twine(measure.arenaBytes) + " B (live peak " +
                    llvm::Twine(measure.lowerBound) + " B at instruction #" +
                    llvm::Twine(measure.peakIndex) +
                    ") = " + llvm::Twine(total) + " B, " + llvm::Twine(over) +
                    " B over, also when rescheduled under tighter budgets")
                       .str();
    }
    // The passes keep each program's live bytes under the target; the
    // arena planner adds its excess over that live peak on top. Lowering
    // the target by the overshoot alone gives back whatever room the passes
    // could not use, and the same schedule comes back over budget again; so
    // the retry also leaves room for the excess as measured.
    uint64_t excess = measure.arenaExcess;
    if (retry == kMaxBudgetRetries || over >= target || excess >= budget)
      return makeError(overBudget);
    target = std::min(target - over, budget - excess);
  }
}

static std::string describeRetries(uint64_t budget,
                                   const BudgetOutcome &outcome) {
  if (budget == 0)
    return "no budget";
  if (outcome.retries == 0)
    return "no budget retry";
  return std::to_string(outcome.retries) +
         (outcome.retries == 1 ? " budget retry" : " budget retries") +
         " (arena over by " + formatSize(outcome.firstOvershoot) + ")";
}

llvm::Expected<PlanSearchResult>
zplan::searchPlan(SchedulePolicy policy, uint64_t budget,
                  const ScheduleAndEmitFn &scheduleAndEmit) {
  PlanSearchResult result;
  llvm::Expected<BudgetOutcome> own =
      searchBudget(policy, budget, scheduleAndEmit, result.attempts);
  if (policy == SchedulePolicy::Jit) {
    if (!own)
      return own.takeError();
    result.chosen = own->attempt;
    result.jitPlan = result.chosen;
    result.summary = "plan search: jit policy, its only placement; " +
                     describeRetries(budget, *own);
    return result;
  }

  // The hook-distance placement, kept when it simulates faster, or when the
  // prefetch pass's placement does not fit the budget at all.
  llvm::Expected<BudgetOutcome> hook = searchBudget(
      SchedulePolicy::Jit, budget, scheduleAndEmit, result.attempts);
  if (!own) {
    if (!hook) {
      llvm::consumeError(hook.takeError());
      return own.takeError();
    }
    llvm::consumeError(own.takeError());
    result.chosen = result.jitPlan.emplace(hook->attempt);
    result.summary = "plan search: default policy with hook-distance "
                     "prefetch (the prefetch pass's placement does not fit "
                     "the budget); " +
                     describeRetries(budget, *hook);
    return result;
  }
  result.chosen = own->attempt;
  std::string retries = describeRetries(budget, *own);
  if (!hook) {
    llvm::consumeError(hook.takeError());
    result.summary = "plan search: default policy with the prefetch pass's "
                     "placement (hook-distance prefetch does not fit); " +
                     retries;
    return result;
  }
  result.jitPlan = hook->attempt;
  double ownSeconds = result.attempts[own->attempt].measure->simulatedSeconds;
  double hookSeconds = result.attempts[hook->attempt].measure->simulatedSeconds;
  if (hookSeconds < ownSeconds) {
    result.chosen = hook->attempt;
    result.summary =
        "plan search: default policy with hook-distance prefetch "
        "(simulated " +
        formatSeconds(hookSeconds) + " vs " + formatSeconds(ownSeconds) +
        " with the prefetch pass's); " + describeRetries(budget, *hook);
    return result;
  }
  result.summary = "plan search: default policy with the prefetch pass's "
                   "placement (simulated " +
                   formatSeconds(ownSeconds) + " vs " +
                   formatSeconds(hookSeconds) +
                   " with hook-distance prefetch); " + retries;
  return result;
}
