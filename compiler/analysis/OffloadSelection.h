//===- OffloadSelection.h - which groups' state is offloaded --------------===//
//
// Offload (docs/offload.md) is decided before the schedule pipeline makes
// the groups (zplan-shard-parameters), so the module says how many, and
// this file says which: the attribute kShardsOffloadedAttr or
// kMomentsOffloadedAttr (compiler/transforms/Programs.h) holds a number of
// groups, and the groups offloaded are that many of the largest (then by
// name); -1 is every group. The liveness analysis (what --memory-budget counts)
// and the plan emitter (each buffer's tier) both ask here, so they agree.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_ANALYSIS_OFFLOADSELECTION_H
#define ZPLAN_COMPILER_ANALYSIS_OFFLOADSELECTION_H

#include "compiler/analysis/CostModel.h"

#include "dialects/zero/ZeroDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringSet.h"

namespace zplan {

struct OffloadSelection {
  /// Sharded groups whose shard lives outside the device.
  llvm::StringSet<> shards;
  /// Trained groups whose optimizer moments live outside the device.
  llvm::StringSet<> moments;
  /// The offloaded shards live in the nvme tier (else in host memory).
  bool shardsInNvme = false;
};

/// The groups of `module` (after zplan-shard-parameters and
/// zplan-optimizer-step) whose shards and moments are offloaded, looked up
/// in `symbols` (the module's table, which the caller has); empty at once
/// for a module that offloads nothing.
OffloadSelection selectOffloaded(mlir::ModuleOp module,
                                 const mlir::SymbolTable &symbols);

/// How long the tier_fetch of `group`'s shard takes before each gather of
/// it (the comm queue runs it just before the collective; on one rank it
/// fills the whole copy): 0 unless `offloaded` holds its shard.
double shardFetchSeconds(zero::GroupOp group, const OffloadSelection &offloaded,
                         const CostModel &cost);

} // namespace zplan

#endif // ZPLAN_COMPILER_ANALYSIS_OFFLOADSELECTION_H
