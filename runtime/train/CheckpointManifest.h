//===- CheckpointManifest.h - a checkpoint's names and its manifest ------===//
//
// What a checkpoint directory looks like to the code that writes and reads
// it (Checkpoint.h describes the layout): the step directories' names,
// `latest`, the manifest's text and its parsing, and the rank files' names.
// Private to runtime/train.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_CHECKPOINTMANIFEST_H
#define ZPLAN_RUNTIME_TRAIN_CHECKPOINTMANIFEST_H

#include "runtime/train/Checkpoint.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zplan::train::manifest {

inline constexpr const char *kFormat = "zplan-checkpoint 1";
inline constexpr const char *kManifest = "manifest.txt";
inline constexpr const char *kLatest = "latest";
inline constexpr const char *kTemporaryPrefix = ".tmp-";
/// The largest manifest load() reads; real ones are a few KiB per rank.
inline constexpr uint64_t kMaxManifestBytes = 64ull << 20;

/// "step-00000012".
std::string stepName(uint64_t step);
/// The step of a directory named step-<digits>, or false.
bool parseStepName(const std::string &name, uint64_t &step);
/// 16 hex digits.
std::string hexText(uint64_t value);
/// DIRECTORY/rank-R.bin.
std::string rankFileOf(const std::string &directory, int rank);

/// Fails unless every region has a name a manifest line can hold (no tab,
/// newline or carriage return), unique among the rank's.
Status checkRegions(const std::vector<CheckpointRegion> &regions);

/// The manifest's lines before its regions: format, plan, world size,
/// step, the caller's values.
std::string head(const CheckpointInfo &info, int worldSize);

struct Region {
  std::string name;
  uint64_t bytes = 0;
  uint64_t sum = 0;
};

struct Manifest {
  std::string plan;
  int64_t worldSize = -1;
  uint64_t step = 0;
  bool hasStep = false;
  CheckpointValues values;
  std::vector<std::vector<Region>> ranks;
};

/// Resolves `path` (a root, whose `latest` is followed, or a step
/// directory) to its step directory and reads its manifest, checked against
/// the plan identity and world size of the reader.
Status open(const std::string &path, const std::string &planIdentity,
            int worldSize, std::string &directory, Manifest &manifest);

} // namespace zplan::train::manifest

#endif // ZPLAN_RUNTIME_TRAIN_CHECKPOINTMANIFEST_H
