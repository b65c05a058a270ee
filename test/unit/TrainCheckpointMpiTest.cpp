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
#include <iterator>
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

//===----------------------------------------------------------------------===//
// A save killed on one rank, as mpirun then kills the other
//===----------------------------------------------------------------------===//

/// The stages the kill tests use (test/unit/CMakeLists.txt names them by
/// number), and the rank that dies there: the one that writes at that
/// stage.
struct KillStage {
  SaveStage stage;
  int rank;
  /// True when `latest` already names the new checkpoint.
  bool newIsLatest;
};
const KillStage kKillStages[] = {
    {SaveStage::RankFileHalfWritten, 1, false},
    {SaveStage::RankFileWritten, 1, false},
    {SaveStage::ManifestHalfWritten, 0, false},
    {SaveStage::DirectoryRenamed, 0, false},
    {SaveStage::LatestStaged, 0, false},
    {SaveStage::LatestReplaced, 0, true},
};

/// `--kill-at N ROOT`: saves step 10, then dies in the save of step 20 at
/// stage N. Returns 1 if the save did not reach the stage.
int killDuringSave(const KillStage &kill, const std::string &root) {
  int rank = communicator->rank();
  State first(rank, 1), second(rank, 2);
  SaveResult result;
  CheckpointOptions options;
  options.keepLast = 1;
  if (!saveCheckpoint(root, {kPlan, 10, {}}, first.regions(), *communicator,
                      result, options)
           .ok())
    return 1;
  options.onStage = [&](SaveStage reached) {
    if (reached == kill.stage && rank == kill.rank) {
      // The marker tells the second launch that the stage was reached.
      FILE *marker = std::fopen((root + ".killed").c_str(), "w");
      if (marker)
        std::fclose(marker);
      std::_Exit(86);
    }
  };
  Status status = saveCheckpoint(root, {kPlan, 20, {}}, second.regions(),
                                 *communicator, result, options);
  std::fprintf(stderr, "the save was not killed: %s\n",
               status.ok() ? "it completed" : status.message().c_str());
  return 1;
}

/// `--check-after-kill N ROOT`: the killed save left a loadable checkpoint
/// (step 10, or 20 once `latest` moved), and the next save succeeds.
int checkAfterKill(const KillStage &kill, const std::string &root) {
  int rank = communicator->rank();
  auto fail = [&](const std::string &what) {
    std::fprintf(stderr, "rank %d: %s\n", rank, what.c_str());
    return 1;
  };
  if (!fs::exists(root + ".killed"))
    return fail("the killed launch never reached its stage");
  State restored(rank, 0);
  LoadedCheckpoint got;
  if (Status status =
          loadCheckpoint(root, kPlan, restored.regions(), *communicator, got);
      !status.ok())
    return fail(status.message());
  State expected(rank, kill.newIsLatest ? 2 : 1);
  if (got.step != (kill.newIsLatest ? 20u : 10u) ||
      restored.shard != expected.shard || restored.extra != expected.extra)
    return fail("loaded step " + std::to_string(got.step) +
                " with the wrong contents");
  State later(rank, 3);
  SaveResult result;
  CheckpointOptions options;
  options.keepLast = 1;
  if (Status status = saveCheckpoint(root, {kPlan, 30, {}}, later.regions(),
                                     *communicator, result, options);
      !status.ok())
    return fail(status.message());
  if (Status status =
          loadCheckpoint(root, kPlan, restored.regions(), *communicator, got);
      !status.ok() || got.step != 30 || restored.shard != later.shard)
    return fail("the save after the kill did not load back");
  if (rank == 0)
    for (const auto &entry : fs::directory_iterator(root))
      if (entry.path().filename() != "latest" &&
          entry.path().filename() != "step-00000030")
        return fail("left behind: " + entry.path().string());
  return 0;
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
  // The kill tests' two launches (see test/unit/CMakeLists.txt).
  if (argc == 4 && (std::string(argv[1]) == "--kill-at" ||
                    std::string(argv[1]) == "--check-after-kill")) {
    int index = std::atoi(argv[2]);
    if (index < 0 || index >= static_cast<int>(std::size(kKillStages)))
      return 2;
    int code = std::string(argv[1]) == "--kill-at"
                   ? killDuringSave(kKillStages[index], argv[3])
                   : checkAfterKill(kKillStages[index], argv[3]);
    // Every rank's verdict, so that no rank finalizes MPI alone.
    float failed = code != 0 ? 1.0f : 0.0f;
    if (!mpi->allReduce(&failed, 1).ok())
      return 1;
    return failed != 0.0f ? 1 : 0;
  }
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
