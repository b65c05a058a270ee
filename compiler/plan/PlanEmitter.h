//===- PlanEmitter.h - scheduled IR -> plan -------------------------------===//
//
// Lowers a scheduled, verified module into the plan zrun executes
// (runtime/plan/plan.proto): the parameter and group tables, one buffer per
// value with a fixed arena offset (planned by ArenaPlanner over instruction
// indices), and one program whose instructions sit on two queues:
//   - COMM `all_gather` for each zero.gather_start of a sharded group; it
//     waits for the compute instruction before it, so a collective is issued
//     exactly where the schedule placed its start (and never writes arena
//     bytes that an earlier instruction still reads);
//   - COMPUTE `gather_wait` for each zero.gather_wait, `release` for each
//     zero.release, and one instruction per nn compute op.
// Every instruction carries an opcode of runtime/plan/Opcodes.h on the queue
// that table names; an nn op without an opcode is an emission error.
// A generation module (@generate_begin, @prefill, @decode, @generate_end)
// adds state outside the arena: a CACHE buffer per nn.kv_cache, which
// `cache_append` writes in place (its result is the cache buffer), and a
// RESIDENT buffer per resident group, filled by COMM `resident_gather` (and
// its gather_wait) in generate_begin, viewed by zero.resident_read's
// parameters, ended by COMPUTE `resident_release` in generate_end.
// Cross-step prefetch (docs/generation.md section 6): a CARRY buffer per
// carried group, pinned at the bottom of the arena at the same offset in
// every program; zero.carry_start becomes COMM `carry_gather` (shard ->
// CARRY, the last collective of prefill or decode), zero.carry_wait COMPUTE
// `carry_wait` (the group's parameters view the CARRY buffer until their
// release), zero.carry_drain COMPUTE `carry_drain`; the copy's bytes are
// kept from every other buffer while they hold data across a program
// boundary.
// Views (nn.reshape, a parameter inside its gathered group) are buffers with
// `view_of` and take no arena space of their own. On one rank a shard is its
// whole group: no collective is emitted and parameters are read in place.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_PLAN_PLANEMITTER_H
#define ZPLAN_COMPILER_PLAN_PLANEMITTER_H

#include "compiler/analysis/CostModel.h"
#include "compiler/plan/ArenaPlanner.h"
#include "compiler/plan/TrainDefaults.h"
#include "runtime/plan/plan.pb.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace zplan {

struct EmitOptions {
  std::string hardware = "cpu";
  /// Bytes per rank; 0 = none.
  uint64_t memoryBudget = 0;
  /// Recorded in the plan (file name of the source model).
  std::string modelName;
  /// Name of the weights file, relative to the plan.
  std::string weightsFile;
  /// zrun train's defaults (--ds-config); written only when any is set.
  TrainDefaults trainDefaults;
  /// The tier of the optimizer's moments (--offload-optimizer) and of the
  /// sharded groups' shards (--offload-params) that the module offloads
  /// (compiler/analysis/OffloadSelection.h: every group's, unless
  /// --offload auto chose fewer; persistent groups stay whole on the
  /// device, as DeepSpeed keeps them), and the directory of the NVME
  /// tier's files (docs/offload.md).
  plan::Buffer::Tier optimizerTier = plan::Buffer::DEVICE;
  plan::Buffer::Tier parameterTier = plan::Buffer::DEVICE;
  std::string offloadDir;
  /// Update on the host each group whose moments live in host memory
  /// (--host-optimizer-step, docs/offload.md).
  bool hostOptimizerStep = true;
};

/// One program's share of what the dumps need.
struct EmittedProgram {
  /// Its arena, over its instruction indices.
  ArenaPlan arena;
  /// Per instruction: the cost model's time (compute or collective).
  std::vector<double> seconds;
  /// The bytes one run of it copies between the HOST or NVME tier and the
  /// arena, both ways (tier_fetch, tier_store).
  uint64_t tierCopyBytes = 0;
};

/// A plan together with what the dumps need to explain it.
struct EmittedPlan {
  plan::Plan plan;
  /// Parallel to plan.programs().
  std::vector<EmittedProgram> programs;
  /// The program the plan search and the single-program dumps measure:
  /// train_micro_step in a training plan, else infer.
  size_t primary = 0;
  /// The primary program's arena, except that arenaBytes is the plan's
  /// (the largest program's).
  ArenaPlan arena;
  /// The primary program's per-instruction times.
  std::vector<double> seconds;
  /// The cost model the times come from: the simulator charges its
  /// overlap cost (CostModel::computeSecondsBesideCollective) with them.
  std::optional<CostModel> cost;
  /// Per-rank bytes outside the arena: shards and persistent groups (and
  /// training state; in a generation plan the KV caches and resident
  /// copies, counted apart below too).
  uint64_t residentBytes = 0;
  /// Per-rank bytes in the HOST and NVME tiers (--offload-optimizer,
  /// --offload-params), not counted in residentBytes: the optimizer's
  /// moments and the parameter shards, each in the tier its option names.
  uint64_t offloadedMomentBytes = 0;
  uint64_t offloadedShardBytes = 0;
  /// The host-side optimizer step (docs/offload.md): the groups whose
  /// update runs on the host, and the per-rank HOST_STAGING bytes it reads
  /// (two slots for the gradients' copies, the hyper-parameters' copy,
  /// and three slots for moments staged from the nvme tier).
  uint32_t hostStepGroups = 0;
  uint64_t hostStagingBytes = 0;
  /// Of the host staging, the slots nvme moments are staged in.
  uint64_t hostStagedMomentBytes = 0;
  /// Of those groups, the master copies in host memory of the ones whose
  /// parameters stay on the device (Buffer.mirrors), per rank.
  uint64_t hostMasterBytes = 0;
  /// Generation: the KV caches (CACHE buffers) per rank.
  uint64_t kvCacheBytes = 0;
  /// Generation: the resident groups' gathered copies (RESIDENT buffers)
  /// per rank; 0 on one rank, where they are read in place.
  uint64_t residentCopyBytes = 0;
  /// Activation checkpointing (zplan-recompute): the blocks found in the
  /// training step and the names of those recomputed; both empty when none
  /// is.
  int64_t blocks = 0;
  std::vector<std::string> recomputedBlocks;
  /// The parameter rules (compiler/import/ParameterRules.h), one line per
  /// decision for the report: each tied copy and why, each initializer
  /// --untie kept apart, each frozen parameter and why.
  std::vector<std::string> tiedCopies;
  std::vector<std::string> untied;
  std::vector<std::string> frozen;
};

/// Emits `module` (after the schedule pipeline). The budget is recorded,
/// not enforced: the arena can exceed the schedule's live peak by its
/// fragmentation, and the caller decides what to do then (zcc reschedules
/// under a tighter budget).
llvm::Expected<EmittedPlan> emitPlan(mlir::ModuleOp module,
                                     const EmitOptions &options,
                                     const CostModel &cost);

} // namespace zplan

#endif // ZPLAN_COMPILER_PLAN_PLANEMITTER_H
