//===- GenerationCost.h - what one generated token costs ------------------===//
//
// The `report` dump of a generation plan answers the question residency is
// about: how many bytes each decoded token gathers and how long it takes,
// under the chosen schedule and under `jit` (FSDP2's generate, everything
// gathered per token). This analysis reads a scheduled generation module
// (after zplan-residency, zplan-insert-gathers and zplan-prefetch) and
// replays @prefill and @decode on the two queues the runtime has, as the
// plan simulator does for a plan: the compute queue runs the ops in order,
// the comm queue the gathers in order (an offloaded shard's tier_fetch
// just before its gather), a gather is issued when compute reaches its
// start and a wait blocks compute until it is done; a program
// ends when both queues are idle. With cross-step prefetch
// (docs/generation.md section 6) a program's zero.carry_start issues the
// next token's first gather in its tail and the next @decode's
// zero.carry_wait finds it complete (the runtime ends a program once its
// comm queue drains); @decode is also replayed without the carry, that
// group gathered at the token's start, so the report shows what it saves.
// It never changes the IR.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_ANALYSIS_GENERATIONCOST_H
#define ZPLAN_COMPILER_ANALYSIS_GENERATIONCOST_H

#include "compiler/analysis/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <optional>
#include <string>

namespace zplan {

/// One program's replay.
struct ProgramCost {
  /// Bytes of every group copy its all-gathers fill (the full, padded
  /// group, as the report counts a gather).
  uint64_t gatheredBytes = 0;
  int64_t collectives = 0;
  double seconds = 0;
  /// Compute time spent waiting for gathers, plus the time the program's
  /// end waits for collectives still running after its last compute (a
  /// carried gather that its tail did not cover).
  double exposedCommSeconds = 0;
};

/// What a generation module's schedule costs per token.
struct GenerationCost {
  ProgramCost begin;
  ProgramCost prefill;
  /// One @decode step: every sequence of the batch gets one token.
  ProgramCost decode;
  /// Sequences per step (@decode's input_ids' first dimension).
  int64_t batch = 1;
  int64_t residentGroups = 0;
  int64_t streamedGroups = 0;
  /// Gathered copies of the resident groups (per rank, whole generation).
  uint64_t residentBytes = 0;
  /// Every nn.kv_cache (per rank, replicated).
  uint64_t kvCacheBytes = 0;
  /// zplan-residency's accounting (its `zplan.residency` record): the
  /// budget it chose under (0: none), the bytes paid whatever it chose
  /// (shards, persistent groups, KV cache), and the working set of the
  /// streamed groups and activations it left.
  uint64_t budgetBytes = 0;
  uint64_t fixedBytes = 0;
  uint64_t workingSetBytes = 0;
  /// Cross-step prefetch (zplan-cross-step-prefetch's `zplan.carry`
  /// record): the carried group ("" when nothing is carried) and its
  /// gathered bytes; and one @decode step as it would run without the
  /// carry: that group gathered at the token's start, nothing started in
  /// the tail (the same compile's baseline).
  std::string carriedGroup;
  uint64_t carriedBytes = 0;
  ProgramCost decodeWithoutCarry;
  /// When the pass found a group to carry but did not (its
  /// `zplan.carry_skipped` record): why; carriedGroup names the group.
  std::string carrySkipped;
  /// Lockstep (Lockstep.h): the ranks agree on their running rows every
  /// `lockstepPeriod` decode steps (0: never, decode has no collective),
  /// each agreement taking `agreementSeconds`; over `worldSize` ranks.
  int64_t lockstepPeriod = 0;
  double agreementSeconds = 0;
  int64_t worldSize = 1;

  /// The agreements' time per decoded step (0 without lockstep).
  double agreementSecondsPerStep() const {
    return lockstepPeriod > 0 ? agreementSeconds / lockstepPeriod : 0;
  }

  /// Tokens of all sequences per second of decoding without the carry.
  double tokensPerSecondWithoutCarry() const {
    return decodeWithoutCarry.seconds > 0 ? batch / decodeWithoutCarry.seconds
                                          : 0;
  }

  /// Tokens of all sequences per second of decoding.
  double tokensPerSecond() const {
    return decode.seconds > 0 ? batch / decode.seconds : 0;
  }
};

/// One program replayed as scheduled (the carry ops as the runtime runs
/// them); zplan-cross-step-prefetch compares @decode with and without its
/// carry by it.
ProgramCost replayProgram(mlir::func::FuncOp func, const CostModel &cost);

/// The cost of `module`'s generation programs on `cost`'s hardware, or
/// nullopt when `module` is not a generation module (no @decode).
std::optional<GenerationCost> estimateGenerationCost(mlir::ModuleOp module,
                                                     const CostModel &cost);

} // namespace zplan

#endif // ZPLAN_COMPILER_ANALYSIS_GENERATIONCOST_H
