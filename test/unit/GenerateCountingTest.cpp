//===- GenerateCountingTest.cpp - bytes gathered, counted during a run ----===//
//
// `zrun generate --stats` reports the bytes the decode steps gathered as
// counted by CountingCommunicator (runtime/comm/CountingCommunicator.h):
// every all-gather's whole result, nothing for the other collectives, and
// the calls still reach the communicator it wraps.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CountingCommunicator.h"

#include "test/unit/SingleRankCommunicator.h"
#include <gtest/gtest.h>

#include <vector>

using namespace zplan;
using namespace zplan::comm;

namespace {

TEST(GenerateCounting, CountsEveryAllGathersWholeResultOnly) {
  zplan::testing::SingleRankCommunicator single;
  CountingCommunicator counting(single);
  std::vector<float> send = {1, 2, 3}, receive(3);
  ASSERT_TRUE(
      counting.allGather(send.data(), receive.data(), 3, ElementType::F32)
          .ok());
  EXPECT_EQ(receive, send); // forwarded
  EXPECT_EQ(counting.gatheredBytes(), 12u);
  std::vector<int64_t> ids = {4, 5};
  std::vector<int64_t> gathered(2);
  ASSERT_TRUE(
      counting.allGather(ids.data(), gathered.data(), 2, ElementType::I64)
          .ok());
  EXPECT_EQ(counting.gatheredBytes(), 12u + 16u);
  ASSERT_TRUE(counting.allReduce(send.data(), 3).ok());
  ASSERT_TRUE(counting.broadcast(ids.data(), 16, 0).ok());
  EXPECT_EQ(counting.gatheredBytes(), 28u);
  counting.reset();
  EXPECT_EQ(counting.gatheredBytes(), 0u);
  EXPECT_EQ(counting.rank(), 0);
  EXPECT_EQ(counting.size(), 1);
}

} // namespace
