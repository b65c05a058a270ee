//===- CheckpointWriter.cpp - save(): every rank's state, atomically ------===//
//
// The order of the file system operations is the whole design (see
// Checkpoint.h): data, then its manifest, then the directory's name, then
// `latest`, then removals; each made durable (fsync of the file, then of
// the directory holding its name) before the next one can make it visible.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Checkpoint.h"

#include "runtime/comm/Agreement.h"
#include "runtime/support/Checksum.h"
#include "runtime/train/CheckpointManifest.h"
#include "runtime/train/DurableFiles.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace zplan;
using namespace zplan::train;
using namespace zplan::train::manifest;
namespace fs = std::filesystem;

namespace {

Status checkNames(const CheckpointInfo &info,
                  const std::vector<CheckpointRegion> &regions) {
  if (info.planIdentity.find_first_of("\n\r") != std::string::npos)
    return failure("checkpoint plan identity ", inQuotes(info.planIdentity),
                   " holds a line break");
  for (const auto &[key, value] : info.values) {
    if (key.empty() || key.find_first_of("=\t\n\r") != std::string::npos)
      return failure("checkpoint value key ", inQuotes(key),
                     " is empty or holds '=', a tab or a line break");
    if (value.find_first_of("\n\r") != std::string::npos)
      return failure("checkpoint value ", inQuotes(key), " holds a line break");
  }
  return checkRegions(regions);
}

uint64_t freshNonce() {
  std::random_device device;
  uint64_t nonce = (static_cast<uint64_t>(device()) << 32) ^ device();
  nonce ^= static_cast<uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  return nonce ^ (static_cast<uint64_t>(::getpid()) << 20);
}

void removeQuietly(const std::string &path) {
  std::error_code error;
  fs::remove_all(path, error);
}

//===----------------------------------------------------------------------===//
// Rank 0's part of save(): manifest, rename, latest, pruning
//===----------------------------------------------------------------------===//

struct SaveContext {
  std::string root;
  std::string temporary;
  std::string final;
  uint64_t nonce;
  const CheckpointOptions &options;

  void reach(SaveStage stage) const {
    if (options.onStage)
      options.onStage(stage);
  }
};

Status publish(const SaveContext &context, const std::string &manifest) {
  std::string manifestPath = context.temporary + "/" + kManifest;
  ZR_RETURN_IF_ERROR(
      writeNewFile(manifestPath, {{manifest.data(), manifest.size()}},
                   [&] { context.reach(SaveStage::ManifestHalfWritten); }));
  ZR_RETURN_IF_ERROR(syncDirectory(context.temporary));
  context.reach(SaveStage::ManifestWritten);

  // The new directory takes its name atomically; an older step-<S> (a run
  // resumed from an earlier step saves S again) is exchanged with it, so
  // that the name never stops naming a complete checkpoint. The old one is
  // left under the temporary name and pruned below.
  std::error_code error;
  if (fs::exists(context.final, error)) {
    if (::renameat2(AT_FDCWD, context.temporary.c_str(), AT_FDCWD,
                    context.final.c_str(), RENAME_EXCHANGE) != 0) {
      // A file system without the exchange (NFS): move the old one aside
      // first. Between the two renames step-<S> does not exist, so a kill
      // exactly there leaves a `latest` that named it dangling; the old
      // checkpoint survives under the .tmp- name until the next save.
      if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return errnoFailure("cannot replace checkpoint directory",
                            context.final);
      std::string aside = context.root + "/" + kTemporaryPrefix + "replaced-" +
                          fs::path(context.final).filename().string() + "-" +
                          hexText(context.nonce);
      if (::rename(context.final.c_str(), aside.c_str()) != 0)
        return errnoFailure("cannot move aside old checkpoint directory",
                            context.final);
      if (::rename(context.temporary.c_str(), context.final.c_str()) != 0) {
        Status status = errnoFailure(
            "cannot rename the checkpoint directory to", context.final);
        // Put the old one back, so that `latest` names it again.
        (void)::rename(aside.c_str(), context.final.c_str());
        return status;
      }
    }
  } else if (::rename(context.temporary.c_str(), context.final.c_str()) != 0) {
    return errnoFailure("cannot rename the checkpoint directory to",
                        context.final);
  }
  ZR_RETURN_IF_ERROR(syncDirectory(context.root));
  context.reach(SaveStage::DirectoryRenamed);

  std::string latest = context.root + "/" + kLatest;
  std::string staged = context.root + "/" + kTemporaryPrefix + "latest-" +
                       hexText(context.nonce);
  std::string name = fs::path(context.final).filename().string() + "\n";
  ZR_RETURN_IF_ERROR(writeNewFile(staged, {{name.data(), name.size()}}, {}));
  context.reach(SaveStage::LatestStaged);
  if (::rename(staged.c_str(), latest.c_str()) != 0) {
    Status status = errnoFailure("cannot replace", latest);
    ::unlink(staged.c_str());
    return status;
  }
  ZR_RETURN_IF_ERROR(syncDirectory(context.root));
  context.reach(SaveStage::LatestReplaced);
  return Status::success();
}

/// Removes leftovers of interrupted saves and the checkpoints beyond the
/// newest `keepLast` of this run's line; the one just written is always
/// kept.
void prune(const SaveContext &context, uint64_t keepLast,
           std::vector<std::string> &warnings) {
  std::vector<std::pair<uint64_t, std::string>> older;
  std::vector<std::string> leftovers;
  std::error_code error;
  std::string finalName = fs::path(context.final).filename().string();
  for (fs::directory_iterator entry(context.root, error), end;
       !error && entry != end; entry.increment(error)) {
    std::string name = entry->path().filename().string();
    std::error_code kind;
    uint64_t step;
    if (name.rfind(kTemporaryPrefix, 0) == 0)
      leftovers.push_back(name);
    else if (name != finalName && parseStepName(name, step) &&
             entry->is_directory(kind))
      older.emplace_back(step, name);
  }
  if (error) {
    warnings.push_back("cannot list checkpoint directory " +
                       inQuotes(context.root) + ": " + error.message());
    return;
  }
  std::vector<std::string> doomed = leftovers;
  if (keepLast > 0) {
    // This run's line first: the steps below the new one, newest first.
    // Steps above it were left by a run that this one resumed before
    // reaching them; they go first (this run would overwrite them anyway).
    uint64_t newStep = 0;
    parseStepName(finalName, newStep);
    std::sort(older.begin(), older.end(),
              [newStep](const auto &left, const auto &right) {
                bool leftAbove = left.first > newStep;
                bool rightAbove = right.first > newStep;
                if (leftAbove != rightAbove)
                  return rightAbove;
                return left.first > right.first;
              });
    for (size_t i = keepLast - 1; i < older.size(); ++i)
      doomed.push_back(older[i].second);
  }
  for (const std::string &name : doomed) {
    std::string path = context.root + "/" + name;
    // An old checkpoint leaves the step-* names in one rename before it is
    // deleted file by file, so that a kill mid-way never leaves a
    // step-<S> directory that looks like a checkpoint and is not one.
    if (name.rfind(kTemporaryPrefix, 0) != 0) {
      std::string doomedPath = context.root + "/" + kTemporaryPrefix +
                               "removing-" + name + "-" +
                               hexText(context.nonce);
      if (::rename(path.c_str(), doomedPath.c_str()) != 0) {
        warnings.push_back("cannot remove old checkpoint " + inQuotes(path) +
                           ": " + std::strerror(errno));
        continue;
      }
      path = doomedPath;
    }
    fs::remove_all(path, error);
    if (error)
      warnings.push_back("cannot remove " + inQuotes(path) + ": " +
                         error.message());
    context.reach(SaveStage::OldOneRemoved);
  }
}

} // namespace

Status zplan::train::saveCheckpoint(
    const std::string &root, const CheckpointInfo &info,
    const std::vector<CheckpointRegion> &regions,
    comm::Communicator &communicator, SaveResult &result,
    const CheckpointOptions &options) {
  int rank = communicator.rank();
  result = SaveResult();
  ZR_RETURN_IF_ERROR(
      comm::agreeOnStatus(checkNames(info, regions), communicator));

  uint64_t nonce = rank == 0 ? freshNonce() : 0;
  ZR_RETURN_IF_ERROR(communicator.broadcast(&nonce, sizeof(nonce), 0));
  SaveContext context{root,
                      root + "/" + kTemporaryPrefix + stepName(info.step) +
                          "-" + hexText(nonce),
                      root + "/" + stepName(info.step), nonce, options};

  // Rank 0 makes the directory; every rank must then see it (a root on a
  // disk of one machine would scatter the rank files).
  Status status = Status::success();
  if (rank == 0) {
    std::error_code error;
    fs::create_directories(root, error);
    if (error || !fs::is_directory(root, error))
      status = failure("cannot create checkpoint directory ", inQuotes(root),
                       error ? ": " + error.message()
                             : std::string(": it is not a directory"));
    else if (::mkdir(context.temporary.c_str(), 0755) != 0)
      status =
          errnoFailure("cannot create checkpoint directory", context.temporary);
    if (status.ok())
      context.reach(SaveStage::TemporaryDirectoryMade);
  }
  ZR_RETURN_IF_ERROR(comm::agreeOnStatus(status, communicator));
  auto abandon = [&](Status failed) {
    if (rank == 0)
      removeQuietly(context.temporary);
    return failed;
  };

  // Every rank: its file and the manifest lines that describe it.
  std::string file =
      context.temporary + "/rank-" + std::to_string(rank) + ".bin";
  // A region in parts passes through one part-sized buffer, its checksum
  // taken on the way; the others' are taken from their bytes.
  std::vector<FilePiece> pieces;
  std::vector<Checksum> sums(regions.size());
  std::vector<uint8_t> partBuffer;
  for (size_t i = 0; i < regions.size(); ++i) {
    const CheckpointRegion &region = regions[i];
    if (region.parts.empty()) {
      pieces.push_back({region.data, region.bytes, nullptr});
      sums[i].update(region.data, region.bytes);
      continue;
    }
    partBuffer.resize(std::max<uint64_t>(
        partBuffer.size(),
        *std::max_element(region.parts.begin(), region.parts.end())));
    pieces.push_back(
        {nullptr, region.bytes,
         [&region, &sum = sums[i], &partBuffer](const auto &emit) -> Status {
           for (size_t part = 0; part < region.parts.size(); ++part) {
             ZR_RETURN_IF_ERROR(region.readPart(part, partBuffer.data()));
             sum.update(partBuffer.data(), region.parts[part]);
             ZR_RETURN_IF_ERROR(emit(partBuffer.data(), region.parts[part]));
           }
           return Status::success();
         }});
  }
  std::error_code seen;
  if (rank != 0 && !fs::is_directory(context.temporary, seen))
    status =
        failure("cannot see checkpoint directory ", inQuotes(context.temporary),
                " that rank 0 made: --save needs a directory that "
                "every rank shares");
  else
    status = writeNewFile(
        file, pieces, [&] { context.reach(SaveStage::RankFileHalfWritten); });
  if (status.ok())
    context.reach(SaveStage::RankFileWritten);
  if (Status agreed = comm::agreeOnStatus(status, communicator); !agreed.ok())
    return abandon(agreed);

  std::ostringstream section;
  for (size_t i = 0; i < regions.size(); ++i)
    section << "region\t" << rank << "\t" << regions[i].bytes << "\t"
            << checksumText(sums[i].value()) << "\t" << regions[i].name << "\n";
  std::vector<std::string> sections;
  if (Status gathered = communicator.gatherText(section.str(), sections);
      !gathered.ok())
    return abandon(gathered);
  if (rank == 0) {
    std::string manifest = head(info, communicator.size());
    for (const std::string &text : sections)
      manifest += text;
    manifest += "end\t" +
                checksumText(checksum(manifest.data(), manifest.size())) + "\n";
    status = publish(context, manifest);
  }
  if (Status agreed = comm::agreeOnStatus(status, communicator); !agreed.ok())
    return abandon(agreed);

  result.directory = context.final;
  if (rank == 0)
    prune(context, options.keepLast, result.warnings);
  return Status::success();
}
