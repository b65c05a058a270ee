//===- Weights.cpp - the weights file beside a plan
//------------------------===//
//
// Checks run in the order that gives the most useful message: is it a
// weights file at all (magic, version), is its header intact (checksum), is
// it this plan's (identity), is it whole (exact size), is this rank's part
// intact (section checksum).
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/Weights.h"

#include "runtime/plan/CheckedSizes.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/plan/ReadableFile.h"
#include "runtime/support/Checksum.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

using namespace zplan;
using namespace zplan::plan;

namespace {

void appendLittleEndian(std::string &out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((value >> (8 * i)) & 0xFF));
}

uint64_t readLittleEndian(std::string_view bytes, size_t at, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i)
    value |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[at + i]))
             << (8 * i);
  return value;
}

/// The weights file of a plan, opened, its header decoded and checked
/// against the plan.
struct OpenWeights {
  ReadableFile file;
  WeightsLayout layout;
  WeightsHeader header;
  uint64_t dataAt = 0;
  /// False for a plan without weights (and so without a file).
  bool hasFile = false;
};

Status openWeights(const std::string &planPath, const Plan &plan,
                   OpenWeights &weights) {
  ZR_RETURN_IF_ERROR(computeWeightsLayout(plan, weights.layout));
  const WeightsLayout &layout = weights.layout;
  if (plan.weights_file().empty()) {
    if (layout.dataBytes() == 0)
      return Status::success();
    return failure("the plan needs ", layout.dataBytes(),
                   " bytes of weights but names no weights file");
  }
  ReadableFile &file = weights.file;
  ZR_RETURN_IF_ERROR(file.open(weightsPath(planPath, plan), "weights file"));
  uint64_t headerBytes = weightsHeaderBytes(plan.world_size());
  if (file.bytes() < headerBytes)
    return failure(file.subject(), " is ", file.bytes(),
                   " bytes, shorter than its header (", headerBytes,
                   " bytes); is it truncated, or not a zplan weights file?");
  std::string headerText(headerBytes, '\0');
  ZR_RETURN_IF_ERROR(file.read(0, headerBytes, headerText.data()));
  ZR_RETURN_IF_ERROR(decodeWeightsHeader(headerText, plan.world_size(),
                                         file.subject(), weights.header));
  if (weights.header.planIdentity != plan.body_checksum())
    return failure(file.subject(), " belongs to another plan: it records plan ",
                   checksumText(weights.header.planIdentity), ", the plan is ",
                   checksumText(plan.body_checksum()),
                   "; use the weights zcc wrote beside this plan");
  uint64_t expected;
  if (!checkedAdd(headerBytes, layout.dataBytes(), expected))
    return failure("the plan's weights layout overflows 64 bits");
  if (file.bytes() != expected)
    return failure(file.subject(), " is ", file.bytes(),
                   " bytes, the plan needs exactly ", expected,
                   " (a header of ", headerBytes, " bytes, ", plan.world_size(),
                   " ranks x ", plan.weights_bytes_per_rank(), " bytes, then ",
                   layout.persistentBytes, " persistent bytes at offset ",
                   plan.persistent_weights_offset(),
                   "); is it truncated, or from another compilation?");
  weights.dataAt = headerBytes;
  weights.hasFile = true;
  return Status::success();
}

/// Reads `out.size()` bytes at `offset` (after the header) and checks them
/// against `stored`; `section` ("rank 2's section") names them.
/// A section's checksum as computed over the bytes read against the one
/// the header stores.
Status compareSectionChecksum(const OpenWeights &weights,
                              const std::string &section, uint64_t stored,
                              uint64_t computed) {
  if (computed != stored)
    return failure(weights.file.subject(), ": ", section,
                   " fails its checksum (stored ", checksumText(stored),
                   ", computed ", checksumText(computed),
                   "): the file is corrupt or belongs to another plan");
  return Status::success();
}

Status readSection(const OpenWeights &weights, uint64_t offset, uint64_t stored,
                   const std::string &section, std::vector<uint8_t> &out) {
  ZR_RETURN_IF_ERROR(
      weights.file.read(weights.dataAt + offset, out.size(), out.data()));
  return compareSectionChecksum(weights, section, stored,
                                checksum(out.data(), out.size()));
}

} // namespace

uint64_t zplan::plan::weightsHeaderBytes(uint32_t worldSize) {
  return 8 + 4 + 4 + 8 + 8 * static_cast<uint64_t>(worldSize) + 8 + 8;
}

std::string zplan::plan::encodeWeightsHeader(const WeightsHeader &header) {
  std::string out(kWeightsMagic, sizeof(kWeightsMagic));
  appendLittleEndian(out, kWeightsFormatVersion, 4);
  appendLittleEndian(out, header.rankChecksums.size(), 4);
  appendLittleEndian(out, header.planIdentity, 8);
  for (uint64_t sum : header.rankChecksums)
    appendLittleEndian(out, sum, 8);
  appendLittleEndian(out, header.persistentChecksum, 8);
  appendLittleEndian(out, checksum(out.data(), out.size()), 8);
  return out;
}

Status zplan::plan::decodeWeightsHeader(std::string_view bytes,
                                        uint32_t worldSize,
                                        std::string_view subject,
                                        WeightsHeader &header) {
  uint64_t headerBytes = weightsHeaderBytes(worldSize);
  if (bytes.size() < headerBytes)
    return failure(subject, " is shorter than its header");
  if (std::memcmp(bytes.data(), kWeightsMagic, sizeof(kWeightsMagic)) != 0)
    return failure(subject, " is not a zplan weights file (no ZPLANWTS magic);",
                   " is it from an older zcc?");
  uint32_t version = static_cast<uint32_t>(readLittleEndian(bytes, 8, 4));
  if (version != kWeightsFormatVersion)
    return failure(subject, " has weights format version ", version,
                   ", this zrun reads version ", kWeightsFormatVersion,
                   "; recompile the model with the matching zcc");
  uint64_t stored = readLittleEndian(bytes, headerBytes - 8, 8);
  uint64_t computed = checksum(bytes.data(), headerBytes - 8);
  if (stored != computed)
    return failure(subject, ": its header fails its checksum (stored ",
                   checksumText(stored), ", computed ", checksumText(computed),
                   "): the file is corrupt");
  uint32_t sections = static_cast<uint32_t>(readLittleEndian(bytes, 12, 4));
  if (sections != worldSize)
    return failure(subject, " holds sections for ", sections,
                   " ranks, the plan has ", worldSize,
                   "; it belongs to another plan");
  header.planIdentity = readLittleEndian(bytes, 16, 8);
  header.rankChecksums.resize(worldSize);
  for (uint32_t rank = 0; rank < worldSize; ++rank)
    header.rankChecksums[rank] = readLittleEndian(bytes, 24 + 8 * rank, 8);
  header.persistentChecksum =
      readLittleEndian(bytes, 24 + 8 * static_cast<uint64_t>(worldSize), 8);
  return Status::success();
}

std::string zplan::plan::weightsPath(const std::string &planPath,
                                     const Plan &plan) {
  // operator/ keeps an absolute right-hand side as is.
  return (std::filesystem::path(planPath).parent_path() / plan.weights_file())
      .string();
}

uint64_t zplan::plan::persistentWeightsBytes(const Plan &plan) {
  uint64_t total;
  // Saturate: an overflowing plan fails validation with a message anyway.
  return checkedPersistentBytes(plan, total) ? total : UINT64_MAX;
}

Status zplan::plan::computeWeightsLayout(const Plan &plan,
                                         WeightsLayout &layout) {
  if (!checkedMultiply(plan.world_size(), plan.weights_bytes_per_rank(),
                       layout.rankSectionsBytes) ||
      !checkedPersistentBytes(plan, layout.persistentBytes) ||
      !checkedAdd(plan.persistent_weights_offset(), layout.persistentBytes,
                  layout.persistentEnd))
    return failure("the plan's weights layout overflows 64 bits ",
                   "(weights_bytes_per_rank ", plan.weights_bytes_per_rank(),
                   ", persistent_weights_offset ",
                   plan.persistent_weights_offset(), ")");
  return Status::success();
}

Status zplan::plan::readRankWeights(const std::string &planPath,
                                    const Plan &plan, uint32_t rank,
                                    std::vector<uint8_t> &out) {
  if (rank >= plan.world_size())
    return failure("rank ", rank, " is out of range: the plan has ",
                   plan.world_size(), " ranks");
  OpenWeights weights;
  ZR_RETURN_IF_ERROR(openWeights(planPath, plan, weights));
  out.resize(plan.weights_bytes_per_rank());
  if (!weights.hasFile)
    return Status::success();
  // rank < world_size, so this cannot overflow: the layout check computed
  // world_size * weights_bytes_per_rank.
  uint64_t offset = static_cast<uint64_t>(rank) * plan.weights_bytes_per_rank();
  return readSection(weights, offset, weights.header.rankChecksums[rank],
                     "rank " + std::to_string(rank) + "'s section", out);
}

Status zplan::plan::readRankShards(
    const std::string &planPath, const Plan &plan, uint32_t rank,
    const std::function<Status(const Buffer &shard, const uint8_t *bytes)>
        &sink) {
  if (rank >= plan.world_size())
    return failure("rank ", rank, " is out of range: the plan has ",
                   plan.world_size(), " ranks");
  OpenWeights weights;
  ZR_RETURN_IF_ERROR(openWeights(planPath, plan, weights));
  std::vector<const Buffer *> shards;
  for (const Buffer &buffer : plan.buffers())
    if (buffer.kind() == Buffer::SHARD && buffer.view_of() == 0)
      shards.push_back(&buffer);
  auto offsetOf = [&](const Buffer *shard) {
    return plan.groups(static_cast<int>(shard->group())).weights_offset();
  };
  std::stable_sort(shards.begin(), shards.end(),
                   [&](const Buffer *a, const Buffer *b) {
                     return offsetOf(a) < offsetOf(b);
                   });
  uint64_t sectionBytes = plan.weights_bytes_per_rank();
  uint64_t base = static_cast<uint64_t>(rank) * sectionBytes;
  Checksum sum;
  std::vector<uint8_t> piece;
  // Reads [from, to) of the section into `piece` (zeros without a file).
  auto readRange = [&](uint64_t from, uint64_t to) -> Status {
    piece.assign(to - from, 0);
    if (weights.hasFile)
      ZR_RETURN_IF_ERROR(weights.file.read(weights.dataAt + base + from,
                                           to - from, piece.data()));
    sum.update(piece.data(), piece.size());
    return Status::success();
  };
  uint64_t at = 0;
  for (const Buffer *shard : shards) {
    uint64_t offset = offsetOf(shard), end;
    if (offset < at || !checkedAdd(offset, shard->bytes(), end) ||
        end > sectionBytes)
      return failure(describeBuffer(*shard), " (", shard->bytes(),
                     " bytes at weights offset ", offset,
                     ") is not inside the rank's weights section of ",
                     sectionBytes, " bytes after the shard before it");
    if (offset > at)
      ZR_RETURN_IF_ERROR(readRange(at, offset));
    ZR_RETURN_IF_ERROR(readRange(offset, end));
    ZR_RETURN_IF_ERROR(sink(*shard, piece.data()));
    at = end;
  }
  if (at < sectionBytes)
    ZR_RETURN_IF_ERROR(readRange(at, sectionBytes));
  if (!weights.hasFile)
    return Status::success();
  return compareSectionChecksum(
      weights, "rank " + std::to_string(rank) + "'s section",
      weights.header.rankChecksums[rank], sum.value());
}

Status zplan::plan::readPersistentWeights(const std::string &planPath,
                                          const Plan &plan,
                                          std::vector<uint8_t> &out) {
  OpenWeights weights;
  ZR_RETURN_IF_ERROR(openWeights(planPath, plan, weights));
  out.resize(weights.layout.persistentBytes);
  if (!weights.hasFile)
    return Status::success();
  return readSection(weights, plan.persistent_weights_offset(),
                     weights.header.persistentChecksum,
                     "the persistent section", out);
}
