//===- PlanSearchTest.cpp - which plan zcc keeps, and why -----------------===//
//
// The plan search's decisions on canned sizes and times: the "schedule and
// emit" step is a table of answers per (policy, budget), so no MLIR runs.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/PlanSearch.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <utility>

using namespace zplan;

namespace {

std::string errorText(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "";
}

/// A canned scheduler: the answer for each (policy, budget), from
/// `answers` when the carry may be made and `withoutCarry` when it may not;
/// a pair not in the table cannot be scheduled. Records the calls.
struct CannedScheduler {
  std::map<std::pair<SchedulePolicy, uint64_t>, PlanMeasure> answers;
  std::map<std::pair<SchedulePolicy, uint64_t>, PlanMeasure> withoutCarry;
  std::vector<std::pair<SchedulePolicy, uint64_t>> calls;
  /// Per call: whether it allowed cross-step prefetch.
  std::vector<bool> carryAllowed;

  ScheduleAndEmitFn fn() {
    return [this](SchedulePolicy policy, uint64_t budget,
                  bool crossStepPrefetch) -> llvm::Expected<PlanMeasure> {
      calls.push_back({policy, budget});
      carryAllowed.push_back(crossStepPrefetch);
      const auto &table = crossStepPrefetch ? answers : withoutCarry;
      auto found = table.find({policy, budget});
      if (found == table.end())
        return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                       "cannot schedule " +
                                           spell(policy).str() + " under " +
                                           std::to_string(budget));
      return found->second;
    };
  }

  /// The (policy, budget) of call `index`.
  std::pair<SchedulePolicy, uint64_t> attemptsOf(size_t index) const {
    return calls.at(index);
  }
};

PlanMeasure measure(uint64_t resident, uint64_t arena, double seconds) {
  PlanMeasure result;
  result.residentBytes = resident;
  result.arenaBytes = arena;
  result.lowerBound = arena;
  result.peakIndex = 7;
  result.simulatedSeconds = seconds;
  return result;
}

/// A plan that carries a gather across decode steps.
PlanMeasure carrying(uint64_t resident, uint64_t arena, double seconds) {
  PlanMeasure result = measure(resident, arena, seconds);
  result.carried = true;
  return result;
}

TEST(PlanSearch, NoBudgetKeepsTheFirstPlan) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Jit, 0}] = measure(100, 1000000, 2.0);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Jit, 0, scheduler.fn());
  ASSERT_TRUE(static_cast<bool>(result)) << errorText(result.takeError());
  EXPECT_EQ(result->chosen, 0u);
  EXPECT_EQ(scheduler.calls.size(), 1u);
  EXPECT_EQ(result->summary, "plan search: jit policy, its only placement; "
                             "no budget");
}

TEST(PlanSearch, OvershootRetriesUnderATighterBudget) {
  CannedScheduler scheduler;
  // 100 + 1100 = 1200 B against 1000: 200 B over, so the retry gets 800.
  scheduler.answers[{SchedulePolicy::Jit, 1000}] = measure(100, 1100, 1.0);
  scheduler.answers[{SchedulePolicy::Jit, 800}] = measure(100, 880, 1.2);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Jit, 1000, scheduler.fn());
  ASSERT_TRUE(static_cast<bool>(result)) << errorText(result.takeError());
  ASSERT_EQ(scheduler.calls.size(), 2u);
  EXPECT_EQ(scheduler.calls[1].second, 800u);
  EXPECT_EQ(result->chosen, 1u);
  EXPECT_EQ(result->attempts[1].budget, 800u);
  EXPECT_EQ(result->summary, "plan search: jit policy, its only placement; "
                             "1 budget retry (arena over by 200 B)");
}

TEST(PlanSearch, UnschedulableRetryReportsTheFirstOvershoot) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Jit, 1000}] = measure(100, 1100, 1.0);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Jit, 1000, scheduler.fn());
  ASSERT_FALSE(static_cast<bool>(result));
  std::string message = errorText(result.takeError());
  EXPECT_EQ(message,
            "the planned memory does not fit the budget of 1000 B per rank "
            "(policy jit): shards and persistent groups 100 B + arena 1100 B "
            "(live peak 1100 B at instruction #7) = 1200 B, 200 B over, also "
            "when rescheduled under tighter budgets");
  EXPECT_EQ(message.find("cannot schedule"), std::string::npos);
}

TEST(PlanSearch, FirstScheduleFailureIsReportedAsIs) {
  CannedScheduler scheduler;
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Default, 1000, scheduler.fn());
  ASSERT_FALSE(static_cast<bool>(result));
  EXPECT_EQ(errorText(result.takeError()),
            "cannot schedule default under 1000");
}

TEST(PlanSearch, RetriesStopAfterTheLimit) {
  CannedScheduler scheduler;
  // Every retry is 10 B over whatever it was given.
  for (uint64_t budget = 1000; budget > 900; --budget)
    scheduler.answers[{SchedulePolicy::Jit, budget}] = measure(0, 1010, 1.0);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Jit, 1000, scheduler.fn());
  ASSERT_FALSE(static_cast<bool>(result));
  llvm::consumeError(result.takeError());
  EXPECT_EQ(scheduler.calls.size(), 1u + kMaxBudgetRetries);
}

TEST(PlanSearch, WrappingSizesAreAnErrorNotAFit) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Jit, 1000}] =
      measure(UINT64_MAX - 10, 100, 1.0);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Jit, 1000, scheduler.fn());
  ASSERT_FALSE(static_cast<bool>(result));
  EXPECT_NE(errorText(result.takeError()).find("overflows 64 bits"),
            std::string::npos);
}

TEST(PlanSearch, FasterHookDistancePlacementIsChosen) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Default, 0}] = measure(100, 1000, 0.4672);
  scheduler.answers[{SchedulePolicy::Jit, 0}] = measure(100, 900, 0.4108);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Default, 0, scheduler.fn());
  ASSERT_TRUE(static_cast<bool>(result)) << errorText(result.takeError());
  EXPECT_EQ(result->chosen, 1u);
  ASSERT_TRUE(result->jitPlan.has_value());
  EXPECT_EQ(*result->jitPlan, 1u);
  EXPECT_EQ(result->summary,
            "plan search: default policy with hook-distance prefetch "
            "(simulated 410.800 ms vs 467.200 ms with the prefetch pass's); "
            "no budget");
}

TEST(PlanSearch, SlowerHookDistancePlacementIsNotChosen) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Default, 0}] = measure(100, 1000, 0.3);
  scheduler.answers[{SchedulePolicy::Jit, 0}] = measure(100, 900, 0.5);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Default, 0, scheduler.fn());
  ASSERT_TRUE(static_cast<bool>(result)) << errorText(result.takeError());
  EXPECT_EQ(result->chosen, 0u);
  EXPECT_EQ(*result->jitPlan, 1u);
  EXPECT_NE(result->summary.find("prefetch pass's placement (simulated "
                                 "300.000 ms vs 500.000 ms"),
            std::string::npos);
}

TEST(PlanSearch, HookDistanceThatDoesNotFitIsSkipped) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Default, 2000}] = measure(100, 1000, 0.3);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Default, 2000, scheduler.fn());
  ASSERT_TRUE(static_cast<bool>(result)) << errorText(result.takeError());
  EXPECT_EQ(result->chosen, 0u);
  EXPECT_FALSE(result->jitPlan.has_value());
  EXPECT_EQ(result->summary,
            "plan search: default policy with the prefetch pass's placement "
            "(hook-distance prefetch does not fit); no budget retry");
}

TEST(PlanSearch, ChosenHookPlacementReportsItsOwnRetries) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Default, 2048}] = measure(0, 2000, 0.5);
  // The hook placement overshoots by 12 B, then fits.
  scheduler.answers[{SchedulePolicy::Jit, 2048}] = measure(0, 2060, 0.4);
  scheduler.answers[{SchedulePolicy::Jit, 2036}] = measure(0, 2030, 0.4);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Default, 2048, scheduler.fn());
  ASSERT_TRUE(static_cast<bool>(result)) << errorText(result.takeError());
  EXPECT_EQ(result->chosen, 2u);
  EXPECT_NE(result->summary.find("; 1 budget retry (arena over by 12 B)"),
            std::string::npos)
      << result->summary;
}

TEST(PlanSearch, HookDistanceIsKeptWhenThePrefetchPlacementDoesNotFit) {
  CannedScheduler scheduler;
  // The prefetch pass's plan is 10 B over and cannot be rescheduled tighter.
  scheduler.answers[{SchedulePolicy::Default, 1000}] = measure(0, 1010, 0.3);
  scheduler.answers[{SchedulePolicy::Jit, 1000}] = measure(0, 990, 0.5);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Default, 1000, scheduler.fn());
  ASSERT_TRUE(static_cast<bool>(result)) << errorText(result.takeError());
  EXPECT_EQ(scheduler.attemptsOf(result->chosen).first, SchedulePolicy::Jit);
  EXPECT_EQ(result->summary,
            "plan search: default policy with hook-distance prefetch (the "
            "prefetch pass's placement does not fit the budget); no budget "
            "retry");
}

TEST(PlanSearch, NeitherPlacementFitsReportsTheDefaultPolicysError) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Default, 1000}] = measure(0, 1010, 0.3);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Default, 1000, scheduler.fn());
  ASSERT_FALSE(static_cast<bool>(result));
  EXPECT_NE(errorText(result.takeError()).find("(policy default)"),
            std::string::npos);
}

// The carried copy pins its arena offset in every program: a carried plan
// over the budget gives way to the same schedule without the carry, which
// fits. The jit placement, which never carries, is searched as before.
TEST(PlanSearch, CarryOverBudgetFallsBackToTheScheduleWithoutIt) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Default, 1000}] = carrying(100, 1000, 1.0);
  scheduler.withoutCarry[{SchedulePolicy::Default, 1000}] =
      measure(100, 800, 1.2);
  scheduler.answers[{SchedulePolicy::Jit, 1000}] = measure(100, 850, 2.0);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Default, 1000, scheduler.fn());
  ASSERT_TRUE(static_cast<bool>(result)) << errorText(result.takeError());
  ASSERT_EQ(scheduler.calls.size(), 3u);
  EXPECT_EQ(scheduler.carryAllowed, (std::vector<bool>{true, false, true}));
  EXPECT_EQ(scheduler.attemptsOf(1),
            std::make_pair(SchedulePolicy::Default, uint64_t(1000)));
  EXPECT_EQ(result->chosen, 1u);
  EXPECT_FALSE(result->attempts[1].crossStepPrefetch);
  ASSERT_TRUE(result->attempts[1].carryDroppedFrom.has_value());
  EXPECT_EQ(*result->attempts[1].carryDroppedFrom, 0u);
  EXPECT_FALSE(result->attempts[0].carryDroppedFrom.has_value());
  EXPECT_EQ(*result->jitPlan, 2u);
  EXPECT_EQ(result->summary,
            "plan search: default policy with the prefetch pass's placement "
            "(simulated 1.200 s vs 2.000 s with hook-distance prefetch); no "
            "budget retry");
}

TEST(PlanSearch, CarryWithinTheBudgetIsKept) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Default, 1000}] = carrying(100, 900, 1.0);
  scheduler.withoutCarry[{SchedulePolicy::Default, 1000}] =
      measure(100, 800, 1.2);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Default, 1000, scheduler.fn());
  ASSERT_TRUE(static_cast<bool>(result)) << errorText(result.takeError());
  EXPECT_EQ(result->chosen, 0u);
  EXPECT_FALSE(result->attempts[0].carryDroppedFrom.has_value());
  // The default placement, then the jit one: never without the carry.
  EXPECT_EQ(scheduler.carryAllowed, (std::vector<bool>{true, true}));
}

TEST(PlanSearch, CarryIsKeptWithoutABudget) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Default, 0}] = carrying(100, 5000, 1.0);
  scheduler.answers[{SchedulePolicy::Jit, 0}] = measure(100, 900, 2.0);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Default, 0, scheduler.fn());
  ASSERT_TRUE(static_cast<bool>(result)) << errorText(result.takeError());
  EXPECT_EQ(result->chosen, 0u);
  EXPECT_EQ(scheduler.carryAllowed, (std::vector<bool>{true, true}));
}

// Without the carry the schedule is over the budget too: the carried plan
// stays the candidate, and the budget retry reschedules it tighter.
TEST(PlanSearch, CarryIsKeptWhenDroppingItDoesNotFitEither) {
  CannedScheduler scheduler;
  scheduler.answers[{SchedulePolicy::Default, 1000}] = carrying(100, 1100, 1.0);
  scheduler.withoutCarry[{SchedulePolicy::Default, 1000}] =
      measure(100, 1050, 1.0);
  scheduler.answers[{SchedulePolicy::Default, 800}] = carrying(100, 880, 1.2);
  llvm::Expected<PlanSearchResult> result =
      searchPlan(SchedulePolicy::Default, 1000, scheduler.fn());
  ASSERT_TRUE(static_cast<bool>(result)) << errorText(result.takeError());
  // The default placement, without its carry, retried; then jit.
  EXPECT_EQ(scheduler.carryAllowed,
            (std::vector<bool>{true, false, true, true}));
  // Lowered by the carried plan's 200 B overshoot, not the other's 150 B.
  EXPECT_EQ(scheduler.calls[2].second, 800u);
  EXPECT_EQ(result->chosen, 2u);
  EXPECT_FALSE(result->attempts[2].carryDroppedFrom.has_value());
  EXPECT_EQ(result->summary,
            "plan search: default policy with the prefetch pass's placement "
            "(hook-distance prefetch does not fit); 1 budget retry (arena "
            "over by 200 B)");
}

} // namespace
