//===- TrainProgressTest.cpp - learning-rate schedule and progress lines -===//
//
// The schedule is LrSchedule.h's (linear warmup from lr/W, then constant),
// plus the optional cosine; the progress line and summary are checked
// character for character under a fake clock.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/LrSchedule.h"
#include "runtime/train/Progress.h"

#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <cmath>

using namespace zplan;
using namespace zplan::train;
using zplan::testing::contains;
using zplan::testing::errorOf;

namespace {

TEST(TrainLrSchedule, LinearWarmupFromLrOverWThenConstant) {
  LrSchedule schedule;
  schedule.peak = 1e-3;
  schedule.warmupSteps = 4;
  schedule.totalSteps = 10;
  EXPECT_DOUBLE_EQ(schedule.at(0), 0.25e-3);
  EXPECT_DOUBLE_EQ(schedule.at(1), 0.5e-3);
  EXPECT_DOUBLE_EQ(schedule.at(3), 1e-3);
  EXPECT_DOUBLE_EQ(schedule.at(4), 1e-3);
  EXPECT_DOUBLE_EQ(schedule.at(9), 1e-3);
  EXPECT_DOUBLE_EQ(schedule.at(1000), 1e-3);
  schedule.warmupSteps = 0;
  EXPECT_DOUBLE_EQ(schedule.at(0), 1e-3);
}

TEST(TrainLrSchedule, CosineDecaysFromPeakToTheFloor) {
  LrSchedule schedule;
  schedule.peak = 1.0;
  schedule.minimum = 0.1;
  schedule.warmupSteps = 2;
  schedule.totalSteps = 6;
  schedule.decay = LrDecay::Cosine;
  EXPECT_DOUBLE_EQ(schedule.at(0), 0.5);
  EXPECT_DOUBLE_EQ(schedule.at(2), 1.0);
  // p = 2/4: halfway between peak and floor.
  EXPECT_NEAR(schedule.at(4), 0.55, 1e-15);
  EXPECT_NEAR(schedule.at(5), 0.1 + 0.9 * 0.5 * (1 + std::cos(M_PI * 0.75)),
              1e-15);
  EXPECT_DOUBLE_EQ(schedule.at(6), 0.1);
  EXPECT_DOUBLE_EQ(schedule.at(100), 0.1);
  LrDecay decay;
  EXPECT_EQ(errorOf(parseLrDecay("cosine", decay)), "");
  EXPECT_EQ(decay, LrDecay::Cosine);
  EXPECT_EQ(errorOf(parseLrDecay("linear", decay)),
            "--lr-schedule takes constant or cosine, got 'linear'");
}

TEST(TrainProgress, NumbersAreFormattedForPeople) {
  EXPECT_EQ(withThousands(0), "0");
  EXPECT_EQ(withThousands(999), "999");
  EXPECT_EQ(withThousands(12345), "12,345");
  EXPECT_EQ(withThousands(1234567), "1,234,567");
  EXPECT_EQ(durationText(0.4), "0s");
  EXPECT_EQ(durationText(59.4), "59s");
  EXPECT_EQ(durationText(65), "1m05s");
  EXPECT_EQ(durationText(3600 * 2 + 180 + 5), "2h03m");
  EXPECT_EQ(lossLogLine(12, 3.4521, 3e-4), "12\t3.4521\t0.0003\n");
  EXPECT_EQ(lossLogLine(1, 1.0 / 3.0, 1e-3 / 3.0),
            "1\t0.333333333\t0.000333333333\n");
}

TEST(TrainProgress, StepLineAndSummaryUnderAFakeClock) {
  double now = 100.0;
  Progress progress(0, 100, [&] { return now; });
  EXPECT_EQ(progress.summary(), "trained no step");
  now += 2.0;
  // 2 s for 24,690 tokens: 12,345 tok/s; 99 steps left at 2 s each.
  EXPECT_EQ(progress.stepDone(1, 3.45214, 3e-4, 24690),
            "step 1/100  loss 3.4521  lr 3.00e-04  12,345 tok/s  ETA 3m18s");
  now += 2.0;
  EXPECT_EQ(progress.stepDone(2, 3.0, 3e-4, 24690),
            "step 2/100  loss 3.0000  lr 3.00e-04  12,345 tok/s  ETA 3m16s");
  EXPECT_EQ(progress.summary(), "trained steps 1-2 (2 steps): 49,380 tokens "
                                "in 4s, 12,345 tok/s, final loss 3.0000");
}

TEST(TrainProgress, AResumedRunCountsFromItsOwnStart) {
  double now = 0.0;
  Progress progress(40, 50, [&] { return now; });
  now = 10.0;
  EXPECT_EQ(progress.stepDone(41, 2.0, 1e-3, 1000),
            "step 41/50  loss 2.0000  lr 1.00e-03  100 tok/s  ETA 1m30s");
  EXPECT_TRUE(contains(progress.summary(), "trained steps 41-41 (1 step)"));
}

} // namespace
