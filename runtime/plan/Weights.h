//===- Weights.h - the weights file beside a plan
//--------------------------===//
//
// The weights file (Plan.weights_file, relative to the plan's directory)
// starts with a header, then holds world_size sections of
// weights_bytes_per_rank bytes, rank r's at r * weights_bytes_per_rank, each
// the concatenation of that rank's shard of every non-persistent group (at
// Group.weights_offset inside the section); then, at
// persistent_weights_offset (right after the ranks' sections), the
// persistent section: every persistent group whole (at Group.weights_offset
// inside that section). Offsets are counted from the end of the header. A
// rank reads only the header, its own section and the persistent one.
//
// The header (little-endian):
//
//   8 bytes  magic "ZPLANWTS"
//   4 bytes  format version (kWeightsFormatVersion)
//   4 bytes  section count: world_size
//   8 bytes  the plan's identity (Plan.body_checksum of the plan it was
//            written for)
//   8 bytes  per rank: the checksum of that rank's section
//   8 bytes  the checksum of the persistent section
//   8 bytes  the checksum of the header bytes before it
//
// So a rank refuses, with a message naming the file and the section, a
// weights file that is another plan's, of another size than the plan's
// layout (exactly), or whose header or own sections fail their checksums.
// The checksums are computed over the bytes just read, in the same pass.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_WEIGHTS_H
#define ZPLAN_RUNTIME_PLAN_WEIGHTS_H

#include "runtime/plan/PlanFormat.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace zplan::plan {

inline constexpr char kWeightsMagic[8] = {'Z', 'P', 'L', 'A',
                                          'N', 'W', 'T', 'S'};
inline constexpr uint32_t kWeightsFormatVersion = 1;

/// What a weights file's header records.
struct WeightsHeader {
  uint64_t planIdentity = 0;
  /// One per rank.
  std::vector<uint64_t> rankChecksums;
  uint64_t persistentChecksum = 0;
};

/// Bytes of the header of a weights file for `worldSize` ranks.
uint64_t weightsHeaderBytes(uint32_t worldSize);

/// The header's bytes, its own checksum included.
std::string encodeWeightsHeader(const WeightsHeader &header);

/// Decodes the header at the start of `bytes` (at least
/// weightsHeaderBytes(worldSize) of them) of a file for `worldSize` ranks;
/// `subject` ("weights file 'x'") names it in messages. Fails for another
/// magic, format version or section count, and when the header fails its
/// checksum.
Status decodeWeightsHeader(std::string_view bytes, uint32_t worldSize,
                           std::string_view subject, WeightsHeader &header);

/// The weights file of the plan at `planPath`: weights_file resolved against
/// the plan file's directory (an absolute weights_file is kept as is).
std::string weightsPath(const std::string &planPath, const Plan &plan);

/// Bytes of the persistent section: the sum of the persistent groups' full
/// sizes (padded_elements * dtype size); UINT64_MAX when that overflows.
uint64_t persistentWeightsBytes(const Plan &plan);

/// Where a weights file's parts lie, counted from the end of its header.
struct WeightsLayout {
  uint64_t rankSectionsBytes = 0; // world_size * weights_bytes_per_rank
  uint64_t persistentBytes = 0;
  uint64_t persistentEnd = 0; // persistent_weights_offset + persistentBytes
  /// Bytes after the header.
  uint64_t dataBytes() const {
    return rankSectionsBytes > persistentEnd ? rankSectionsBytes
                                             : persistentEnd;
  }
};

/// The layout of `plan`'s weights; fails when it overflows 64 bits.
Status computeWeightsLayout(const Plan &plan, WeightsLayout &layout);

/// Reads rank `rank`'s section of the weights file into `out` (resized to
/// weights_bytes_per_rank) and checks it against its checksum. Fails, naming
/// the file, when it is missing, not this plan's, not exactly the size the
/// plan's layout needs (every rank checks the whole file, so that a short
/// file fails on all ranks alike), or corrupt.
Status readRankWeights(const std::string &planPath, const Plan &plan,
                       uint32_t rank, std::vector<uint8_t> &out);

/// Reads rank `rank`'s section one shard at a time (offloaded parameters,
/// docs/offload.md: so that the whole section is never in host memory at
/// once), in section order, handing each root SHARD buffer's bytes to
/// `sink`; the bytes between shards are read for the checksum only. The
/// section's checksum is compared at the end: a corrupt file fails after
/// `sink` has seen its bytes, so the caller must not keep them on failure.
/// Fails as readRankWeights() does.
Status readRankShards(const std::string &planPath, const Plan &plan,
                      uint32_t rank,
                      const std::function<Status(const Buffer &shard,
                                                 const uint8_t *bytes)> &sink);

/// Reads the persistent section into `out` (resized to
/// persistentWeightsBytes(plan)); fails as readRankWeights() does.
Status readPersistentWeights(const std::string &planPath, const Plan &plan,
                             std::vector<uint8_t> &out);

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_WEIGHTS_H
