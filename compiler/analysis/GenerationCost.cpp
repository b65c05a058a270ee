//===- GenerationCost.cpp - what one generated token costs ----------------===//

#include "compiler/analysis/GenerationCost.h"

#include "compiler/analysis/Liveness.h"
#include "compiler/transforms/Programs.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/zero/ZeroDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace zplan;

/// The group a collective names, when it is a sharded (not persistent) one.
static zero::GroupOp shardedGroup(Operation *op, FlatSymbolRefAttr name) {
  if (!name)
    return nullptr;
  auto group = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(op, name);
  return group && !group.getPersistent() ? group : nullptr;
}

/// Replays `func` on a compute and a comm queue.
static ProgramCost replay(func::FuncOp func, const CostModel &cost) {
  ProgramCost result;
  if (!func)
    return result;
  double compute = 0, comm = 0;
  llvm::DenseMap<Value, double> done; // gather token -> completion time
  auto gather = [&](uint64_t bytes, int64_t worldSize) {
    // The runtime issues a collective once compute reaches its start.
    comm = std::max(comm, compute) + cost.allGatherSeconds(bytes, worldSize);
    result.gatheredBytes += bytes;
    ++result.collectives;
    return comm;
  };
  for (Operation &op : func.getBody().front()) {
    if (auto start = llvm::dyn_cast<zero::GatherStartOp>(op)) {
      if (zero::GroupOp group = shardedGroup(start, start.getGroupAttr()))
        done[start.getToken()] =
            gather(groupBytes(group), group.getWorldSize());
      continue;
    }
    if (auto wait = llvm::dyn_cast<zero::GatherWaitOp>(op)) {
      double ready = done.lookup(wait.getToken());
      if (ready > compute) {
        result.exposedCommSeconds += ready - compute;
        compute = ready;
      }
      continue;
    }
    if (auto resident = llvm::dyn_cast<zero::ResidentGatherOp>(op)) {
      // Blocking: the program ends with the copy complete.
      if (zero::GroupOp group = shardedGroup(resident, resident.getGroupAttr()))
        compute = gather(groupBytes(group), group.getWorldSize());
      continue;
    }
    compute += cost.computeSeconds(&op);
  }
  result.seconds = std::max(compute, comm);
  return result;
}

std::optional<GenerationCost>
zplan::estimateGenerationCost(ModuleOp module, const CostModel &cost) {
  auto decode = module.lookupSymbol<func::FuncOp>(kDecodeName);
  if (!decode)
    return std::nullopt;
  GenerationCost result;
  result.begin =
      replay(module.lookupSymbol<func::FuncOp>(kGenerateBeginName), cost);
  result.prefill =
      replay(module.lookupSymbol<func::FuncOp>(kPrefillName), cost);
  result.decode = replay(decode, cost);
  if (decode.getNumArguments() > 0)
    if (auto ids =
            llvm::dyn_cast<RankedTensorType>(decode.getArgument(0).getType()))
      if (ids.getRank() > 0 && ids.getDimSize(0) > 0)
        result.batch = ids.getDimSize(0);
  for (auto group : module.getOps<zero::GroupOp>()) {
    if (group.getPersistent())
      continue;
    if (group.getResident()) {
      ++result.residentGroups;
      result.residentBytes += groupBytes(group);
    } else {
      ++result.streamedGroups;
    }
  }
  for (auto cache : module.getOps<nn::KvCacheOp>())
    result.kvCacheBytes += tensorBytes(cache.getTensorType());
  if (auto record = module->getAttrOfType<DictionaryAttr>("zplan.residency")) {
    auto field = [&](StringRef name) -> uint64_t {
      auto value = record.getAs<IntegerAttr>(name);
      return value && value.getInt() > 0 ? value.getInt() : 0;
    };
    result.budgetBytes = field("memory_budget");
    result.fixedBytes = field("fixed_bytes");
    result.workingSetBytes = field("working_set_bytes");
  }
  return result;
}
