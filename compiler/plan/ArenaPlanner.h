//===- ArenaPlanner.h - Static offsets for buffers in one arena -----------===//
//
// The memory plan gives every buffer of a program a fixed offset in a single
// per-rank arena, decided at compile time, so that the runtime never allocates.
// The planner sees only sizes and live ranges over the instruction index; it is
// plain C++ with no MLIR dependency so that it can be tested and tuned on
// synthetic interval sets as well as on real schedules.
//
// The invariant every plan keeps, and verifyArena() checks: no two buffers
// whose live ranges overlap share a byte of the arena.
//
// A request may pin its offset (fixedOffset): a buffer whose bytes must sit
// at the same place in several programs' arenas, as generation's carried
// copy does (docs/generation.md section 6), which one program fills and the
// next reads. Pinned requests are placed where they ask, and the others
// around them.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_PLAN_ARENAPLANNER_H
#define ZPLAN_COMPILER_PLAN_ARENAPLANNER_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zplan {

/// One buffer to place: `bytes` live from instruction `firstUse` to
/// `lastUse`, both inclusive (0 <= firstUse <= lastUse). Two buffers overlap in
/// time when their ranges share at least one instruction index, so a buffer
/// that dies at instruction i cannot hand its bytes to one born at i.
/// A buffer live in disjoint stretches of a program may be asked for by
/// several requests with the same id.
struct BufferRequest {
  int64_t id;
  uint64_t bytes;
  int64_t firstUse;
  int64_t lastUse;
  /// Where the buffer must sit (a multiple of the alignment); nullopt: where
  /// the planner finds room.
  std::optional<uint64_t> fixedOffset = std::nullopt;
};

/// Where every buffer lives, and how close the arena is to the best possible.
struct ArenaPlan {
  /// The offset of each request, in the order of the requests. Every offset is
  /// a multiple of the alignment; zero-byte requests sit at offset 0.
  std::vector<uint64_t> offsets;
  /// The arena size: the largest offset + aligned size over all requests.
  uint64_t arenaBytes = 0;
  /// The largest sum of aligned sizes of buffers live at one instruction. No
  /// placement can use less, so arenaBytes / lowerBound measures the
  /// fragmentation the planner left.
  uint64_t lowerBound = 0;
  /// Aligned bytes live at each instruction index 0..max(lastUse); empty when
  /// there are no requests.
  std::vector<uint64_t> liveBytes;
  /// The first instruction index where liveBytes reaches lowerBound; -1 when
  /// there are no requests.
  int64_t peakIndex = -1;
};

/// The alignment of every arena offset unless a caller asks for another.
inline constexpr uint64_t kArenaAlignment = 64;

/// The most bytes the aligned sizes of all requests may add up to: 2^62 B.
/// Every offset and the arena size are at most that sum, so within it no
/// computation of the planner can wrap around 64 bits.
inline constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 62;

/// The index of the first request at which the aligned sizes, added in
/// order, would exceed kMaxArenaBytes (or a size wraps when aligned), or
/// whose fixed offset + aligned size would; nullopt when all of them fit.
/// planArena's precondition: callers check this first and report the buffer it
/// names.
std::optional<size_t> findArenaOverflow(llvm::ArrayRef<BufferRequest> requests,
                                        uint64_t alignment = kArenaAlignment);

/// Places `requests` in one arena; findArenaOverflow(requests) must be
/// nullopt. Each request takes its size rounded up to
/// `alignment` (which must be non-zero) and an offset that is a multiple of
/// it. Pinned requests (fixedOffset) go first, at their offsets; they must
/// be aligned and must not share bytes while live (the caller's invariant,
/// which verifyArena() checks). The other buffers are placed largest first,
/// each in the smallest gap left by the already placed buffers it overlaps
/// in time (best fit), as XLA's heap simulator and TFLite's arena planner
/// do; a few placement orders are tried and the smallest arena is kept. The
/// result keeps the invariant in the file comment whenever the pinned
/// requests do.
ArenaPlan planArena(llvm::ArrayRef<BufferRequest> requests,
                    uint64_t alignment = kArenaAlignment);

/// Checks that `plan` is a valid placement of `requests`: one offset per
/// request, every pinned request at its fixedOffset, every offset a multiple
/// of `alignment`, every buffer inside
/// arenaBytes, no two buffers overlapping in time sharing a byte, and
/// liveBytes, lowerBound and peakIndex matching the requests. On failure
/// returns false and, if `error` is non-null, says what is wrong; an overlap
/// names both buffer ids with their live ranges and byte ranges. O(n^2).
bool verifyArena(llvm::ArrayRef<BufferRequest> requests, const ArenaPlan &plan,
                 std::string *error, uint64_t alignment = kArenaAlignment);

} // namespace zplan

#endif // ZPLAN_COMPILER_PLAN_ARENAPLANNER_H
