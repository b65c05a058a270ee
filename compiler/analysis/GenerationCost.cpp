//===- GenerationCost.cpp - what one generated token costs ----------------===//

#include "compiler/analysis/GenerationCost.h"

#include "compiler/analysis/Liveness.h"
#include "compiler/analysis/Lockstep.h"
#include "compiler/analysis/OffloadSelection.h"
#include "compiler/transforms/Programs.h"

#include "dialects/nn/NNDialect.h"
#include "dialects/zero/ZeroDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace zplan;

/// How a replay treats the carry ops.
enum class Carry {
  /// As scheduled: carry_start issues the next token's gather, carry_wait
  /// finds this token's complete.
  AsScheduled,
  /// As if there were no carry: the carry_wait's group is gathered at the
  /// program's start, ahead of every other gather, and carry_start does
  /// nothing.
  Without,
};

/// Replays `func` on a compute and a comm queue.
static ProgramCost replay(func::FuncOp func, const CostModel &cost,
                          Carry carry = Carry::AsScheduled) {
  ProgramCost result;
  if (!func)
    return result;
  double compute = 0, comm = 0;
  llvm::DenseMap<Value, double> done; // gather token -> completion time
  auto module = func->getParentOfType<ModuleOp>();
  OffloadSelection offloaded = selectOffloaded(module, SymbolTable(module));
  auto gather = [&](zero::GroupOp group) {
    uint64_t bytes = groupBytes(group);
    int64_t worldSize = group.getWorldSize();
    // The runtime issues a collective once compute reaches its start; an
    // offloaded shard's tier_fetch goes first on the same queue
    // (docs/offload.md).
    comm = std::max(comm, compute) + shardFetchSeconds(group, offloaded, cost) +
           cost.allGatherSeconds(bytes, worldSize);
    result.gatheredBytes += bytes;
    ++result.collectives;
    return comm;
  };
  auto waitFor = [&](double ready) {
    if (ready > compute) {
      result.exposedCommSeconds += ready - compute;
      compute = ready;
    }
  };
  double carriedReady = 0;
  if (carry == Carry::Without)
    for (auto wait : func.getOps<zero::CarryWaitOp>())
      if (zero::GroupOp group = shardedGroup(wait, wait.getGroupAttr()))
        carriedReady = gather(group);
  for (Operation &op : func.getBody().front()) {
    if (auto start = llvm::dyn_cast<zero::CarryStartOp>(op)) {
      if (zero::GroupOp group = shardedGroup(start, start.getGroupAttr()))
        if (carry == Carry::AsScheduled)
          gather(group);
      continue;
    }
    if (llvm::isa<zero::CarryWaitOp>(op)) {
      // As scheduled, the previous program ended with it complete.
      waitFor(carriedReady);
      continue;
    }
    if (auto start = llvm::dyn_cast<zero::GatherStartOp>(op)) {
      if (zero::GroupOp group = shardedGroup(start, start.getGroupAttr()))
        done[start.getToken()] = gather(group);
      continue;
    }
    if (auto wait = llvm::dyn_cast<zero::GatherWaitOp>(op)) {
      waitFor(done.lookup(wait.getToken()));
      continue;
    }
    if (auto resident = llvm::dyn_cast<zero::ResidentGatherOp>(op)) {
      // Blocking: the program ends with the copy complete.
      if (zero::GroupOp group = shardedGroup(resident, resident.getGroupAttr()))
        compute = gather(group);
      continue;
    }
    // Beside the collectives still running, compute pays what the
    // hardware charges for them (0 on a GPU).
    compute += cost.computeSecondsBesideCollective(cost.computeSeconds(&op),
                                                   comm - compute);
  }
  // The program ends when its comm queue has drained too.
  if (comm > compute)
    result.exposedCommSeconds += comm - compute;
  result.seconds = std::max(compute, comm);
  return result;
}

ProgramCost zplan::replayProgram(func::FuncOp func, const CostModel &cost) {
  return replay(func, cost);
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
  result.decodeWithoutCarry = replay(decode, cost, Carry::Without);
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
  result.worldSize = worldSizeOf(module);
  result.lockstepPeriod = lockstepPeriodOf(decode);
  result.agreementSeconds = agreementSeconds(cost, result.worldSize);
  for (StringRef name : {"zplan.carry", "zplan.carry_skipped"})
    if (auto record = module->getAttrOfType<DictionaryAttr>(name)) {
      if (auto group = record.getAs<FlatSymbolRefAttr>("group"))
        result.carriedGroup = group.getValue().str();
      if (auto bytes = record.getAs<IntegerAttr>("bytes"))
        result.carriedBytes = bytes.getInt();
      if (auto reason = record.getAs<StringAttr>("reason"))
        result.carrySkipped = reason.str();
    }
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
