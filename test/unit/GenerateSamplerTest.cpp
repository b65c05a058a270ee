//===- GenerateSamplerTest.cpp - greedy and sampled next tokens -----------===//
//
// The sampler of `zrun generate` (runtime/generate/Sampler.h): greedy is
// numpy's argmax; sampling is a pure function of (seed, row, step), so it
// repeats for one seed and changes with the seed; top-k 1 and a tiny top-p
// are greedy; the draws follow the softmax.
//
//===----------------------------------------------------------------------===//

#include "runtime/generate/Sampler.h"

#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

using namespace zplan;
using namespace zplan::generate;
using zplan::testing::contains;
using zplan::testing::errorOf;

namespace {

int64_t sample(Sampler &sampler, const std::vector<float> &logits, uint64_t row,
               uint64_t step) {
  int64_t token = -1;
  Status status = sampler.next(logits.data(), logits.size(), row, step, token);
  EXPECT_TRUE(status.ok()) << status.message();
  return token;
}

SamplingSettings sampling(double temperature, uint64_t topK = 0,
                          double topP = 1.0, uint64_t seed = 0) {
  SamplingSettings settings;
  settings.temperature = temperature;
  settings.topK = topK;
  settings.topP = topP;
  settings.seed = seed;
  return settings;
}

const std::vector<float> kLogits = {0.5f, 2.0f, -1.0f, 1.9f, 2.0f, 0.0f};

TEST(GenerateSampler, GreedyIsArgmaxWithTheLowestIdOnTies) {
  Sampler greedy{SamplingSettings()};
  // 2.0 at ids 1 and 4: numpy.argmax takes the first.
  EXPECT_EQ(sample(greedy, kLogits, 0, 0), 1);
  EXPECT_EQ(sample(greedy, {-INFINITY, -INFINITY, -3.0f}, 0, 0), 2);
  EXPECT_EQ(sample(greedy, {-INFINITY, -INFINITY}, 0, 0), 0);
  int64_t token;
  EXPECT_TRUE(
      contains(errorOf(argmax(std::vector<float>{1.0f, NAN}.data(), 2, token)),
               "logit 1 is NaN"));
}

TEST(GenerateSampler, TheSameSeedDrawsTheSameTokensAnotherSeedOthers) {
  std::vector<float> flat(50, 0.0f);
  Sampler first(sampling(1.0, 0, 1.0, 7)), again(sampling(1.0, 0, 1.0, 7)),
      other(sampling(1.0, 0, 1.0, 8));
  std::vector<int64_t> a, b, c;
  for (uint64_t step = 0; step < 40; ++step)
    for (uint64_t row = 0; row < 3; ++row) {
      a.push_back(sample(first, flat, row, step));
      b.push_back(sample(again, flat, row, step));
      c.push_back(sample(other, flat, row, step));
    }
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // A row's draws do not depend on which other rows are sampled, or in
  // which order: row 2 alone, backwards, gives what it gave in the batch.
  Sampler alone(sampling(1.0, 0, 1.0, 7));
  for (uint64_t step = 40; step-- > 0;)
    EXPECT_EQ(sample(alone, flat, 2, step), a[step * 3 + 2]);
}

TEST(GenerateSampler, UniformDrawsAreInTheUnitIntervalAndSpread) {
  double sum = 0;
  for (uint64_t step = 0; step < 4000; ++step) {
    double u = uniformDraw(3, 1, step);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 4000, 0.5, 0.02);
  EXPECT_NE(uniformDraw(3, 0, 5), uniformDraw(3, 1, 5));
}

TEST(GenerateSampler, TopKOneIsGreedy) {
  Sampler topOne(sampling(5.0, 1, 1.0, 11));
  Sampler greedy{SamplingSettings()};
  std::vector<float> logits(37);
  for (uint64_t step = 0; step < 30; ++step) {
    for (size_t i = 0; i < logits.size(); ++i)
      logits[i] = std::sin(static_cast<float>(i * 7 + step * 3));
    EXPECT_EQ(sample(topOne, logits, 0, step), sample(greedy, logits, 0, step));
  }
  EXPECT_EQ(sample(topOne, kLogits, 0, 0), 1); // the tie: the lower id
}

TEST(GenerateSampler, TopKKeepsOnlyTheKLikeliest) {
  Sampler topTwo(sampling(100.0, 2, 1.0, 5));
  std::map<int64_t, int> seen;
  for (uint64_t step = 0; step < 400; ++step)
    ++seen[sample(topTwo, kLogits, 0, step)];
  // Ids 1 and 4 share the top logit; at T = 100 both are drawn often.
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[1], 100);
  EXPECT_GT(seen[4], 100);
}

TEST(GenerateSampler, TopPEdgeCases) {
  // A tiny P keeps only the likeliest id: greedy.
  Sampler tiny(sampling(1.0, 0, 1e-9, 3));
  for (uint64_t step = 0; step < 50; ++step)
    EXPECT_EQ(sample(tiny, kLogits, 0, step), 1);
  // P = 1 keeps every id: at a high temperature each is drawn.
  Sampler all(sampling(1000.0, 0, 1.0, 3));
  std::map<int64_t, int> seen;
  for (uint64_t step = 0; step < 600; ++step)
    ++seen[sample(all, kLogits, 0, step)];
  EXPECT_EQ(seen.size(), kLogits.size());
  // Probabilities 0.5, 0.3, 0.2: P = 0.49 is reached by the first alone
  // (the nucleus is the shortest prefix reaching P); P = 0.6 needs the
  // first two, and never draws the third.
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  Sampler half(sampling(1.0, 0, 0.49, 9));
  Sampler more(sampling(1.0, 0, 0.6, 9));
  std::map<int64_t, int> halfSeen, moreSeen;
  for (uint64_t step = 0; step < 1000; ++step) {
    ++halfSeen[sample(half, logits, 0, step)];
    ++moreSeen[sample(more, logits, 0, step)];
  }
  EXPECT_EQ(halfSeen.size(), 1u);
  EXPECT_EQ(halfSeen[0], 1000);
  EXPECT_EQ(moreSeen.size(), 2u);
  EXPECT_NEAR(moreSeen[0] / 1000.0, 0.625, 0.05);
}

TEST(GenerateSampler, DrawsFollowTheSoftmaxAtTheTemperature) {
  // Logits log(0.5), log(0.3), log(0.2) at T = 1 give those probabilities;
  // at T = 0.5 the squares, renormalised: 25/38, 9/38, 4/38.
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.2f)};
  for (auto [temperature, expected] :
       std::vector<std::pair<double, std::vector<double>>>{
           {1.0, {0.5, 0.3, 0.2}}, {0.5, {25 / 38.0, 9 / 38.0, 4 / 38.0}}}) {
    Sampler sampler(sampling(temperature, 0, 1.0, 1));
    std::vector<int> counts(3);
    const int draws = 20000;
    for (int step = 0; step < draws; ++step)
      ++counts[sample(sampler, logits, 0, step)];
    for (int id = 0; id < 3; ++id)
      EXPECT_NEAR(counts[id] / double(draws), expected[id], 0.015)
          << "T " << temperature << " id " << id;
  }
}

TEST(GenerateSampler, NaNLogitsAreRefusedWhenSampling) {
  Sampler sampler(sampling(1.0));
  int64_t token;
  std::vector<float> logits = {0.0f, NAN, 1.0f};
  EXPECT_TRUE(contains(errorOf(sampler.next(logits.data(), 3, 0, 0, token)),
                       "logit 1 is NaN"));
}

} // namespace
