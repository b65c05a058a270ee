//===- TrainOptionsTest.cpp - `zrun PLAN train` flags ---------------------===//
//
// Every flag of `zrun train` (runtime/train/TrainOptions.h) lands in its field
// (both `--flag value` and
// `--flag=value`), defaults are TrainOptions.h's, and each malformed use is one
// message naming the flag and what it takes.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainOptions.h"

#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

using namespace zplan;
using namespace zplan::train;
using zplan::testing::errorOf;

namespace {

std::string parse(std::vector<std::string> words, TrainOptions &options) {
  return errorOf(parseTrainOptions(words, options));
}

TEST(TrainOptions, DefaultsAreTheSpecs) {
  TrainOptions options;
  ASSERT_EQ(parse({"--data", "t.bin"}, options), "");
  EXPECT_EQ(options.dataPath, "t.bin");
  EXPECT_FALSE(options.dataType.has_value());
  EXPECT_EQ(options.gradAccum, 1u);
  EXPECT_DOUBLE_EQ(options.lr, 3e-4);
  EXPECT_EQ(options.warmup, 0u);
  EXPECT_DOUBLE_EQ(options.weightDecay, 0.0);
  EXPECT_DOUBLE_EQ(options.beta1, 0.9);
  EXPECT_DOUBLE_EQ(options.beta2, 0.999);
  EXPECT_DOUBLE_EQ(options.eps, 1e-8);
  EXPECT_EQ(options.seed, 0u);
  EXPECT_EQ(options.logEvery, 1u);
  EXPECT_TRUE(options.saveDir.empty());
  EXPECT_TRUE(options.resumeFrom.empty());
  EXPECT_EQ(options.lrDecay, LrDecay::Constant);
  EXPECT_TRUE(options.labelsPath.empty());
  EXPECT_FALSE(options.shuffle);
}

TEST(TrainOptions, RowsTakeLabelsAndAShuffleSwitch) {
  TrainOptions options;
  ASSERT_EQ(parse({"--data", "rows.npy", "--labels", "labels.npy", "--shuffle",
                   "--seed", "5"},
                  options),
            "");
  EXPECT_EQ(options.dataPath, "rows.npy");
  EXPECT_EQ(options.labelsPath, "labels.npy");
  EXPECT_TRUE(options.shuffle);
  EXPECT_EQ(options.seed, 5u);
  // A switch takes no value: the next word is the next flag.
  TrainOptions last;
  ASSERT_EQ(parse({"--shuffle", "--data=rows.npy"}, last), "");
  EXPECT_TRUE(last.shuffle);
  EXPECT_EQ(last.dataPath, "rows.npy");
  TrainOptions bad;
  EXPECT_EQ(parse({"--data", "r.npy", "--shuffle=yes"}, bad),
            "--shuffle takes no value");
  EXPECT_EQ(parse({"--data", "r.npy", "--shuffle", "--shuffle"}, bad),
            "--shuffle is given twice");
  EXPECT_EQ(parse({"--data", "r.npy", "--labels="}, bad),
            "--labels needs a path");
}

TEST(TrainOptions, EveryFlagLandsInItsField) {
  TrainOptions options;
  ASSERT_EQ(parse({"--data=t.npy",
                   "--data-dtype",
                   "uint32",
                   "--steps",
                   "50",
                   "--grad-accum=4",
                   "--lr",
                   "1e-3",
                   "--warmup",
                   "5",
                   "--lr-schedule",
                   "cosine",
                   "--min-lr",
                   "1e-5",
                   "--weight-decay",
                   "0.1",
                   "--beta1",
                   "0.8",
                   "--beta2",
                   "0.95",
                   "--eps",
                   "1e-6",
                   "--seed",
                   "18446744073709551615",
                   "--save",
                   "ck",
                   "--save-every",
                   "10",
                   "--keep-last",
                   "3",
                   "--resume",
                   "ck/step-00000010",
                   "--log-every",
                   "5",
                   "--loss-log",
                   "loss.tsv"},
                  options),
            "");
  EXPECT_EQ(options.dataPath, "t.npy");
  EXPECT_EQ(options.dataType, TokenType::U32);
  EXPECT_EQ(options.steps, 50u);
  EXPECT_EQ(options.gradAccum, 4u);
  EXPECT_DOUBLE_EQ(options.lr, 1e-3);
  EXPECT_EQ(options.warmup, 5u);
  EXPECT_EQ(options.lrDecay, LrDecay::Cosine);
  EXPECT_DOUBLE_EQ(options.minLr, 1e-5);
  EXPECT_DOUBLE_EQ(options.weightDecay, 0.1);
  EXPECT_DOUBLE_EQ(options.beta1, 0.8);
  EXPECT_DOUBLE_EQ(options.beta2, 0.95);
  EXPECT_DOUBLE_EQ(options.eps, 1e-6);
  EXPECT_EQ(options.seed, UINT64_MAX);
  EXPECT_EQ(options.saveDir, "ck");
  EXPECT_EQ(options.saveEvery, 10u);
  EXPECT_EQ(options.keepLast, 3u);
  EXPECT_EQ(options.resumeFrom, "ck/step-00000010");
  EXPECT_EQ(options.logEvery, 5u);
  EXPECT_EQ(options.lossLogPath, "loss.tsv");
  LrSchedule schedule = options.schedule();
  EXPECT_DOUBLE_EQ(schedule.at(0), 1e-3 / 5);
  EXPECT_EQ(schedule.totalSteps, 50u);
  EXPECT_EQ(schedule.decay, LrDecay::Cosine);
}

TEST(TrainOptions, MalformedUsesAreNamed) {
  TrainOptions options;
  EXPECT_EQ(parse({}, options), "train needs --data TOKENS (a token file) or "
                                "--data ROWS.npy (rows)");
  EXPECT_EQ(parse({"--data", "t", "--bogus", "1"}, options),
            "unknown option '--bogus' of 'train'; see zrun --help");
  EXPECT_EQ(parse({"--data"}, options), "--data needs a value");
  EXPECT_EQ(parse({"--data", "t", "--steps", "0"}, options),
            "--steps takes an integer from 1 to 1000000000000, got '0'");
  EXPECT_EQ(parse({"--data", "t", "--steps", "-3"}, options),
            "--steps takes an integer from 1 to 1000000000000, got '-3'");
  EXPECT_EQ(parse({"--data", "t", "--grad-accum", "2x"}, options),
            "--grad-accum takes an integer from 1 to 1000000, got '2x'");
  EXPECT_EQ(parse({"--data", "t", "--lr", "0"}, options),
            "--lr takes a number in (0, inf), got '0'");
  EXPECT_EQ(parse({"--data", "t", "--lr", "nan"}, options),
            "--lr takes a number in (0, inf), got 'nan'");
  EXPECT_EQ(parse({"--data", "t", "--beta2", "1"}, options),
            "--beta2 takes a number in [0, 1), got '1'");
  EXPECT_EQ(parse({"--data", "t", "--weight-decay", "-0.1"}, options),
            "--weight-decay takes a number in [0, inf), got '-0.1'");
  EXPECT_EQ(parse({"--data", "t", "--data-dtype", "int8"}, options),
            "--data-dtype takes uint16 or uint32, got 'int8'");
  EXPECT_EQ(parse({"--data", "t", "--lr", "1", "--lr=2"}, options),
            "--lr is given twice");
  EXPECT_EQ(parse({"--data", "t", "--save-every", "5"}, options),
            "--save-every needs --save DIR");
  EXPECT_EQ(parse({"--data", "t", "--min-lr", "0.1"}, options),
            "--min-lr needs --lr-schedule cosine");
  EXPECT_EQ(parse({"--data", "t", "--lr-schedule", "cosine", "--min-lr", "0.1",
                   "--lr", "0.01"},
                  options),
            "--min-lr 0.1 is above --lr 0.01");
}

TEST(TrainOptions, HyperFollowsTheSpecsLayout) {
  TrainOptions options;
  ASSERT_EQ(parse({"--data", "t", "--beta1", "0.8", "--beta2", "0.95", "--eps",
                   "1e-6", "--weight-decay", "0.01"},
                  options),
            "");
  std::array<float, 8> hyper =
      optimizerHyper(options.optimizer(), 2e-3, 1.0 / 8, 10);
  EXPECT_EQ(hyper[0], 2e-3f);
  EXPECT_EQ(hyper[1], 0.8f);
  EXPECT_EQ(hyper[2], 0.95f);
  EXPECT_EQ(hyper[3], 1e-6f);
  EXPECT_EQ(hyper[4], 0.01f);
  EXPECT_EQ(hyper[5], 0.125f);
  // 1 - 0.8^10 and 1 - 0.95^10, rounded once to float.
  EXPECT_EQ(hyper[6], static_cast<float>(0.8926258176));
  EXPECT_EQ(hyper[7], static_cast<float>(0.40126306076162117));
  hyper = optimizerHyper(options.optimizer(), 2e-3, 1.0, 1);
  EXPECT_EQ(hyper[6], static_cast<float>(0.2));
  EXPECT_EQ(hyper[7], static_cast<float>(1.0 - 0.95));
}

TEST(TrainOptions, ResumeNeedsTheSameBatchesAndStepsLeft) {
  TrainOptions options;
  ASSERT_EQ(parse({"--data", "t", "--seed", "3", "--grad-accum", "2", "--steps",
                   "50"},
                  options),
            "");
  LoadedCheckpoint loaded;
  loaded.directory = "ck/step-00000020";
  loaded.step = 20;
  loaded.values = options.checkpointValues({1000});
  EXPECT_EQ(loaded.values[0],
            (std::pair<std::string, std::string>{"seed", "3"}));
  EXPECT_EQ(errorOf(options.checkResume(loaded, {1000})), "");
  EXPECT_EQ(errorOf(options.checkResume(loaded, {999})),
            "checkpoint 'ck/step-00000020' was trained with --data (its "
            "token count) 1000; this run has 999, so it would not continue "
            "that run");
  TrainOptions other;
  ASSERT_EQ(
      parse({"--data", "t", "--seed", "4", "--grad-accum", "2", "--lr", "1e-3"},
            other),
      "");
  EXPECT_EQ(errorOf(other.checkResume(loaded, {1000})),
            "checkpoint 'ck/step-00000020' was trained with --seed 3; this "
            "run has 4, so it would not continue that run");
  loaded.step = 50;
  EXPECT_EQ(errorOf(options.checkResume(loaded, {1000})),
            "checkpoint 'ck/step-00000020' is at step 50; --steps 50 leaves "
            "nothing to train");
  loaded.values.clear();
  EXPECT_TRUE(
      zplan::testing::contains(errorOf(options.checkResume(loaded, {1000})),
                               "does not record its seed"));
}

TEST(TrainOptions, ResumingRowsNeedsTheSameRowsAndShuffle) {
  TrainOptions options;
  ASSERT_EQ(parse({"--data", "r.npy", "--shuffle", "--steps", "9"}, options),
            "");
  LoadedCheckpoint loaded;
  loaded.directory = "ck";
  loaded.step = 4;
  loaded.values = options.checkpointValues({160, 10});
  EXPECT_EQ(loaded.values[3],
            (std::pair<std::string, std::string>{"data-rows", "10"}));
  EXPECT_EQ(loaded.values[4],
            (std::pair<std::string, std::string>{"shuffle", "on"}));
  EXPECT_EQ(errorOf(options.checkResume(loaded, {160, 10})), "");
  EXPECT_EQ(errorOf(options.checkResume(loaded, {176, 11})),
            "checkpoint 'ck' was trained with --data (its token count) 160; "
            "this run has 176, so it would not continue that run");
  TrainOptions ordered;
  ASSERT_EQ(parse({"--data", "r.npy", "--steps", "9"}, ordered), "");
  EXPECT_EQ(errorOf(ordered.checkResume(loaded, {160, 10})),
            "checkpoint 'ck' was trained with --shuffle on; this run has off, "
            "so it would not continue that run");
  EXPECT_EQ(errorOf(ordered.checkResume(loaded, {160, 0})),
            "checkpoint 'ck' was trained on rows (a 2-D .npy --data); this "
            "run reads a token stream, so it would not continue that run");
  loaded.values = ordered.checkpointValues({160, 0});
  EXPECT_EQ(loaded.values.size(), 11u);
  EXPECT_EQ(errorOf(ordered.checkResume(loaded, {160, 10})),
            "checkpoint 'ck' was trained on a token stream; this run reads "
            "rows (a 2-D .npy --data), so it would not continue that run");
}

} // namespace
