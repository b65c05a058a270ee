//===- GenerateOptionsTest.cpp - zrun generate's flags and lines ----------===//
//
// docs/generation.md section 5's flags parse into GenerateOptions, and every
// refusal names the flag and the value; the progress line and the summary are
// checked character for character under a fake clock.
//
//===----------------------------------------------------------------------===//

#include "runtime/generate/GenerateOptions.h"
#include "runtime/generate/GenerateProgress.h"
#include "runtime/generate/GenerationState.h"

#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

using namespace zplan;
using namespace zplan::generate;
using zplan::testing::contains;
using zplan::testing::errorOf;

namespace {

std::string parseError(std::vector<std::string> words) {
  GenerateOptions options;
  return errorOf(parseGenerateOptions(words, options));
}

TEST(GenerateOptions, EveryFlagParses) {
  GenerateOptions options;
  Status status = parseGenerateOptions(
      {"--prompt", "p.npy", "--prompt-lengths=l.npy", "--max-new-tokens", "5",
       "--eos", "50256", "--temperature", "0.7", "--top-k", "40", "--top-p",
       "0.9", "--seed", "18446744073709551615", "--output", "t.npy",
       "--logits-output", "x.npy"},
      options);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_EQ(options.promptPath, "p.npy");
  EXPECT_EQ(options.promptLengthsPath, "l.npy");
  EXPECT_EQ(options.maxNewTokens, 5u);
  EXPECT_EQ(options.eos, 50256);
  EXPECT_DOUBLE_EQ(options.sampling.temperature, 0.7);
  EXPECT_EQ(options.sampling.topK, 40u);
  EXPECT_DOUBLE_EQ(options.sampling.topP, 0.9);
  EXPECT_EQ(options.sampling.seed, UINT64_MAX);
  EXPECT_EQ(options.outputPath, "t.npy");
  EXPECT_EQ(options.logitsOutputPath, "x.npy");
}

TEST(GenerateOptions, DefaultsAreGreedySixteenTokensNoEos) {
  GenerateOptions options;
  ASSERT_TRUE(
      parseGenerateOptions({"--prompt", "p", "--output", "o"}, options).ok());
  // Not given: the plan's default, 16 where the plan has room for them.
  EXPECT_EQ(options.maxNewTokens, 0u);
  GenerationShape roomy;
  roomy.promptLength = 8;
  roomy.maxSequenceLength = 64;
  EXPECT_EQ(defaultMaxNewTokens(roomy), 16u);
  GenerationShape tight = roomy;
  tight.promptLength = 6;
  tight.maxSequenceLength = 16;
  EXPECT_EQ(defaultMaxNewTokens(tight), 10u);
  EXPECT_FALSE(options.eos.has_value());
  EXPECT_EQ(options.sampling.temperature, 0.0);
  EXPECT_EQ(options.sampling.topK, 0u);
  EXPECT_EQ(options.sampling.topP, 1.0);
}

TEST(GenerateOptions, RefusalsNameTheFlagAndValue) {
  std::vector<std::string> base = {"--prompt", "p", "--output", "o"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> words = base;
    words.insert(words.end(), more.begin(), more.end());
    return parseError(words);
  };
  EXPECT_TRUE(contains(with({"--max-new-tokens", "0"}),
                       "--max-new-tokens takes an integer from 1 to "
                       "1000000000, got '0'"));
  EXPECT_TRUE(contains(with({"--eos", "-1"}), "--eos takes an integer from 0"));
  // strtoull and strtod skip leading white space; a value may not.
  EXPECT_TRUE(contains(with({"--max-new-tokens", " 4"}),
                       "--max-new-tokens takes an integer from 1 to "
                       "1000000000, got ' 4'"));
  EXPECT_TRUE(contains(with({"--temperature", " 1"}),
                       "--temperature takes a number in [0, 1e+06], got ' 1'"));
  EXPECT_TRUE(contains(with({"--temperature", "-0.5"}),
                       "--temperature takes a number in [0, 1e+06], got "
                       "'-0.5'"));
  EXPECT_TRUE(contains(with({"--temperature", "nan"}), "got 'nan'"));
  EXPECT_TRUE(contains(with({"--temperature", "1", "--top-p", "0"}),
                       "--top-p takes a number in (0, 1], got '0'"));
  EXPECT_TRUE(contains(with({"--temperature", "1", "--top-p", "1.5"}),
                       "--top-p takes a number in (0, 1], got '1.5'"));
  EXPECT_TRUE(contains(with({"--temperature", "1", "--top-k", "0"}),
                       "--top-k takes an integer from 1"));
  EXPECT_TRUE(
      contains(with({"--top-k", "3"}), "--top-k needs --temperature above 0"));
  EXPECT_TRUE(contains(with({"--temperature", "0", "--seed", "3"}),
                       "--seed needs --temperature above 0"));
  EXPECT_TRUE(
      contains(with({"--eos", "1", "--eos", "2"}), "--eos is given twice"));
  EXPECT_TRUE(
      contains(with({"--bogus"}), "unknown option '--bogus' of 'generate'"));
  EXPECT_TRUE(contains(with({"--eos"}), "--eos needs a value"));
  EXPECT_TRUE(contains(parseError({"--output", "o"}),
                       "generate needs --prompt PROMPTS.npy"));
  EXPECT_TRUE(contains(parseError({"--prompt", "p"}),
                       "generate needs --output TOKENS.npy"));
}

TEST(GenerateProgress, LinesAndSummaryUnderAFakeClock) {
  double now = 100.0;
  GenerateProgress progress(4, 2, [&] { return now; });
  now = 100.25;
  EXPECT_EQ(progress.prefillDone(2), "token 1/4  first token after 0.250 s");
  EXPECT_TRUE(progress.shouldPrint(false));
  now = 100.75;
  EXPECT_EQ(progress.stepDone(1, 2, 1),
            "token 2/4  1/2 rows active  4 tok/s  ETA 1s");
  // Half a second after the last printed line: not yet.
  EXPECT_FALSE(progress.shouldPrint(false));
  now = 101.25;
  EXPECT_EQ(progress.stepDone(2, 1, 0),
            "token 3/4  0/2 rows active  3 tok/s  ETA 0s");
  EXPECT_TRUE(progress.shouldPrint(true));
  EXPECT_DOUBLE_EQ(progress.timeToFirstToken(), 0.25);
  EXPECT_DOUBLE_EQ(progress.decodeTokensPerSecond(), 3.0);
  GenerationFacts facts;
  facts.planGatheredPerDecodeStep = 0;
  facts.countedGatheredPerDecodeStep = 0;
  facts.residentBytes = 1048576;
  facts.cacheBytes = 65536;
  EXPECT_EQ(progress.summary(facts),
            (std::vector<std::string>{
                "generated 5 tokens in 2 rows (3 steps) in 1.250 s",
                "time to first token 0.250 s (generate_begin + prefill)",
                "decode 3 tokens in 1.000 s: 3.0 tok/s",
                "gathered per decode step: 0 B (plan), 0 B (counted)",
                "resident 1,048,576 B, KV cache 65,536 B"}));
  facts.countedGatheredPerDecodeStep.reset();
  facts.planGatheredPerDecodeStep = 123456;
  EXPECT_EQ(progress.summary(facts)[3],
            "gathered per decode step: 123,456 B (plan)");
}

TEST(GenerateProgress, NoLineAfterTheLastOneAndNoTokenPastTheLast) {
  // A rank whose 2 rows finished at token 2 of 2 runs lockstep decode
  // steps for another rank's rows: zrun printed "token 505/504" for them.
  double now = 0.0;
  GenerateProgress progress(2, 2, [&] { return now; });
  progress.prefillDone(2);
  EXPECT_TRUE(progress.shouldPrint(false));
  now = 0.5;
  EXPECT_EQ(progress.stepDone(1, 2, 0).substr(0, 9), "token 2/2");
  EXPECT_TRUE(progress.shouldPrint(true));
  for (uint64_t step = 2; step < 5; ++step) {
    now += 2.0;
    EXPECT_EQ(progress.stepDone(step, 0, 0).substr(0, 9), "token 2/2");
    EXPECT_FALSE(progress.shouldPrint(true));
  }
}

TEST(GenerateProgress, RanksCombineIntoTheGlobalBatchsFigures) {
  // Two ranks of 2 rows each under lockstep every 2 steps: rank 0's rows
  // finished after prefill and it decoded 4 steps for rank 1's rows.
  GenerationFigures rank0, rank1;
  rank0.prefillTokens = 2;
  rank0.decodeTokens = 0;
  rank0.steps = 1;
  rank0.firstTokenSeconds = 0.5;
  rank0.decodeSeconds = 2.0;
  rank0.totalSeconds = 2.5;
  rank1 = rank0;
  rank1.decodeTokens = 8;
  rank1.steps = 5;
  rank1.firstTokenSeconds = 0.25;
  rank1.totalSeconds = 2.25;
  for (GenerationFigures *rank : {&rank0, &rank1}) {
    rank->lockstepPeriod = 2;
    rank->decodeRuns = 4;
    rank->agreements = 3;
    rank->agreementSeconds = 0.001;
  }
  rank0.idleDecodeRuns = 4;
  std::vector<GenerationFigures> ranks = {rank0, rank1};
  GenerationFigures all = combine(ranks);
  EXPECT_DOUBLE_EQ(all.decodeTokens, 8);
  EXPECT_DOUBLE_EQ(all.steps, 5);
  EXPECT_DOUBLE_EQ(all.totalSeconds, 2.5);
  GenerationFacts facts;
  std::vector<std::string> lines = summaryLines(all, 4, facts, ranks);
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(lines[0], "generated 12 tokens in 4 rows on 2 ranks (5 steps) in "
                      "2.500 s");
  EXPECT_EQ(lines[1], "time to first token 0.500 s (generate_begin + prefill)");
  EXPECT_EQ(lines[2], "decode 8 tokens in 2.000 s: 4.0 tok/s");
  // 6 agreements over the ranks, 2 ms in all: 333.3 us each; each rank
  // spent 1 ms of its 2 s of decoding in them.
  EXPECT_EQ(lines[5], "lockstep: agreed every 2 decode steps; 3 agreements, "
                      "333.3 us each (0.05% of decode); decode runs per rank: "
                      "4, 4; after the rank's rows finished: 4, 0");
  for (GenerationFigures &rank : ranks)
    rank.lockstepPeriod = 0;
  EXPECT_EQ(summaryLines(combine(ranks), 4, facts, ranks)[5],
            "lockstep: none (decode has no collective; each rank stopped "
            "when its rows finished); decode runs per rank: 4, 4");
}

TEST(GenerateProgress, EtaExtrapolatesTheMeanDecodeStep) {
  double now = 0.0;
  GenerateProgress progress(10, 1, [&] { return now; });
  now = 1.0;
  progress.prefillDone(1);
  now = 3.0;
  progress.stepDone(1, 1, 1);
  now = 5.0;
  // Two decode steps took 4 s; 7 steps left at 2 s each.
  EXPECT_EQ(progress.stepDone(2, 1, 1),
            "token 3/10  1/1 rows active  1 tok/s  ETA 14s");
}

} // namespace
