//===- ArenaPlannerTest.cpp - Tests for the static arena planner ----------===//
//
// Checks that planArena() keeps its invariant (no two buffers live at the
// same time share a byte), reuses bytes across disjoint live ranges, aligns
// offsets, ignores zero-byte buffers, reports the live-bytes profile and lower
// bound exactly, and stays close to that lower bound on random interval sets;
// that pinned requests (fixedOffset) sit where they ask, across programs, with
// the others placed around them; and that verifyArena() rejects plans that
// break the invariant or move a pinned buffer.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/ArenaPlanner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

using namespace zplan;

namespace {

uint64_t alignUp(uint64_t bytes, uint64_t alignment) {
  return (bytes + alignment - 1) / alignment * alignment;
}

/// Checks the invariant pairwise without going through verifyArena(), so that
/// a bug shared by the planner and the verifier still shows.
void expectNoSharedBytes(llvm::ArrayRef<BufferRequest> requests,
                         const ArenaPlan &plan, uint64_t alignment) {
  ASSERT_EQ(plan.offsets.size(), requests.size());
  for (size_t a = 0; a < requests.size(); ++a) {
    uint64_t sizeA = alignUp(requests[a].bytes, alignment);
    EXPECT_LE(plan.offsets[a] + sizeA, plan.arenaBytes) << requests[a].id;
    for (size_t b = a + 1; b < requests.size(); ++b) {
      uint64_t sizeB = alignUp(requests[b].bytes, alignment);
      bool timeOverlap = requests[a].firstUse <= requests[b].lastUse &&
                         requests[b].firstUse <= requests[a].lastUse;
      bool byteOverlap = plan.offsets[a] < plan.offsets[b] + sizeB &&
                         plan.offsets[b] < plan.offsets[a] + sizeA;
      EXPECT_FALSE(timeOverlap && byteOverlap && sizeA != 0 && sizeB != 0)
          << "buffers " << requests[a].id << " and " << requests[b].id;
    }
  }
}

std::string verifyError(llvm::ArrayRef<BufferRequest> requests,
                        const ArenaPlan &plan, uint64_t alignment = 64) {
  std::string error;
  if (verifyArena(requests, plan, &error, alignment))
    return "";
  EXPECT_FALSE(error.empty());
  return error;
}

TEST(ArenaPlanner, DisjointRangesReuseTheSameOffset) {
  std::vector<BufferRequest> requests = {
      {0, 1000, 0, 2}, {1, 1000, 3, 5}, {2, 700, 6, 9}, {3, 4096, 10, 10}};
  ArenaPlan plan = planArena(requests);
  EXPECT_EQ(plan.offsets, (std::vector<uint64_t>{0, 0, 0, 0}));
  EXPECT_EQ(plan.arenaBytes, 4096u);
  EXPECT_EQ(plan.lowerBound, 4096u);
  EXPECT_EQ(verifyError(requests, plan), "");
}

TEST(ArenaPlanner, RangesSharingOneIndexDoNotShareBytes) {
  // Live ranges are inclusive: while instruction 3 runs, both are live.
  std::vector<BufferRequest> requests = {{0, 512, 0, 3}, {1, 512, 3, 6}};
  ArenaPlan plan = planArena(requests);
  EXPECT_NE(plan.offsets[0], plan.offsets[1]);
  EXPECT_EQ(plan.arenaBytes, 1024u);
  expectNoSharedBytes(requests, plan, 64);
  EXPECT_EQ(verifyError(requests, plan), "");
}

TEST(ArenaPlanner, OverlappingRangesNeverShareBytes) {
  // Everything is live at instruction 5, so the arena must be the sum of the
  // sizes, and a packed plan reaches it.
  std::vector<BufferRequest> requests = {{0, 640, 0, 5},  {1, 128, 5, 9},
                                         {2, 4096, 2, 7}, {3, 64, 5, 5},
                                         {4, 1920, 1, 5}, {5, 256, 3, 12}};
  ArenaPlan plan = planArena(requests);
  expectNoSharedBytes(requests, plan, 64);
  EXPECT_EQ(plan.lowerBound, 640u + 128 + 4096 + 64 + 1920 + 256);
  EXPECT_EQ(plan.arenaBytes, plan.lowerBound);
  EXPECT_EQ(plan.peakIndex, 5);
  EXPECT_EQ(verifyError(requests, plan), "");
}

TEST(ArenaPlanner, BestFitTakesTheTightestGap) {
  // Placed largest first with alignment 1: P at 0, Q at 500, S at 660, T at
  // 810. From instruction 5 on, P and S are dead, leaving a 500-byte gap at 0
  // and a 150-byte gap at 660; W (120 bytes) belongs in the 150-byte one,
  // where a first-fit planner would have put it at 0.
  std::vector<BufferRequest> requests = {{0, 500, 0, 4},
                                         {1, 160, 0, 9},
                                         {2, 150, 0, 4},
                                         {3, 140, 0, 9},
                                         {4, 120, 5, 9}};
  ArenaPlan plan = planArena(requests, /*alignment=*/1);
  EXPECT_EQ(plan.offsets, (std::vector<uint64_t>{0, 500, 660, 810, 660}));
  EXPECT_EQ(plan.arenaBytes, 950u);
  EXPECT_EQ(verifyError(requests, plan, 1), "");
}

TEST(ArenaPlanner, OffsetsAndSizesAreAligned) {
  std::vector<BufferRequest> requests = {
      {0, 1, 0, 0}, {1, 300, 0, 2}, {2, 17, 0, 1}, {3, 256, 0, 4}};
  ArenaPlan plan = planArena(requests, /*alignment=*/256);
  for (uint64_t offset : plan.offsets)
    EXPECT_EQ(offset % 256, 0u) << offset;
  // Sizes round up to 256, 512, 256, 256, all live at instruction 0.
  EXPECT_EQ(plan.lowerBound, 1280u);
  EXPECT_EQ(plan.arenaBytes, 1280u);
  EXPECT_EQ(plan.liveBytes, (std::vector<uint64_t>{1280, 1024, 768, 256, 256}));
  expectNoSharedBytes(requests, plan, 256);
  EXPECT_EQ(verifyError(requests, plan, 256), "");

  // With alignment 1 the same buffers pack to the byte.
  ArenaPlan packed = planArena(requests, /*alignment=*/1);
  EXPECT_EQ(packed.arenaBytes, 1u + 300 + 17 + 256);
  EXPECT_EQ(verifyError(requests, packed, 1), "");
}

TEST(ArenaPlanner, ZeroSizeBuffersTakeNoSpace) {
  std::vector<BufferRequest> requests = {
      {0, 0, 0, 9}, {1, 64, 0, 9}, {2, 0, 2, 3}, {3, 128, 2, 3}};
  ArenaPlan plan = planArena(requests);
  EXPECT_EQ(plan.offsets[0], 0u);
  EXPECT_EQ(plan.offsets[2], 0u);
  EXPECT_EQ(plan.lowerBound, 192u);
  EXPECT_EQ(plan.arenaBytes, 192u);
  EXPECT_EQ(plan.liveBytes[0], 64u);
  EXPECT_EQ(verifyError(requests, plan), "");

  std::vector<BufferRequest> onlyZero = {{0, 0, 0, 2}, {1, 0, 1, 1}};
  ArenaPlan empty = planArena(onlyZero);
  EXPECT_EQ(empty.offsets, (std::vector<uint64_t>{0, 0}));
  EXPECT_EQ(empty.arenaBytes, 0u);
  EXPECT_EQ(empty.lowerBound, 0u);
  EXPECT_EQ(empty.liveBytes, (std::vector<uint64_t>{0, 0, 0}));
  EXPECT_EQ(empty.peakIndex, 0);
  EXPECT_EQ(verifyError(onlyZero, empty), "");
}

TEST(ArenaPlanner, NoRequestsGiveAnEmptyPlan) {
  ArenaPlan plan = planArena({});
  EXPECT_TRUE(plan.offsets.empty());
  EXPECT_EQ(plan.arenaBytes, 0u);
  EXPECT_EQ(plan.lowerBound, 0u);
  EXPECT_TRUE(plan.liveBytes.empty());
  EXPECT_EQ(plan.peakIndex, -1);
  EXPECT_EQ(verifyError({}, plan), "");
}

TEST(ArenaPlanner, LowerBoundAndPeakIndex) {
  // Aligned sizes 128, 64, 256, 64, 256. Live bytes per instruction:
  //   0: A          128      4: B C      320 (peak)
  //   1: A          128      5: B D      128
  //   2: A B        192      6: D E      320 (same peak, later)
  //   3: A B        192
  std::vector<BufferRequest> requests = {{10, 100, 0, 3},
                                         {11, 64, 2, 5},
                                         {12, 200, 4, 4},
                                         {13, 1, 5, 6},
                                         {14, 256, 6, 6}};
  ArenaPlan plan = planArena(requests);
  EXPECT_EQ(plan.liveBytes,
            (std::vector<uint64_t>{128, 128, 192, 192, 320, 128, 320}));
  EXPECT_EQ(plan.lowerBound, 320u);
  EXPECT_EQ(plan.peakIndex, 4);
  EXPECT_GE(plan.arenaBytes, plan.lowerBound);
  expectNoSharedBytes(requests, plan, 64);
  EXPECT_EQ(verifyError(requests, plan), "");
}

//===----------------------------------------------------------------------===//
// Random interval sets
//===----------------------------------------------------------------------===//

constexpr int kRandomSets = 200;

/// A reproducible set of 20..200 buffers of 1 B..1 MiB (uniform), each live
/// for 1..101 instructions starting anywhere in 0..500 and clipped to 500.
/// Draws use plain modulo on mt19937_64, whose output the standard fixes, so
/// every platform sees the same sets (std::uniform_int_distribution does not
/// promise that).
std::vector<BufferRequest> makeRandomRequests(uint64_t seed) {
  std::mt19937_64 random(seed);
  auto uniform = [&](uint64_t low, uint64_t high) {
    return low + random() % (high - low + 1);
  };
  int64_t count = uniform(20, 200);
  std::vector<BufferRequest> requests;
  for (int64_t id = 0; id < count; ++id) {
    uint64_t bytes = uniform(1, 1 << 20);
    int64_t firstUse = uniform(0, 500);
    int64_t lastUse = std::min<int64_t>(500, firstUse + uniform(0, 100));
    requests.push_back({id, bytes, firstUse, lastUse});
  }
  return requests;
}

TEST(ArenaPlanner, RandomSetsKeepTheInvariant) {
  for (int seed = 0; seed < kRandomSets; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::vector<BufferRequest> requests = makeRandomRequests(seed);
    ArenaPlan plan = planArena(requests);
    EXPECT_EQ(verifyError(requests, plan), "");
    expectNoSharedBytes(requests, plan, 64);
    EXPECT_GE(plan.arenaBytes, plan.lowerBound);
  }
}

TEST(ArenaPlanner, RandomSetsStayNearTheLowerBound) {
  double sumOfRatios = 0;
  double worstRatio = 0;
  int worstSeed = -1;
  for (int seed = 0; seed < kRandomSets; ++seed) {
    std::vector<BufferRequest> requests = makeRandomRequests(seed);
    ArenaPlan plan = planArena(requests);
    ASSERT_GT(plan.lowerBound, 0u);
    double ratio = static_cast<double>(plan.arenaBytes) / plan.lowerBound;
    sumOfRatios += ratio;
    if (ratio > worstRatio) {
      worstRatio = ratio;
      worstSeed = seed;
    }
  }
  double meanRatio = sumOfRatios / kRandomSets;
  std::printf("arena / lower bound over %d random sets: mean %.4f, max %.4f "
              "(seed %d)\n",
              kRandomSets, meanRatio, worstRatio, worstSeed);
  EXPECT_LE(meanRatio, 1.10);
  EXPECT_LE(worstRatio, 1.35) << "seed " << worstSeed;
}

//===----------------------------------------------------------------------===//
// Pinned requests (fixedOffset)
//===----------------------------------------------------------------------===//

// A carried copy (docs/generation.md section 6) is pinned at 0 in two
// programs; everything else moves around it. In the first program it is
// live at the end only, in the second at the start and again at the end
// (two requests of one id): the others reuse its bytes in between, never
// while it is live.
TEST(ArenaPlanner, PinnedRequestsKeepTheirOffsetAcrossPrograms) {
  std::vector<BufferRequest> first = {
      {0, 300, 6, 9, 0}, {1, 1000, 0, 4}, {2, 500, 3, 7}, {3, 200, 8, 9}};
  std::vector<BufferRequest> second = {{0, 300, 0, 2, 0},
                                       {1, 900, 1, 5},
                                       {2, 256, 3, 6},
                                       {0, 300, 7, 9, 0},
                                       {3, 128, 9, 9}};
  for (const std::vector<BufferRequest> *requests : {&first, &second}) {
    ArenaPlan plan = planArena(*requests);
    EXPECT_EQ(verifyError(*requests, plan), "");
    expectNoSharedBytes(*requests, plan, 64);
    for (size_t index = 0; index < requests->size(); ++index) {
      if ((*requests)[index].fixedOffset) {
        EXPECT_EQ(plan.offsets[index], 0u);
      }
    }
  }
  // In the second program buffer 1 meets the copy's first stretch, so it
  // sits above the copy's 320 aligned bytes; buffer 2, live only between
  // the two stretches, takes the copy's bytes.
  ArenaPlan plan = planArena(second);
  EXPECT_GE(plan.offsets[1], 320u);
  EXPECT_EQ(plan.offsets[2], 0u);
}

// A pinned request away from 0 leaves the space below it to the others,
// and the arena reaches at least its end even when the bytes live at once
// are fewer.
TEST(ArenaPlanner, PinnedRequestAboveTheOthers) {
  std::vector<BufferRequest> requests = {
      {0, 64, 0, 3, 1024}, {1, 512, 0, 1}, {2, 512, 2, 3}};
  ArenaPlan plan = planArena(requests);
  EXPECT_EQ(verifyError(requests, plan), "");
  EXPECT_EQ(plan.offsets[0], 1024u);
  EXPECT_EQ(plan.offsets[1], 0u);
  EXPECT_EQ(plan.offsets[2], 0u);
  EXPECT_EQ(plan.arenaBytes, 1088u);
  EXPECT_EQ(plan.lowerBound, 576u);
}

// Random sets with a pinned buffer in three live stretches: the planner
// keeps the invariant and the pin on every one.
TEST(ArenaPlanner, RandomSetsAroundAPinnedBuffer) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    std::vector<BufferRequest> requests = makeRandomRequests(seed);
    int64_t last = 0;
    for (const BufferRequest &request : requests)
      last = std::max(last, request.lastUse);
    for (auto [first, end] : {std::pair<int64_t, int64_t>{0, last / 4},
                              {last / 2, last / 2 + 3},
                              {last - 2, last}})
      requests.push_back({-1, 4096, first, std::max(first, end), 128});
    ArenaPlan plan = planArena(requests);
    EXPECT_EQ(verifyError(requests, plan), "") << "seed " << seed;
    expectNoSharedBytes(requests, plan, 64);
    for (size_t index = 0; index < requests.size(); ++index) {
      if (requests[index].fixedOffset) {
        EXPECT_EQ(plan.offsets[index], 128u) << "seed " << seed;
      }
    }
  }
}

//===----------------------------------------------------------------------===//
// verifyArena
//===----------------------------------------------------------------------===//

TEST(ArenaVerifier, CatchesOverlappingBuffers) {
  // Both live during 3..5, but bytes [64, 128) belong to both.
  std::vector<BufferRequest> requests = {{7, 128, 0, 5}, {9, 64, 3, 8}};
  ArenaPlan plan;
  plan.offsets = {0, 64};
  plan.arenaBytes = 192;
  plan.lowerBound = 192;
  plan.liveBytes = {128, 128, 128, 192, 192, 192, 64, 64, 64};
  plan.peakIndex = 3;
  std::string error = verifyError(requests, plan);
  EXPECT_NE(error.find("buffer 7 (live [0, 5], bytes [0, 128))"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("buffer 9 (live [3, 8], bytes [64, 128))"),
            std::string::npos)
      << error;
  EXPECT_FALSE(verifyArena(requests, plan, /*error=*/nullptr));

  // The same offsets are fine once the ranges no longer meet.
  requests[1].firstUse = 6;
  plan.liveBytes = {128, 128, 128, 128, 128, 128, 64, 64, 64};
  plan.lowerBound = 128;
  plan.peakIndex = 0;
  EXPECT_EQ(verifyError(requests, plan), "");
}

TEST(ArenaVerifier, CatchesABrokenPlannerResult) {
  std::vector<BufferRequest> requests = makeRandomRequests(1);
  ArenaPlan plan = planArena(requests);
  ASSERT_EQ(verifyError(requests, plan), "");

  // Move one buffer onto another that is live at the same time.
  size_t moved = requests.size();
  size_t target = 0;
  for (size_t a = 0; a < requests.size() && moved == requests.size(); ++a)
    for (size_t b = 0; b < requests.size(); ++b)
      if (a != b && requests[a].firstUse <= requests[b].lastUse &&
          requests[b].firstUse <= requests[a].lastUse) {
        moved = a;
        target = b;
        break;
      }
  ASSERT_LT(moved, requests.size());
  ArenaPlan broken = plan;
  broken.offsets[moved] = broken.offsets[target];
  broken.arenaBytes = UINT64_MAX / 2;
  EXPECT_NE(verifyError(requests, broken).find("share bytes"),
            std::string::npos);
}

TEST(ArenaVerifier, CatchesMisalignmentAndStaleProfile) {
  std::vector<BufferRequest> requests = {{0, 64, 0, 1}, {1, 64, 2, 3}};
  ArenaPlan plan = planArena(requests);
  ASSERT_EQ(verifyError(requests, plan), "");

  ArenaPlan misaligned = plan;
  misaligned.offsets[1] = 32;
  misaligned.arenaBytes = 96;
  EXPECT_NE(verifyError(requests, misaligned).find("not aligned to 64"),
            std::string::npos);

  ArenaPlan outside = plan;
  outside.arenaBytes = 32;
  EXPECT_NE(verifyError(requests, outside).find("ends past the arena"),
            std::string::npos);

  ArenaPlan stale = plan;
  stale.lowerBound = 128;
  EXPECT_NE(verifyError(requests, stale).find("live bytes do not match"),
            std::string::npos);

  ArenaPlan truncated = plan;
  truncated.offsets.pop_back();
  EXPECT_NE(verifyError(requests, truncated).find("1 offsets for 2 requests"),
            std::string::npos);
}

// Two pinned requests that share bytes while live are the caller's bug:
// the verifier names both; and a pinned buffer moved elsewhere is caught
// even when it collides with nothing.
TEST(ArenaVerifier, CatchesCollidingOrMovedPinnedBuffers) {
  std::vector<BufferRequest> requests = {{4, 128, 0, 3, 0}, {5, 64, 2, 5, 64}};
  ArenaPlan plan = planArena(requests);
  std::string error = verifyError(requests, plan);
  EXPECT_NE(error.find("buffer 4 (live [0, 3], bytes [0, 128))"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("share bytes"), std::string::npos) << error;

  std::vector<BufferRequest> alone = {{4, 128, 0, 3, 128}, {5, 64, 0, 3}};
  ArenaPlan moved = planArena(alone);
  ASSERT_EQ(verifyError(alone, moved), "");
  moved.offsets[0] = 256;
  moved.arenaBytes = 384;
  EXPECT_NE(verifyError(alone, moved)
                .find("buffer 4 is at offset 256, not at its fixed offset 128"),
            std::string::npos);
}

// Sizes that would wrap the arena's 64-bit offsets are found before
// planning, at the request that crosses the limit.
TEST(ArenaOverflow, FindsTheRequestThatCrossesTheLimit) {
  std::vector<BufferRequest> requests = {{1, 100, 0, 1},
                                         {2, kMaxArenaBytes / 2, 1, 2}};
  EXPECT_EQ(findArenaOverflow(requests), std::nullopt);
  requests.push_back({3, kMaxArenaBytes / 2, 2, 3});
  EXPECT_EQ(findArenaOverflow(requests), std::optional<size_t>(2));
  // A size within `alignment` of 2^64 would wrap to 0 when aligned.
  std::vector<BufferRequest> wrapping = {{1, UINT64_MAX - 3, 0, 0}};
  EXPECT_EQ(findArenaOverflow(wrapping), std::optional<size_t>(0));
  // A pinned buffer ends at its offset + size, however small the sum is.
  std::vector<BufferRequest> pinned = {{1, 64, 0, 0},
                                       {2, 128, 0, 1, kMaxArenaBytes - 64}};
  EXPECT_EQ(findArenaOverflow(pinned), std::optional<size_t>(1));
}

} // namespace
