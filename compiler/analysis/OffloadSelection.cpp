//===- OffloadSelection.cpp - which groups' state is offloaded ------------===//

#include "compiler/analysis/OffloadSelection.h"

#include "compiler/analysis/Liveness.h"
#include "compiler/transforms/Programs.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <optional>
#include <vector>

using namespace mlir;
using namespace zplan;

namespace {

/// How many groups the module's `attribute` asks for: none without it,
/// every group for -1 (std::nullopt).
std::optional<int64_t> countOf(ModuleOp module, llvm::StringRef attribute) {
  auto value = module->getAttrOfType<IntegerAttr>(attribute);
  if (!value)
    return 0;
  if (value.getInt() < 0)
    return std::nullopt;
  return value.getInt();
}

/// Adds to `into` the `count` largest of `groups` (then by name); every
/// one for std::nullopt.
void takeLargest(std::vector<zero::GroupOp> groups,
                 std::optional<int64_t> count, llvm::StringSet<> &into) {
  std::stable_sort(groups.begin(), groups.end(),
                   [](zero::GroupOp a, zero::GroupOp b) {
                     if (a.getPaddedElements() != b.getPaddedElements())
                       return a.getPaddedElements() > b.getPaddedElements();
                     return a.getSymName() < b.getSymName();
                   });
  size_t taken =
      count ? std::min<size_t>(static_cast<size_t>(*count), groups.size())
            : groups.size();
  for (size_t i = 0; i < taken; ++i)
    into.insert(groups[i].getSymName());
}

} // namespace

OffloadSelection zplan::selectOffloaded(ModuleOp module,
                                        const SymbolTable &symbols) {
  OffloadSelection selection;
  std::optional<int64_t> shardCount = countOf(module, kShardsOffloadedAttr);
  std::optional<int64_t> momentCount = countOf(module, kMomentsOffloadedAttr);
  // The liveness analysis asks on every rebuild: nothing to collect or
  // sort for a module that offloads nothing.
  if (shardCount == 0 && momentCount == 0)
    return selection;
  std::vector<zero::GroupOp> sharded;
  for (auto group : module.getOps<zero::GroupOp>())
    if (!group.getPersistent())
      sharded.push_back(group);
  takeLargest(sharded, shardCount, selection.shards);
  if (auto tier = module->getAttrOfType<StringAttr>(kShardsOffloadTierAttr))
    selection.shardsInNvme = tier.getValue() == "nvme";
  std::vector<zero::GroupOp> trained;
  if (auto step = symbols.lookup<func::FuncOp>(kOptimizerStepName)) {
    for (auto update : step.getOps<zero::OptimizerUpdateOp>())
      if (auto group = symbols.lookup<zero::GroupOp>(update.getGroup()))
        trained.push_back(group);
  }
  takeLargest(trained, momentCount, selection.moments);
  return selection;
}

double zplan::shardFetchSeconds(zero::GroupOp group,
                                const OffloadSelection &offloaded,
                                const CostModel &cost) {
  if (!offloaded.shards.contains(group.getSymName()))
    return 0;
  uint64_t shardBytes =
      groupBytes(group) / std::max<int64_t>(group.getWorldSize(), 1);
  return cost.tierCopySeconds(shardBytes, offloaded.shardsInNvme);
}
