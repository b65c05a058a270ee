//===- Checkpoint.h - sharded, atomic, verified training checkpoints -----===//
//
// `zrun train --save DIR` writes, every --save-every steps, what each rank
// holds (its parameter shards, gradient and optimizer state: named byte
// ranges the caller supplies) so that `--resume DIR` continues the run
// exactly. Layout of DIR (on a file system every rank sees):
//
//   DIR/step-00000012/rank-<r>.bin   rank r's regions, back to back
//   DIR/step-00000012/manifest.txt   format, plan identity, world size, step,
//                                    the caller's key=value lines, and per
//                                    rank per region: name, bytes, checksum
//   DIR/latest                       "step-00000012\n"
//
// A save is atomic at every instant: ranks write into a fresh
// DIR/.tmp-step-<S>-<nonce>/ (data fsynced before the manifest, which is
// written last), rank 0 renames that directory to step-<S> (exchanging it
// atomically with an older step-<S> if one exists), then replaces `latest`
// by writing a temporary and renaming it. Older checkpoints beyond the
// newest K, and leftovers of interrupted saves, are removed only after all
// of that. So a process killed at any point leaves `latest` naming a
// complete checkpoint (the previous one or the new one); the tests kill a
// save at every stage (test/unit/TrainCheckpointTest.cpp). One exception:
// on a file system without renameat2(RENAME_EXCHANGE) (NFS), re-saving a
// step that exists moves the old directory aside first, and a kill between
// those two renames leaves `latest` naming neither.
//
// Both calls are collective: every rank calls them with its own regions,
// and a failure on any rank fails the call on every rank with the same
// one-line message (naming the rank when not all failed), so the caller's
// usual agreement prints it once. No rank returns from save() before the
// checkpoint is complete or the save has failed everywhere.
//
// load() refuses, naming the file: a half-written directory (.tmp-*), a
// missing rank file, a manifest that is not one (format, its own checksum),
// another plan or world size ("checkpoint ... was written by a plan with
// world size 4; this run has 2"), regions whose names or sizes differ from
// the caller's, and any byte that fails its region's checksum.
//
// CheckpointReader reads a checkpoint in one process, every rank's file
// (`zrun export` consolidates the ranks' shards into one model): the same
// manifest and checksum checks as load(), against a plan identity and world
// size the caller names rather than a communicator's.
//
// The implementation: CheckpointWriter.cpp (save), CheckpointReader.cpp
// (load and the reader), CheckpointManifest.h (names and the manifest),
// DurableFiles.h (writes that survive a crash).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_CHECKPOINT_H
#define ZPLAN_RUNTIME_TRAIN_CHECKPOINT_H

#include "runtime/comm/Communicator.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace zplan::train {

/// One named byte range of a rank's state. save() reads it; load() fills
/// it. Names are unique per rank and hold no tab, newline or carriage
/// return ("group 3 (adam m)" is fine).
///
/// A region too large to hold in host memory at once (state in the nvme
/// tier) comes in parts instead of `data`: save() asks `readPart` for each
/// part in turn; load() first checks the whole region's checksum, then
/// hands each part to `writePart`, so that a corrupt file changes nothing.
/// Either way the file holds the same bytes.
struct CheckpointRegion {
  std::string name;
  void *data = nullptr;
  uint64_t bytes = 0;
  /// The parts' sizes, in order, adding up to `bytes`; empty: `data`.
  std::vector<uint64_t> parts = {};
  std::function<Status(size_t part, void *out)> readPart = nullptr;
  std::function<Status(size_t part, const void *in)> writePart = nullptr;
};

/// Opaque key=value lines (data position, seed, schedule): keys are
/// non-empty, without '=', tab or newline; values without newline. Kept in
/// the caller's order.
using CheckpointValues = std::vector<std::pair<std::string, std::string>>;

/// What a checkpoint says about the run that wrote it.
struct CheckpointInfo {
  /// Identifies the compiled plan (e.g. the checksum of its body); load()
  /// refuses a checkpoint of another plan. No newline.
  std::string planIdentity;
  /// Optimizer steps completed.
  uint64_t step = 0;
  CheckpointValues values;
};

/// The stages of save(), in order, for tests that kill a save part-way.
enum class SaveStage {
  /// The temporary directory exists (rank 0), before any rank file.
  TemporaryDirectoryMade,
  /// Half of this rank's file is written.
  RankFileHalfWritten,
  /// This rank's file is written and fsynced.
  RankFileWritten,
  /// Half of the manifest is written (rank 0).
  ManifestHalfWritten,
  /// The manifest is written and fsynced (rank 0).
  ManifestWritten,
  /// The directory is step-<S>; `latest` still names the old one.
  DirectoryRenamed,
  /// The new `latest` is a temporary beside the old one.
  LatestStaged,
  /// `latest` names the new checkpoint; nothing old removed yet.
  LatestReplaced,
  /// One old checkpoint (or leftover) has been removed; more may follow.
  OldOneRemoved,
};

struct CheckpointOptions {
  /// Keep the newest K complete checkpoints: the new one and the K - 1
  /// highest steps below it (checkpoints of higher steps, left by a run
  /// this one resumed before them, are removed first); 0 keeps all.
  uint64_t keepLast = 0;
  /// Test hook, called on the ranks that reach each stage.
  std::function<void(SaveStage)> onStage;
};

/// What save() did.
struct SaveResult {
  /// DIR/step-<8 digits>.
  std::string directory;
  /// Old checkpoints or leftovers that could not be removed (rank 0); the
  /// new checkpoint is complete regardless.
  std::vector<std::string> warnings;
};

/// Collective. Writes every rank's `regions` as checkpoint `info.step` under
/// `root` (created if missing), makes it `latest`, then prunes.
Status saveCheckpoint(const std::string &root, const CheckpointInfo &info,
                      const std::vector<CheckpointRegion> &regions,
                      comm::Communicator &communicator, SaveResult &result,
                      const CheckpointOptions &options = {});

/// What load() found.
struct LoadedCheckpoint {
  /// The step directory read.
  std::string directory;
  uint64_t step = 0;
  CheckpointValues values;
};

/// Collective. `path` is a root (its `latest` is followed) or one
/// step-<S> directory. Checks the manifest against `planIdentity`, the
/// communicator's world size and this rank's `regions` (same names, order
/// and sizes), then fills the regions and verifies their checksums. On
/// failure the regions' contents are unspecified.
Status loadCheckpoint(const std::string &path, const std::string &planIdentity,
                      const std::vector<CheckpointRegion> &regions,
                      comm::Communicator &communicator,
                      LoadedCheckpoint &loaded);

/// One region as a checkpoint's manifest records it.
struct CheckpointRegionInfo {
  std::string name;
  uint64_t bytes = 0;
  uint64_t checksum = 0;
};

/// Every rank's part of one checkpoint, read by a single process.
class CheckpointReader {
public:
  /// Opens the checkpoint at `path` (a root, whose `latest` is followed, or
  /// one step-<S> directory): checks its manifest (format, own checksum)
  /// against `planIdentity` and `worldSize`, and that every rank's file
  /// exists and has the size its regions add up to. Fails as load() does,
  /// naming the file.
  static Status open(const std::string &path, const std::string &planIdentity,
                     int worldSize, CheckpointReader &reader);

  /// The step directory read.
  const std::string &directory() const { return stepDirectory; }
  uint64_t step() const { return savedStep; }
  const CheckpointValues &values() const { return savedValues; }
  int worldSize() const { return static_cast<int>(ranks.size()); }
  /// The regions rank `rank` saved, in file order.
  const std::vector<CheckpointRegionInfo> &regions(int rank) const {
    return ranks[rank];
  }

  /// Reads rank `rank`'s region `name` into `data` (`bytes` bytes, which
  /// must be the region's size) and verifies its checksum.
  Status read(int rank, const std::string &name, void *data,
              uint64_t bytes) const;
  /// Verifies rank `rank`'s region `name` against its checksum, reading it
  /// in pieces of bounded size and keeping nothing.
  Status verify(int rank, const std::string &name) const;

private:
  /// The region's index in ranks[rank], or a failure naming it.
  Status find(int rank, const std::string &name, size_t &index,
              uint64_t &offset) const;
  std::string rankFile(int rank) const;

  std::string stepDirectory;
  uint64_t savedStep = 0;
  CheckpointValues savedValues;
  std::vector<std::vector<CheckpointRegionInfo>> ranks;
};

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_CHECKPOINT_H
