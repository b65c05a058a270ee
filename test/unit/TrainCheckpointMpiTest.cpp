//===- TrainCheckpointMpiTest.cpp - checkpoints on 2 MPI ranks ------------===//
//
// Each rank saves and loads its own regions (of different sizes, with
// rank-dependent bytes), rank 0 writes one manifest for both, and a failure
// on one rank (a corrupt rank-1 file) fails the call on every rank with the
// same message, naming the file. A checkpoint of 2 ranks is refused by a
// world of 1. Run by ctest under `mpirun -np 2` (test/unit/CMakeLists.txt);
// main() refuses one rank, where nothing here could fail.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/train/Checkpoint.h"

#include "test/unit/SingleRankCommunicator.h"
#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

using namespace zplan;
using namespace zplan::train;
using zplan::testing::contains;
using zplan::testing::errorOf;
namespace fs = std::filesystem;

namespace {

comm::Communicator *communicator = nullptr;
std::string scratch;

constexpr const char *kPlan = "0x2222222222222222";

/// Rank r holds 100 + 10 r floats of one region and r + 1 bytes of another.
struct State {
  std::vector<float> shard;
  std::vector<uint8_t> extra;
  State(int rank, int seed) : shard(100 + 10 * rank), extra(rank + 1) {
    for (size_t i = 0; i < shard.size(); ++i)
      shard[i] = static_cast<float>(seed * 10000 + rank * 1000 + i);
    for (size_t i = 0; i < extra.size(); ++i)
      extra[i] = static_cast<uint8_t>(seed + rank + i);
  }
  std::vector<CheckpointRegion> regions() {
    return {{"shard", shard.data(), shard.size() * 4},
            {"extra", extra.data(), extra.size()}};
  }
};

/// A directory every rank names the same: rank 0's, broadcast.
std::string sharedDirectory(const std::string &name) {
  return scratch + "/" + name;
}

TEST(TrainCheckpointTwoRanks, EachRankRestoresItsOwnRegions) {
  std::string root = sharedDirectory("roundtrip");
  int rank = communicator->rank();
  State saved(rank, 1);
  SaveResult result;
  CheckpointInfo info{kPlan, 7, {{"data-step", "7"}}};
  ASSERT_EQ(errorOf(saveCheckpoint(root, info, saved.regions(), *communicator,
                                   result, {})),
            "");
  // No rank returns before the checkpoint is complete.
  EXPECT_TRUE(fs::exists(root + "/latest"));
  EXPECT_TRUE(fs::exists(root + "/step-00000007/rank-1.bin"));
  EXPECT_EQ(fs::file_size(root + "/step-00000007/rank-" + std::to_string(rank) +
                          ".bin"),
            (100u + 10u * rank) * 4u + rank + 1u);

  State restored(rank, 2);
  LoadedCheckpoint got;
  ASSERT_EQ(errorOf(loadCheckpoint(root, kPlan, restored.regions(),
                                   *communicator, got)),
            "");
  EXPECT_EQ(restored.shard, saved.shard);
  EXPECT_EQ(restored.extra, saved.extra);
  EXPECT_EQ(got.step, 7u);
  EXPECT_EQ(got.values, (CheckpointValues{{"data-step", "7"}}));
}

TEST(TrainCheckpointTwoRanks, AFailureOnOneRankFailsEveryRankAlike) {
  std::string root = sharedDirectory("corrupt");
  int rank = communicator->rank();
  State saved(rank, 1);
  SaveResult result;
  ASSERT_EQ(errorOf(saveCheckpoint(root, {kPlan, 3, {}}, saved.regions(),
                                   *communicator, result, {})),
            "");
  std::string file = root + "/step-00000003/rank-1.bin";
  if (rank == 1) {
    std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
    stream.seekp(17);
    stream.put('\x7f');
  }
  ASSERT_EQ(errorOf(communicator->barrier()), "");
  State restored(rank, 2);
  LoadedCheckpoint got;
  std::string message = errorOf(
      loadCheckpoint(root, kPlan, restored.regions(), *communicator, got));
  EXPECT_TRUE(contains(message, "rank 1: checkpoint file '" + file +
                                    "': region 'shard'"))
      << "rank " << rank;
  EXPECT_TRUE(contains(message, "does not match its checksum"));

  // A region that differs on rank 0 only: rank 0's message, for both.
  root = sharedDirectory("rank0only");
  ASSERT_EQ(errorOf(saveCheckpoint(root, {kPlan, 3, {}}, saved.regions(),
                                   *communicator, result, {})),
            "");
  std::vector<CheckpointRegion> regions = restored.regions();
  if (rank == 0)
    regions[1].name = "other";
  message = errorOf(loadCheckpoint(root, kPlan, regions, *communicator, got));
  EXPECT_TRUE(contains(message, "rank 0: checkpoint '" + root +
                                    "/step-00000003' holds region 'extra' "
                                    "for rank 0 where this run has 'other'"))
      << "rank " << rank;
}

TEST(TrainCheckpointTwoRanks, AnotherWorldSizeIsRefused) {
  std::string root = sharedDirectory("worldsize");
  int rank = communicator->rank();
  State saved(rank, 1);
  SaveResult result;
  ASSERT_EQ(errorOf(saveCheckpoint(root, {kPlan, 4, {}}, saved.regions(),
                                   *communicator, result, {})),
            "");
  if (rank == 0) {
    zplan::testing::SingleRankCommunicator alone;
    State restored(0, 2);
    LoadedCheckpoint got;
    EXPECT_EQ(
        errorOf(loadCheckpoint(root, kPlan, restored.regions(), alone, got)),
        "checkpoint '" + root +
            "/step-00000004' was written by a plan with world size 2; "
            "this run has 1");
  }
  ASSERT_EQ(errorOf(communicator->barrier()), "");
}

} // namespace

int main(int argc, char **argv) {
  std::unique_ptr<comm::MpiCommunicator> mpi;
  if (Status status = comm::MpiCommunicator::create(&argc, &argv, mpi);
      !status.ok()) {
    std::fprintf(stderr, "TrainCheckpointMpiTest: %s\n",
                 status.message().c_str());
    return 1;
  }
  if (mpi->size() < 2) {
    std::fprintf(stderr, "TrainCheckpointMpiTest: run it on 2 or more ranks "
                         "(mpirun -np 2); on one rank it tests nothing\n");
    return 1;
  }
  communicator = mpi.get();
  // Rank 0 makes the scratch directory and tells the others its name.
  char name[256] = {};
  if (mpi->rank() == 0) {
    std::snprintf(name, sizeof(name), "/tmp/zplan-checkpoint-mpi-XXXXXX");
    if (::mkdtemp(name) == nullptr)
      mpi->abort(1);
  }
  if (!mpi->broadcast(name, sizeof(name), 0).ok())
    return 1;
  scratch = name;
  ::testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS();
  // No rank finalizes MPI (or removes the scratch) while another works.
  if (Status status = mpi->barrier(); !status.ok())
    return 1;
  if (mpi->rank() == 0)
    fs::remove_all(scratch);
  return result;
}
