//===- SimulatorTest.cpp - the two-queue timeline of a plan ---------------===//
//
// The report's simulated and exposed times: overlap of the two queues, and
// totals that stay finite whatever the times handed in.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/Simulator.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace zplan;

namespace {

/// comm #0 (a gather), compute #1 that overlaps it, compute #2 that waits
/// for #0.
plan::Program threeInstructions() {
  plan::Program program;
  plan::Instruction *gather = program.add_instructions();
  gather->set_index(0);
  gather->set_queue(plan::COMM);
  plan::Instruction *compute = program.add_instructions();
  compute->set_index(1);
  compute->set_queue(plan::COMPUTE);
  plan::Instruction *wait = program.add_instructions();
  wait->set_index(2);
  wait->set_queue(plan::COMPUTE);
  wait->add_wait_for(0);
  return program;
}

TEST(Simulator, ExposesOnlyTheCommunicationComputeDoesNotHide) {
  Timeline timeline = simulate(threeInstructions(), {3.0, 1.0, 0.5});
  EXPECT_DOUBLE_EQ(timeline.totalSeconds, 3.5);
  EXPECT_DOUBLE_EQ(timeline.exposedCommSeconds, 2.0);
  EXPECT_DOUBLE_EQ(timeline.commSeconds, 3.0);
  EXPECT_DOUBLE_EQ(timeline.computeSeconds, 1.5);
}

TEST(Simulator, ComputeBesideACollectivePaysTheProfilesSlowdown) {
  // #1 runs while #0's 3 s of collective still run.
  HardwareProfile profile = *getHardwareProfile("cpu");
  // s = 1 (a 2-core CPU rank): #1 waits them out, 1 + 3 = 4 s; #2 finds #0
  // done. Overlap gained nothing: the total is the two queues' sum.
  profile.computeSlowdownDuringCollective = 1;
  CostModel serial(profile);
  Timeline timeline = simulate(threeInstructions(), {3.0, 1.0, 0.5}, &serial);
  EXPECT_DOUBLE_EQ(timeline.totalSeconds, 4.5);
  EXPECT_DOUBLE_EQ(timeline.exposedCommSeconds, 0.0);
  // s = 0.5: #1 at half speed ends at 2 s, inside the collective; #2 waits
  // for it until 3 s.
  profile.computeSlowdownDuringCollective = 0.5;
  CostModel half(profile);
  timeline = simulate(threeInstructions(), {3.0, 1.0, 0.5}, &half);
  EXPECT_DOUBLE_EQ(timeline.totalSeconds, 3.5);
  EXPECT_DOUBLE_EQ(timeline.exposedCommSeconds, 1.0);
  // s = 0 (every embedded profile): the same timeline as without a model.
  profile.computeSlowdownDuringCollective = 0;
  CostModel free(profile);
  timeline = simulate(threeInstructions(), {3.0, 1.0, 0.5}, &free);
  EXPECT_DOUBLE_EQ(timeline.totalSeconds, 3.5);
  EXPECT_DOUBLE_EQ(timeline.exposedCommSeconds, 2.0);
}

TEST(Simulator, MissingOrNonFiniteTimesCountAsZero) {
  // One time for three instructions: the others are instantaneous, not read
  // past the vector's end.
  Timeline shortTimes = simulate(threeInstructions(), {3.0});
  EXPECT_DOUBLE_EQ(shortTimes.totalSeconds, 3.0);
  Timeline poisoned = simulate(threeInstructions(),
                               {std::numeric_limits<double>::quiet_NaN(),
                                std::numeric_limits<double>::infinity(), -1.0});
  EXPECT_TRUE(std::isfinite(poisoned.totalSeconds));
  EXPECT_DOUBLE_EQ(poisoned.totalSeconds, 0.0);
}

} // namespace
