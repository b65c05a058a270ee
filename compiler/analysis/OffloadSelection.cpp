//===- OffloadSelection.cpp - which groups' state is offloaded ------------===//

#include "compiler/analysis/OffloadSelection.h"

#include "compiler/transforms/Programs.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <vector>

using namespace mlir;
using namespace zplan;

namespace {

/// The quarters the module's `attribute` asks for (0 without it).
int64_t quartersOf(ModuleOp module, llvm::StringRef attribute) {
  auto value = module->getAttrOfType<IntegerAttr>(attribute);
  return value ? std::clamp<int64_t>(value.getInt(), 0, 4) : 0;
}

/// Adds to `into` the largest of `groups` (then by name) until their
/// elements reach `quarters`/4 of all of theirs.
void takeLargest(std::vector<zero::GroupOp> groups, int64_t quarters,
                 llvm::StringSet<> &into) {
  if (quarters == 0)
    return;
  std::stable_sort(groups.begin(), groups.end(),
                   [](zero::GroupOp a, zero::GroupOp b) {
                     if (a.getPaddedElements() != b.getPaddedElements())
                       return a.getPaddedElements() > b.getPaddedElements();
                     return a.getSymName() < b.getSymName();
                   });
  uint64_t total = 0;
  for (zero::GroupOp group : groups)
    total += group.getPaddedElements();
  uint64_t taken = 0;
  for (zero::GroupOp group : groups) {
    // Elements are far below 2^62 (zplan-shard-parameters), so the
    // products cannot overflow.
    if (taken * 4 >= total * static_cast<uint64_t>(quarters))
      break;
    into.insert(group.getSymName());
    taken += group.getPaddedElements();
  }
}

} // namespace

OffloadSelection zplan::selectOffloaded(ModuleOp module,
                                        const SymbolTable &symbols) {
  OffloadSelection selection;
  int64_t shardQuarters = quartersOf(module, kShardsOffloadedAttr);
  int64_t momentQuarters = quartersOf(module, kMomentsOffloadedAttr);
  // The liveness analysis asks on every rebuild: nothing to collect or
  // sort for a module that offloads nothing.
  if (shardQuarters == 0 && momentQuarters == 0)
    return selection;
  std::vector<zero::GroupOp> sharded;
  for (auto group : module.getOps<zero::GroupOp>())
    if (!group.getPersistent())
      sharded.push_back(group);
  takeLargest(sharded, shardQuarters, selection.shards);
  std::vector<zero::GroupOp> trained;
  if (auto step = symbols.lookup<func::FuncOp>(kOptimizerStepName)) {
    for (auto update : step.getOps<zero::OptimizerUpdateOp>())
      if (auto group = symbols.lookup<zero::GroupOp>(update.getGroup()))
        trained.push_back(group);
  }
  takeLargest(trained, momentQuarters, selection.moments);
  return selection;
}
