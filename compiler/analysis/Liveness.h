//===- Liveness.h - program-order liveness of a scheduled function --------===//
//
// The schedule is one straight-line block: program order is execution order
// on the compute queue, and a buffer lives from the op that creates it to the
// last op that reads it. This analysis numbers the ops and gives every
// transient buffer its live range and size:
//   - activations: results of nn ops, graph inputs; `nn.reshape` results are
//     views that extend the buffer they view rather than new buffers;
//   - gathered groups: one buffer per `zero.gather_start`, from the start
//     (the collective writes into it) to its `zero.release` (or, before
//     releases are placed, to the last use of its tensors);
//   - cross-step prefetch (docs/generation.md section 6): a
//     `zero.carry_wait`'s copy is a gathered buffer live from op 0 (the
//     previous program's collective already wrote it) to its release, and
//     a `zero.carry_start` adds a carried buffer of the group's bytes from
//     the start to the end of the function (the next program reads it);
// and the per-rank memory outside the arena: shards and persistent groups
// (and in generation the KV cache and resident copies: nn.cache_append and
// zero.resident_read results are views of them, not buffers).
// Constants live in the plan's read-only section and are not counted.
// Passes query it; it never changes the IR.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_ANALYSIS_LIVENESS_H
#define ZPLAN_COMPILER_ANALYSIS_LIVENESS_H

#include "dialects/zero/ZeroDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zplan {

/// Bytes of a ranked tensor (element bit width rounded up to bytes).
uint64_t tensorBytes(mlir::Type type);

/// Bytes of a group's gathered (full, padded) buffer, in the type it is
/// gathered in (half the f32 bytes for a bf16 `gather_type`).
uint64_t groupBytes(zero::GroupOp group);
/// The same, with the module's symbol table a caller already holds (building
/// one per call is linear in the module's symbols).
uint64_t groupBytes(zero::GroupOp group, const mlir::SymbolTable &symbols);

/// Bytes of a group's gradients as a reduction sends them (full, padded), in
/// its `reduce_type` (bf16) or else its parameters' type.
uint64_t reducedGroupBytes(zero::GroupOp group);

/// Every op that reads `value`, directly or through nn.reshape views of it.
llvm::SmallVector<mlir::Operation *> collectUsesThroughViews(mlir::Value value);

/// The value `value` views (through nn.reshape chains), or itself.
mlir::Value viewSource(mlir::Value value);

class LivenessAnalysis {
public:
  enum class BufferKind { Input, Activation, Gathered, Carried };

  struct Buffer {
    BufferKind kind;
    /// The value that owns the storage: a block argument, an nn op result,
    /// the token of a reduce_scatter_start (its staging copy, an
    /// Activation until the reduce_scatter_wait), (Gathered) the token of
    /// the gather_start or the carry_wait's first result; null for a
    /// Carried buffer (a carry_start has no result).
    mlir::Value value;
    uint64_t bytes = 0;
    /// Op indices, inclusive.
    int64_t start = 0;
    int64_t end = 0;
    /// For Gathered buffers filled by a zero.gather_start.
    zero::GatherStartOp gatherStart;
    /// For Gathered and Carried buffers.
    zero::GroupOp group;
    /// The op whose collective fills the buffer inside this function (a
    /// gather_start or carry_start; null when none does: a carry_wait's
    /// copy was gathered by the previous program), and the index of the op
    /// that completes it (its gather_wait; for a carry_start the last op,
    /// since the program ends with its comm queue drained).
    mlir::Operation *collective = nullptr;
    int64_t collectiveDone = 0;
  };

  explicit LivenessAnalysis(mlir::func::FuncOp func);

  llvm::ArrayRef<mlir::Operation *> ops() const { return opsInOrder; }
  int64_t indexOf(mlir::Operation *op) const { return opIndex.lookup(op); }
  llvm::ArrayRef<Buffer> buffers() const { return allBuffers; }

  /// Bytes of transient buffers live at each op index.
  std::vector<uint64_t> liveBytes() const;
  /// Index of the first op where liveBytes() peaks, and the peak.
  std::pair<int64_t, uint64_t> peak() const;
  /// Buffers live at op `index`.
  llvm::SmallVector<const Buffer *> liveAt(int64_t index) const;

  /// Per-rank bytes outside the arena: every non-persistent group's shard
  /// plus every persistent group whole; in a training module the gradient
  /// and optimizer state; in a generation module the KV cache and every
  /// resident group's gathered copy.
  uint64_t residentBytes() const { return resident; }

private:
  llvm::SmallVector<mlir::Operation *> opsInOrder;
  llvm::DenseMap<mlir::Operation *, int64_t> opIndex;
  std::vector<Buffer> allBuffers;
  uint64_t resident = 0;
};

//===----------------------------------------------------------------------===//
// Gathered copies and their segments (zplan-residency, zplan-recompute,
// zplan-insert-gathers)
//===----------------------------------------------------------------------===//
//
// The memory model the schedule passes share before gathers are placed: a
// group's gathered copy is charged over each *segment* of its reads, from the
// segment's first read to its last (gathered right before, released right
// after). The passes differ only in where they cut the reads into segments.

/// One read of a gathered copy: the op reading one of its tensors and, when
/// that op is an nn.reshape, the readers of the view; ops [first, last] in
/// LivenessAnalysis numbering. Reads that overlap are one read.
struct CopyRead {
  int64_t first = 0;
  int64_t last = 0;
  /// The operands reading the copy's tensors directly.
  llvm::SmallVector<mlir::OpOperand *> operands;
};

/// A sharded group's gathered copy in one program and its reads.
struct GatheredCopy {
  /// The zero.gather_wait (or zero.resident_read) whose results are read.
  mlir::Operation *source = nullptr;
  /// Null for shards gathered without a group.
  zero::GroupOp group;
  uint64_t bytes = 0;
  /// Kept outside the arena (zero.resident_read, or a group zplan-residency
  /// considers keeping): not charged, but its reads still separate the
  /// other copies' reads as hooks would.
  bool resident = false;
  /// Sorted by first op.
  std::vector<CopyRead> reads;
  /// Segment k holds reads [cuts[k], cuts[k+1]); initially one segment.
  std::vector<size_t> cuts;

  size_t numSegments() const { return cuts.size() - 1; }
  int64_t segmentFirst(size_t k) const { return reads[cuts[k]].first; }
  int64_t segmentLast(size_t k) const;
};

/// The copies `live`'s function reads, in program order of their sources:
/// one per zero.gather_wait of a non-persistent group or of ungrouped shards
/// and one (resident) per zero.resident_read; each one segment. Persistent
/// groups are whole on every rank (LivenessAnalysis::residentBytes()) and
/// have no copy here.
std::vector<GatheredCopy> collectGatheredCopies(const LivenessAnalysis &live);

/// Cuts at every gap between reads: each read its own segment, the least
/// memory any placement of gathers reaches.
std::vector<size_t> cutsAtEveryGap(const GatheredCopy &copy);

/// Cuts where hook-based ZeRO-3 (policy jit) releases and gathers again:
/// wherever another group's read begins between two reads of `copies[index]`.
std::vector<size_t> cutsLikeHooks(llvm::ArrayRef<GatheredCopy> copies,
                                  size_t index);

/// Transient bytes live at each op of `live`'s function: activations and
/// inputs, plus each non-resident copy's bytes over each of its segments.
/// Add LivenessAnalysis::residentBytes() for the rank's total.
std::vector<uint64_t> liveBytesWithCopies(const LivenessAnalysis &live,
                                          llvm::ArrayRef<GatheredCopy> copies);

} // namespace zplan

#endif // ZPLAN_COMPILER_ANALYSIS_LIVENESS_H
