//===- CheckpointReader.cpp - load() and CheckpointReader -----------------===//
//
// Both read a checkpoint the same way: its manifest first
// (CheckpointManifest.h, checked against the reader's plan and world size),
// then the rank files, each region against its checksum before it is used.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Checkpoint.h"

#include "runtime/comm/Agreement.h"
#include "runtime/plan/ReadableFile.h"
#include "runtime/support/Checksum.h"
#include "runtime/train/CheckpointManifest.h"

#include <algorithm>
#include <vector>

using namespace zplan;
using namespace zplan::train;
using namespace zplan::train::manifest;

namespace {

/// Opens rank `rank`'s file and checks that its size is the sum of its
/// regions'.
Status openRankFile(const std::string &directory, int rank,
                    const std::vector<Region> &saved,
                    plan::ReadableFile &file) {
  ZR_RETURN_IF_ERROR(file.open(rankFileOf(directory, rank), "checkpoint file"));
  uint64_t total = 0;
  for (const Region &region : saved)
    total += region.bytes;
  if (file.bytes() != total)
    return failure(file.subject(), " is ", file.bytes(),
                   " bytes; its manifest says ", total);
  return Status::success();
}

Status corruptRegion(const plan::ReadableFile &file, const std::string &name,
                     uint64_t offset, uint64_t bytes, uint64_t sum,
                     uint64_t expected) {
  return failure(file.subject(), ": region ", inQuotes(name), " (bytes ",
                 offset, "-", offset + bytes, ") does not match its checksum (",
                 checksumText(sum), ", manifest ", checksumText(expected),
                 "): the file is corrupt");
}

/// Reads `region`'s parts from `file` (the region at byte `offset`) one
/// at a time into one buffer, calling `use` on each.
Status forEachPart(const plan::ReadableFile &file,
                   const CheckpointRegion &region, uint64_t offset,
                   const std::function<Status(size_t, void *)> &use) {
  std::vector<uint8_t> buffer(
      *std::max_element(region.parts.begin(), region.parts.end()));
  for (size_t part = 0; part < region.parts.size(); ++part) {
    ZR_RETURN_IF_ERROR(file.read(offset, region.parts[part], buffer.data()));
    ZR_RETURN_IF_ERROR(use(part, buffer.data()));
    offset += region.parts[part];
  }
  return Status::success();
}

Status loadOnRank(const std::string &path, const std::string &planIdentity,
                  const std::vector<CheckpointRegion> &regions, int rank,
                  int worldSize, LoadedCheckpoint &loaded) {
  ZR_RETURN_IF_ERROR(checkRegions(regions));
  std::string directory;
  Manifest manifest;
  ZR_RETURN_IF_ERROR(
      manifest::open(path, planIdentity, worldSize, directory, manifest));
  std::string subject = "checkpoint " + inQuotes(directory);

  const std::vector<Region> &saved = manifest.ranks[rank];
  for (size_t i = 0; i < std::max(saved.size(), regions.size()); ++i) {
    if (i >= saved.size())
      return failure(subject, " has no region ", inQuotes(regions[i].name),
                     " for rank ", rank, " (it holds ", saved.size(),
                     " regions; this run has ", regions.size(), ")");
    if (i >= regions.size())
      return failure(subject, " holds region ", inQuotes(saved[i].name),
                     " for rank ", rank, ", which this run does not have");
    if (saved[i].name != regions[i].name)
      return failure(subject, " holds region ", inQuotes(saved[i].name),
                     " for rank ", rank, " where this run has ",
                     inQuotes(regions[i].name));
    if (saved[i].bytes != regions[i].bytes)
      return failure(subject, " holds ", saved[i].bytes, " bytes of region ",
                     inQuotes(saved[i].name), " for rank ", rank,
                     "; this run's is ", regions[i].bytes, " bytes");
  }

  plan::ReadableFile file;
  ZR_RETURN_IF_ERROR(openRankFile(directory, rank, saved, file));
  uint64_t offset = 0;
  for (size_t i = 0; i < regions.size(); ++i) {
    const CheckpointRegion &region = regions[i];
    if (region.parts.empty()) {
      ZR_RETURN_IF_ERROR(file.read(offset, region.bytes, region.data));
      uint64_t sum = checksum(region.data, region.bytes);
      if (sum != saved[i].sum)
        return corruptRegion(file, saved[i].name, offset, region.bytes, sum,
                             saved[i].sum);
    } else {
      // In parts: checked whole now, handed over below, once every region
      // has passed, so that a corrupt file hands over nothing.
      Checksum sum;
      ZR_RETURN_IF_ERROR(
          forEachPart(file, region, offset, [&](size_t part, void *bytes) {
            sum.update(bytes, region.parts[part]);
            return Status::success();
          }));
      if (sum.value() != saved[i].sum)
        return corruptRegion(file, saved[i].name, offset, region.bytes,
                             sum.value(), saved[i].sum);
    }
    offset += region.bytes;
  }
  offset = 0;
  for (const CheckpointRegion &region : regions) {
    if (!region.parts.empty())
      ZR_RETURN_IF_ERROR(forEachPart(file, region, offset, region.writePart));
    offset += region.bytes;
  }
  loaded.directory = directory;
  loaded.step = manifest.step;
  loaded.values = std::move(manifest.values);
  return Status::success();
}

} // namespace

Status zplan::train::loadCheckpoint(
    const std::string &path, const std::string &planIdentity,
    const std::vector<CheckpointRegion> &regions,
    comm::Communicator &communicator, LoadedCheckpoint &loaded) {
  loaded = LoadedCheckpoint();
  LoadedCheckpoint local;
  Status status = loadOnRank(path, planIdentity, regions, communicator.rank(),
                             communicator.size(), local);
  ZR_RETURN_IF_ERROR(comm::agreeOnStatus(status, communicator));
  loaded = std::move(local);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// CheckpointReader: every rank's file, one process
//===----------------------------------------------------------------------===//

Status CheckpointReader::open(const std::string &path,
                              const std::string &planIdentity, int worldSize,
                              CheckpointReader &reader) {
  reader = CheckpointReader();
  std::string directory;
  Manifest manifest;
  ZR_RETURN_IF_ERROR(
      manifest::open(path, planIdentity, worldSize, directory, manifest));
  // Every rank file must be there, whole, before anything is read from
  // any of them.
  for (int rank = 0; rank < worldSize; ++rank) {
    plan::ReadableFile file;
    ZR_RETURN_IF_ERROR(
        openRankFile(directory, rank, manifest.ranks[rank], file));
  }
  reader.stepDirectory = directory;
  reader.savedStep = manifest.step;
  reader.savedValues = std::move(manifest.values);
  for (const std::vector<Region> &saved : manifest.ranks) {
    std::vector<CheckpointRegionInfo> &regions = reader.ranks.emplace_back();
    for (const Region &region : saved)
      regions.push_back({region.name, region.bytes, region.sum});
  }
  return Status::success();
}

std::string CheckpointReader::rankFile(int rank) const {
  return rankFileOf(stepDirectory, rank);
}

Status CheckpointReader::find(int rank, const std::string &name, size_t &index,
                              uint64_t &offset) const {
  if (rank < 0 || rank >= worldSize())
    return failure("checkpoint ", inQuotes(stepDirectory), " has no rank ",
                   rank, " (world size ", worldSize(), ")");
  offset = 0;
  for (index = 0; index < ranks[rank].size(); ++index) {
    if (ranks[rank][index].name == name)
      return Status::success();
    offset += ranks[rank][index].bytes;
  }
  return failure("checkpoint ", inQuotes(stepDirectory), " has no region ",
                 inQuotes(name), " for rank ", rank);
}

Status CheckpointReader::read(int rank, const std::string &name, void *data,
                              uint64_t bytes) const {
  size_t index;
  uint64_t offset;
  ZR_RETURN_IF_ERROR(find(rank, name, index, offset));
  const CheckpointRegionInfo &region = ranks[rank][index];
  if (region.bytes != bytes)
    return failure("checkpoint ", inQuotes(stepDirectory), " holds ",
                   region.bytes, " bytes of region ", inQuotes(name),
                   " for rank ", rank, "; the plan's is ", bytes, " bytes");
  plan::ReadableFile file;
  ZR_RETURN_IF_ERROR(file.open(rankFile(rank), "checkpoint file"));
  ZR_RETURN_IF_ERROR(file.read(offset, bytes, data));
  uint64_t sum = checksum(data, bytes);
  if (sum != region.checksum)
    return corruptRegion(file, name, offset, bytes, sum, region.checksum);
  return Status::success();
}

Status CheckpointReader::verify(int rank, const std::string &name) const {
  size_t index;
  uint64_t offset;
  ZR_RETURN_IF_ERROR(find(rank, name, index, offset));
  const CheckpointRegionInfo &region = ranks[rank][index];
  plan::ReadableFile file;
  ZR_RETURN_IF_ERROR(file.open(rankFile(rank), "checkpoint file"));
  // Optimizer state is twice the shards: stream it, keep nothing.
  constexpr uint64_t kPiece = 16ull << 20;
  std::vector<uint8_t> piece(std::min(region.bytes, kPiece));
  Checksum sum;
  for (uint64_t done = 0; done < region.bytes;) {
    uint64_t count = std::min(region.bytes - done, kPiece);
    ZR_RETURN_IF_ERROR(file.read(offset + done, count, piece.data()));
    sum.update(piece.data(), count);
    done += count;
  }
  if (sum.value() != region.checksum)
    return corruptRegion(file, name, offset, region.bytes, sum.value(),
                         region.checksum);
  return Status::success();
}
