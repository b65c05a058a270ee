//===- TrainCheckpointTest.cpp - checkpoints on one rank ------------------===//
//
// Save and load round-trip every region, the step and the caller's values;
// load refuses what is not a complete checkpoint of this plan, naming the
// file; and a save killed at any of its stages (a forked child that exits
// from the stage hook, as a SIGKILL would stop it) leaves the previous
// checkpoint loadable, and the next save succeeds. The 2-rank behaviour is
// TrainCheckpointMpiTest.cpp. CheckpointReader (one process, every rank's
// file) reads a 2-rank checkpoint written here by hand, manifest and all,
// as saveCheckpoint lays it out.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Checkpoint.h"

#include "runtime/support/Checksum.h"
#include "test/unit/SingleRankCommunicator.h"
#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace zplan;
using namespace zplan::train;
using zplan::testing::contains;
using zplan::testing::errorOf;
namespace fs = std::filesystem;

namespace {

constexpr const char *kPlan = "0x00000000c0ffee00";

/// A rank's state: two regions whose bytes depend on `seed`.
struct State {
  std::vector<float> shard;
  std::vector<uint8_t> moments;

  explicit State(int seed, size_t floats = 1000, size_t bytes = 333)
      : shard(floats), moments(bytes) {
    for (size_t i = 0; i < shard.size(); ++i)
      shard[i] = static_cast<float>(seed * 1000 + i) * 0.5f;
    for (size_t i = 0; i < moments.size(); ++i)
      moments[i] = static_cast<uint8_t>(seed * 31 + i);
  }
  std::vector<CheckpointRegion> regions() {
    return {{"group 0 (shard)", shard.data(), shard.size() * sizeof(float)},
            {"group 0 (adam m)", moments.data(), moments.size()}};
  }
  bool operator==(const State &other) const {
    return shard == other.shard && moments == other.moments;
  }
};

class TrainCheckpoint : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/zplan-checkpoint-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    root = std::string(pattern) + "/ckpt";
  }
  void TearDown() override { fs::remove_all(fs::path(root).parent_path()); }

  Status save(uint64_t step, State &state, uint64_t keepLast = 0,
              std::function<void(SaveStage)> hook = {}) {
    CheckpointInfo info{
        kPlan, step, {{"data-step", std::to_string(step)}, {"seed", "7"}}};
    SaveResult result;
    CheckpointOptions options;
    options.keepLast = keepLast;
    options.onStage = std::move(hook);
    return saveCheckpoint(root, info, state.regions(), communicator, result,
                          options);
  }
  Status load(const std::string &path, State &state, LoadedCheckpoint &got,
              const std::string &plan = kPlan) {
    return loadCheckpoint(path, plan, state.regions(), communicator, got);
  }
  std::vector<std::string> entries() {
    std::vector<std::string> names;
    for (const auto &entry : fs::directory_iterator(root))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  static std::string read(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  zplan::testing::SingleRankCommunicator communicator;
  std::string root;
};

TEST_F(TrainCheckpoint, SaveThenLoadRestoresRegionsStepAndValues) {
  State saved(1);
  SaveResult result;
  CheckpointInfo info{kPlan, 12, {{"data-step", "12"}, {"rng", "a=b c"}}};
  ASSERT_EQ(errorOf(saveCheckpoint(root, info, saved.regions(), communicator,
                                   result)),
            "");
  EXPECT_EQ(result.directory, root + "/step-00000012");
  EXPECT_EQ(read(root + "/latest"), "step-00000012\n");
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step-00000012"}));
  EXPECT_EQ(fs::file_size(root + "/step-00000012/rank-0.bin"), 4000u + 333u);
  std::string manifest = read(root + "/step-00000012/manifest.txt");
  EXPECT_TRUE(contains(manifest, "format\tzplan-checkpoint 1\nplan\t" +
                                     std::string(kPlan) +
                                     "\nworld-size\t1\nstep\t12\n"));
  EXPECT_TRUE(contains(manifest, "region\t0\t4000\t0x"));
  EXPECT_TRUE(contains(manifest, "\tgroup 0 (adam m)\n"));

  for (const std::string &path : {root, root + "/", root + "/step-00000012"}) {
    State restored(2);
    LoadedCheckpoint got;
    ASSERT_EQ(errorOf(load(path, restored, got)), "") << path;
    EXPECT_TRUE(restored == saved) << path;
    EXPECT_EQ(got.step, 12u);
    EXPECT_EQ(got.directory, root + "/step-00000012");
    EXPECT_EQ(got.values,
              (CheckpointValues{{"data-step", "12"}, {"rng", "a=b c"}}));
  }
}

/// The moments of State as a region in parts of 100, 200 and 33 bytes,
/// read and written through callbacks that count their calls.
CheckpointRegion momentsInParts(State &state, int &reads, int &writes) {
  CheckpointRegion region;
  region.name = "group 0 (adam m)";
  region.bytes = state.moments.size();
  region.parts = {100, 200, 33};
  region.readPart = [&state, &reads, parts = region.parts](size_t part,
                                                           void *out) {
    uint64_t at = 0;
    for (size_t i = 0; i < part; ++i)
      at += parts[i];
    std::memcpy(out, state.moments.data() + at, parts[part]);
    ++reads;
    return Status::success();
  };
  region.writePart = [&state, &writes, parts = region.parts](size_t part,
                                                             const void *in) {
    uint64_t at = 0;
    for (size_t i = 0; i < part; ++i)
      at += parts[i];
    std::memcpy(state.moments.data() + at, in, parts[part]);
    ++writes;
    return Status::success();
  };
  return region;
}

TEST_F(TrainCheckpoint, ARegionInPartsWritesTheSameFileAndLoadsOnlyWhenWhole) {
  // Saved in parts, the file and manifest are those of the region saved
  // whole; loaded in parts, each part is handed over once.
  State saved(1);
  ASSERT_EQ(errorOf(save(3, saved)), "");
  std::string whole = read(root + "/step-00000003/rank-0.bin");
  std::string manifest = read(root + "/step-00000003/manifest.txt");
  int reads = 0, writes = 0;
  std::vector<CheckpointRegion> regions = saved.regions();
  regions[1] = momentsInParts(saved, reads, writes);
  SaveResult result;
  ASSERT_EQ(errorOf(saveCheckpoint(
                root, {kPlan, 3, {{"data-step", "3"}, {"seed", "7"}}}, regions,
                communicator, result)),
            "");
  EXPECT_EQ(reads, 3);
  EXPECT_EQ(read(root + "/step-00000003/rank-0.bin"), whole);
  EXPECT_EQ(read(root + "/step-00000003/manifest.txt"), manifest);

  State restored(2);
  regions = restored.regions();
  regions[1] = momentsInParts(restored, reads, writes);
  LoadedCheckpoint got;
  ASSERT_EQ(errorOf(loadCheckpoint(root, kPlan, regions, communicator, got)),
            "");
  EXPECT_EQ(writes, 3);
  EXPECT_TRUE(restored == saved);

  // A corrupt byte in the region: refused, and no part handed over.
  {
    std::fstream stream(root + "/step-00000003/rank-0.bin",
                        std::ios::in | std::ios::out | std::ios::binary);
    stream.seekp(4200);
    stream.put('\x55');
  }
  State untouched(4);
  regions = untouched.regions();
  writes = 0;
  regions[1] = momentsInParts(untouched, reads, writes);
  EXPECT_TRUE(
      contains(errorOf(loadCheckpoint(root, kPlan, regions, communicator, got)),
               "region 'group 0 (adam m)' (bytes 4000-4333) does not match its "
               "checksum"));
  EXPECT_EQ(writes, 0);
  EXPECT_EQ(untouched.moments, State(4).moments);

  // Parts that do not add up to the region are refused before writing.
  regions[1].parts = {100, 200};
  EXPECT_TRUE(contains(errorOf(saveCheckpoint(root, {kPlan, 4, {}}, regions,
                                              communicator, result)),
                       "checkpoint region 'group 0 (adam m)' has parts of 300 "
                       "bytes in all for its 333"));
}

TEST_F(TrainCheckpoint, LatestFollowsTheNewestSaveAndKeepLastPrunes) {
  for (uint64_t step = 1; step <= 4; ++step) {
    State state(static_cast<int>(step));
    ASSERT_EQ(errorOf(save(step * 10, state, 2)), "");
  }
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step-00000030",
                                                 "step-00000040"}));
  State restored(0);
  LoadedCheckpoint got;
  ASSERT_EQ(errorOf(load(root, restored, got)), "");
  EXPECT_EQ(got.step, 40u);
  EXPECT_TRUE(restored == State(4));
  ASSERT_EQ(errorOf(load(root + "/step-00000030", restored, got)), "");
  EXPECT_TRUE(restored == State(3));
}

TEST_F(TrainCheckpoint, KeepLastKeepsTheResumedLineNotAnAbandonedFuture) {
  // A run saved 10 and 50; a new run resumed from 10 saves 20, keeping 2:
  // 10 and 20 are its line, 50 the abandoned run's.
  State state(1);
  ASSERT_EQ(errorOf(save(10, state)), "");
  ASSERT_EQ(errorOf(save(50, state)), "");
  ASSERT_EQ(errorOf(save(20, state, 2)), "");
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step-00000010",
                                                 "step-00000020"}));
}

TEST_F(TrainCheckpoint, KeepLastZeroKeepsEveryCheckpoint) {
  for (uint64_t step = 1; step <= 3; ++step) {
    State state(static_cast<int>(step));
    ASSERT_EQ(errorOf(save(step, state)), "");
  }
  EXPECT_EQ(entries().size(), 4u);
}

TEST_F(TrainCheckpoint, SavingAStepAgainReplacesIt) {
  // A run resumed from step 10 saves step 20 again over an older run's.
  State first(1), second(2);
  ASSERT_EQ(errorOf(save(20, first)), "");
  ASSERT_EQ(errorOf(save(20, second)), "");
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step-00000020"}));
  State restored(0);
  LoadedCheckpoint got;
  ASSERT_EQ(errorOf(load(root, restored, got)), "");
  EXPECT_TRUE(restored == second);
}

TEST_F(TrainCheckpoint, AnotherPlanOrOtherRegionsAreRefused) {
  State saved(1);
  ASSERT_EQ(errorOf(save(3, saved)), "");
  LoadedCheckpoint got;
  State restored(0);
  EXPECT_EQ(errorOf(load(root, restored, got, "0x1111111111111111")),
            "checkpoint '" + root +
                "/step-00000003' was written by another plan (identity " +
                kPlan + "); this run's plan is 0x1111111111111111");

  State bigger(0, 1001);
  EXPECT_EQ(errorOf(load(root, bigger, got)),
            "checkpoint '" + root +
                "/step-00000003' holds 4000 bytes of region 'group 0 "
                "(shard)' for rank 0; this run's is 4004 bytes");

  std::vector<CheckpointRegion> renamed = restored.regions();
  renamed[1].name = "group 0 (adam v)";
  EXPECT_TRUE(
      contains(errorOf(loadCheckpoint(root, kPlan, renamed, communicator, got)),
               "holds region 'group 0 (adam m)' for rank 0 where this run has "
               "'group 0 (adam v)'"));

  std::vector<CheckpointRegion> more = restored.regions();
  float extra = 0;
  more.push_back({"group 1 (shard)", &extra, 4});
  EXPECT_TRUE(contains(
      errorOf(loadCheckpoint(root, kPlan, more, communicator, got)),
      "has no region 'group 1 (shard)' for rank 0 (it holds 2 regions; this "
      "run has 3)"));
  std::vector<CheckpointRegion> fewer = restored.regions();
  fewer.pop_back();
  EXPECT_TRUE(contains(
      errorOf(loadCheckpoint(root, kPlan, fewer, communicator, got)),
      "holds region 'group 0 (adam m)' for rank 0, which this run does not "
      "have"));
}

TEST_F(TrainCheckpoint, ACorruptByteIsFoundAndNamed) {
  State saved(1);
  ASSERT_EQ(errorOf(save(5, saved)), "");
  std::string file = root + "/step-00000005/rank-0.bin";
  {
    std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
    stream.seekp(4100);
    stream.put('\x55');
  }
  State restored(0);
  LoadedCheckpoint got;
  std::string message = errorOf(load(root, restored, got));
  EXPECT_TRUE(contains(message, "checkpoint file '" + file +
                                    "': region 'group 0 (adam m)' (bytes "
                                    "4000-4333) does not match its checksum"));
  EXPECT_TRUE(contains(message, "the file is corrupt"));
}

TEST_F(TrainCheckpoint, AMissingOrTruncatedRankFileIsNamed) {
  State saved(1);
  ASSERT_EQ(errorOf(save(5, saved)), "");
  std::string file = root + "/step-00000005/rank-0.bin";
  fs::resize_file(file, 100);
  State restored(0);
  LoadedCheckpoint got;
  EXPECT_EQ(errorOf(load(root, restored, got)),
            "checkpoint file '" + file +
                "' is 100 bytes; its manifest says 4333");
  fs::remove(file);
  EXPECT_TRUE(contains(errorOf(load(root, restored, got)),
                       "cannot open checkpoint file '" + file + "'"));
}

TEST_F(TrainCheckpoint, AnEditedOrTruncatedManifestIsRefused) {
  State saved(1);
  ASSERT_EQ(errorOf(save(5, saved)), "");
  std::string manifest = root + "/step-00000005/manifest.txt";
  std::string text = read(manifest);
  std::string edited = text;
  edited.replace(edited.find("world-size\t1"), 12, "world-size\t2");
  std::ofstream(manifest, std::ios::binary) << edited;
  State restored(0);
  LoadedCheckpoint got;
  EXPECT_TRUE(contains(errorOf(load(root, restored, got)),
                       "checkpoint manifest '" + manifest +
                           "' does not match its checksum"));
  std::ofstream(manifest, std::ios::binary) << text.substr(0, text.size() / 2);
  EXPECT_TRUE(contains(errorOf(load(root, restored, got)),
                       "is incomplete (no end line)"));
  fs::remove(manifest);
  EXPECT_EQ(errorOf(load(root + "/step-00000005", restored, got)),
            "checkpoint directory '" + root +
                "/step-00000005' has no manifest.txt (it is incomplete)");
}

TEST_F(TrainCheckpoint, HalfWrittenDirectoriesAndEmptyRootsAreRefused) {
  State state(1);
  LoadedCheckpoint got;
  EXPECT_EQ(errorOf(load(root, state, got)),
            "checkpoint directory '" + root + "' does not exist");
  fs::create_directories(root + "/.tmp-step-00000003-0123");
  EXPECT_EQ(errorOf(load(root, state, got)),
            "no checkpoint in '" + root +
                "': it has no 'latest' file and no manifest.txt");
  EXPECT_TRUE(
      contains(errorOf(load(root + "/.tmp-step-00000003-0123", state, got)),
               "is half-written (a save was interrupted)"));
  std::ofstream(root + "/latest") << "../etc\n";
  EXPECT_TRUE(contains(errorOf(load(root, state, got)),
                       "holds '../etc', not a step-<N> directory name"));
  std::ofstream(root + "/latest") << "step-00000009\n";
  EXPECT_TRUE(contains(errorOf(load(root, state, got)),
                       "names 'step-00000009', which does not exist"));
}

TEST_F(TrainCheckpoint, BadNamesOrRootAreRefusedBeforeWriting) {
  State state(1);
  SaveResult result;
  std::vector<CheckpointRegion> regions = state.regions();
  regions[1].name = regions[0].name;
  EXPECT_EQ(errorOf(saveCheckpoint(root, {kPlan, 1, {}}, regions, communicator,
                                   result)),
            "checkpoint region 'group 0 (shard)' is given twice");
  EXPECT_TRUE(
      contains(errorOf(saveCheckpoint(root, {kPlan, 1, {{"a=b", "c"}}},
                                      state.regions(), communicator, result)),
               "checkpoint value key 'a=b'"));
  EXPECT_FALSE(fs::exists(root));
  std::vector<CheckpointRegion> empty = state.regions();
  empty[0].data = nullptr;
  LoadedCheckpoint got;
  EXPECT_EQ(errorOf(loadCheckpoint(root, kPlan, empty, communicator, got)),
            "checkpoint region 'group 0 (shard)' has no data");
  fs::create_directories(fs::path(root).parent_path());
  std::ofstream(root) << "a file";
  EXPECT_TRUE(contains(errorOf(save(1, state)),
                       "cannot create checkpoint directory '" + root + "'"));
}

//===----------------------------------------------------------------------===//
// A save killed at each stage
//===----------------------------------------------------------------------===//

constexpr int kKilled = 86;

const SaveStage kStages[] = {
    SaveStage::TemporaryDirectoryMade, SaveStage::RankFileHalfWritten,
    SaveStage::RankFileWritten,        SaveStage::ManifestHalfWritten,
    SaveStage::ManifestWritten,        SaveStage::DirectoryRenamed,
    SaveStage::LatestStaged,           SaveStage::LatestReplaced,
    SaveStage::OldOneRemoved,
};

/// True when a kill at `stage` happened after `latest` was replaced.
bool newIsLatest(SaveStage stage) {
  return stage == SaveStage::LatestReplaced ||
         stage == SaveStage::OldOneRemoved;
}

TEST_F(TrainCheckpoint, AKillAtAnyStageLeavesTheLastCheckpointUsable) {
  for (SaveStage stage : kStages) {
    for (bool sameStep : {false, true}) {
      SCOPED_TRACE("stage " + std::to_string(static_cast<int>(stage)) +
                   (sameStep ? ", same step" : ""));
      fs::remove_all(root);
      // Two complete checkpoints, so that pruning (keep 2) removes one.
      State old(1), previous(2), next(3);
      ASSERT_EQ(errorOf(save(10, old, 2)), "");
      ASSERT_EQ(errorOf(save(20, previous, 2)), "");
      uint64_t step = sameStep ? 20 : 30;
      std::fflush(nullptr);
      pid_t child = ::fork();
      ASSERT_GE(child, 0);
      if (child == 0) {
        Status status = save(step, next, 2, [stage](SaveStage reached) {
          if (reached == stage)
            std::_Exit(kKilled);
        });
        std::_Exit(status.ok() ? 0 : 1);
      }
      int wait = 0;
      ASSERT_EQ(::waitpid(child, &wait, 0), child);
      ASSERT_TRUE(WIFEXITED(wait));
      // Every stage is reached: a new step prunes step 10; a replaced
      // step prunes the old copy its exchange left under a .tmp- name.
      ASSERT_EQ(WEXITSTATUS(wait), kKilled) << "the stage was never reached";

      State restored(0);
      LoadedCheckpoint got;
      ASSERT_EQ(errorOf(load(root, restored, got)), "");
      // Before `latest` moves it names step 20, which (when the kill came
      // after the exchange of a same-step save) may already hold the new
      // state; either way a complete checkpoint.
      bool expectNew = newIsLatest(stage) ||
                       (sameStep && stage == SaveStage::DirectoryRenamed) ||
                       (sameStep && stage == SaveStage::LatestStaged);
      EXPECT_EQ(got.step, expectNew ? step : 20u);
      EXPECT_TRUE(restored == (expectNew ? next : previous));

      // The next save succeeds and clears what the killed one left.
      State later(4);
      ASSERT_EQ(errorOf(save(40, later, 2)), "");
      for (const std::string &name : entries())
        EXPECT_NE(name.rfind(".tmp-", 0), 0u) << name << " was left behind";
      ASSERT_EQ(errorOf(load(root, restored, got)), "");
      EXPECT_EQ(got.step, 40u);
      EXPECT_TRUE(restored == later);
    }
  }
}

//===----------------------------------------------------------------------===//
// CheckpointReader
//===----------------------------------------------------------------------===//

/// Writes a checkpoint of `ranks.size()` ranks under `root` as
/// saveCheckpoint lays one out: rank files, a manifest ending in its
/// checksum, `latest`.
void writeByHand(
    const std::string &root, uint64_t step,
    const std::vector<std::vector<std::pair<std::string, std::string>>> &ranks,
    const std::string &plan = kPlan) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08llu",
                static_cast<unsigned long long>(step));
  std::string directory = root + "/" + name;
  fs::create_directories(directory);
  std::ostringstream manifest;
  manifest << "format\tzplan-checkpoint 1\nplan\t" << plan << "\nworld-size\t"
           << ranks.size() << "\nstep\t" << step << "\nvalue\tseed=3\n";
  for (size_t rank = 0; rank < ranks.size(); ++rank) {
    std::ofstream file(directory + "/rank-" + std::to_string(rank) + ".bin",
                       std::ios::binary);
    for (const auto &[region, bytes] : ranks[rank]) {
      file << bytes;
      manifest << "region\t" << rank << "\t" << bytes.size() << "\t"
               << checksumText(checksum(bytes.data(), bytes.size())) << "\t"
               << region << "\n";
    }
  }
  std::string text = manifest.str();
  text += "end\t" + checksumText(checksum(text.data(), text.size())) + "\n";
  std::ofstream(directory + "/manifest.txt", std::ios::binary) << text;
  std::ofstream(root + "/latest") << name << "\n";
}

/// Two ranks' regions: shards and state differ per rank (in bytes and in
/// size), so that reading one rank's region for another's shows.
std::vector<std::vector<std::pair<std::string, std::string>>> twoRanks() {
  std::vector<std::vector<std::pair<std::string, std::string>>> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    std::string shards(40, static_cast<char>('a' + rank));
    std::string state(1000 + rank, static_cast<char>('x' - rank));
    ranks.push_back(
        {{"shards", shards}, {"persistent", "PPPP"}, {"state", state}});
  }
  return ranks;
}

TEST_F(TrainCheckpoint, ReaderReadsEveryRanksRegionsInOneProcess) {
  writeByHand(root, 7, twoRanks());
  for (const std::string &path : {root, root + "/step-00000007"}) {
    CheckpointReader reader;
    ASSERT_EQ(errorOf(CheckpointReader::open(path, kPlan, 2, reader)), "")
        << path;
    EXPECT_EQ(reader.directory(), root + "/step-00000007");
    EXPECT_EQ(reader.step(), 7u);
    EXPECT_EQ(reader.values(), (CheckpointValues{{"seed", "3"}}));
    ASSERT_EQ(reader.worldSize(), 2);
    ASSERT_EQ(reader.regions(1).size(), 3u);
    EXPECT_EQ(reader.regions(1)[2].name, "state");
    EXPECT_EQ(reader.regions(1)[2].bytes, 1001u);
    for (int rank = 0; rank < 2; ++rank) {
      std::string shards(40, '\0');
      ASSERT_EQ(errorOf(reader.read(rank, "shards", shards.data(), 40)), "");
      EXPECT_EQ(shards, std::string(40, static_cast<char>('a' + rank)));
      std::string persistent(4, '\0');
      ASSERT_EQ(errorOf(reader.read(rank, "persistent", persistent.data(), 4)),
                "");
      EXPECT_EQ(persistent, "PPPP");
      EXPECT_EQ(errorOf(reader.verify(rank, "state")), "");
    }
  }
}

TEST_F(TrainCheckpoint, ReaderRefusesAnotherPlanWorldSizeOrMissingRankFile) {
  writeByHand(root, 7, twoRanks());
  CheckpointReader reader;
  std::string step = root + "/step-00000007";
  EXPECT_EQ(
      errorOf(CheckpointReader::open(root, "0x0000000000000bad", 2, reader)),
      "checkpoint '" + step + "' was written by another plan (identity " +
          kPlan + "); this run's plan is 0x0000000000000bad");
  EXPECT_EQ(errorOf(CheckpointReader::open(root, kPlan, 4, reader)),
            "checkpoint '" + step +
                "' was written by a plan with world size 2; this run has 4");
  fs::resize_file(step + "/rank-1.bin", 10);
  EXPECT_EQ(errorOf(CheckpointReader::open(root, kPlan, 2, reader)),
            "checkpoint file '" + step +
                "/rank-1.bin' is 10 bytes; its manifest says 1045");
  fs::remove(step + "/rank-1.bin");
  EXPECT_TRUE(
      contains(errorOf(CheckpointReader::open(root, kPlan, 2, reader)),
               "cannot open checkpoint file '" + step + "/rank-1.bin'"));
}

TEST_F(TrainCheckpoint, ReaderFindsACorruptByteWrongSizeOrUnknownRegion) {
  writeByHand(root, 7, twoRanks());
  std::string file = root + "/step-00000007/rank-1.bin";
  CheckpointReader reader;
  ASSERT_EQ(errorOf(CheckpointReader::open(root, kPlan, 2, reader)), "");
  std::string shards(40, '\0');
  EXPECT_EQ(errorOf(reader.read(1, "shards", shards.data(), 39)),
            "checkpoint '" + root +
                "/step-00000007' holds 40 bytes of "
                "region 'shards' for rank 1; the plan's is 39 bytes");
  EXPECT_EQ(errorOf(reader.verify(1, "adam")),
            "checkpoint '" + root +
                "/step-00000007' has no region 'adam' for rank 1");
  for (uint64_t at : {10u, 900u}) {
    std::fstream stream(file, std::ios::in | std::ios::out | std::ios::binary);
    stream.seekp(at);
    stream.put('\x55');
  }
  EXPECT_TRUE(contains(errorOf(reader.read(1, "shards", shards.data(), 40)),
                       "checkpoint file '" + file +
                           "': region 'shards' (bytes 0-40) does not match "
                           "its checksum"));
  EXPECT_TRUE(contains(errorOf(reader.verify(1, "state")),
                       "checkpoint file '" + file +
                           "': region 'state' (bytes 44-1045) does not match "
                           "its checksum"));
  // Rank 0's file is intact.
  EXPECT_EQ(errorOf(reader.verify(0, "state")), "");
}

} // namespace
