//===- CrossStepPrefetch.cpp - the zplan-cross-step-prefetch pass ---------===//
//
// @decode's first streamed gather has nothing to overlap: it is issued at
// the program's start and compute waits for it. This pass starts it in the
// previous program's tail instead (docs/generation.md section 6; the rules
// are in Passes.td): a zero.carry_start at the end of @prefill and @decode,
// hoisted as zplan-prefetch hoists a gather (StartHoisting.h), and a
// zero.carry_wait in @decode where the gather's wait was.
// Tests: test/transforms/cross-step-prefetch.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/CostModel.h"
#include "compiler/analysis/GenerationCost.h"
#include "compiler/analysis/Liveness.h"
#include "compiler/analysis/OffloadSelection.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/Programs.h"
#include "compiler/transforms/StartHoisting.h"
#include "dialects/zero/ZeroDialect.h"

#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/Support/Debug.h"
#include "llvm/Support/Format.h"

#define DEBUG_TYPE "zplan-cross-step-prefetch"

namespace zplan {
#define GEN_PASS_DEF_CROSSSTEPPREFETCH
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

/// The group a gather_start names when it is streamed: sharded, and not
/// kept gathered across tokens.
static zero::GroupOp streamedGroup(zero::GatherStartOp start) {
  if (!start.getGroupAttr())
    return nullptr;
  auto group = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
      start, start.getGroupAttr());
  return group && !group.getPersistent() && !group.getResident() ? group
                                                                 : nullptr;
}

/// The shard of each of `group`'s parameters in `func`: the first
/// zero.shard of it in program order (the earliest a start may go), or a new
/// one at the top. (One straight-line block: all of them dominate the end.)
static SmallVector<Value> shardsOf(func::FuncOp func, zero::GroupOp group) {
  Block &body = func.getBody().front();
  SmallVector<Value> shards;
  for (Attribute param : group.getParams()) {
    auto name = llvm::cast<FlatSymbolRefAttr>(param);
    Value shard;
    for (auto read : body.getOps<zero::ShardOp>())
      if (read.getParamAttr() == name) {
        shard = read.getResult();
        break;
      }
    if (!shard) {
      auto parameter = SymbolTable::lookupNearestSymbolFrom<nn::ParameterOp>(
          group, name.getAttr());
      OpBuilder builder = OpBuilder::atBlockBegin(&body);
      shard = builder.create<zero::ShardOp>(
          group.getLoc(),
          zero::ShardType::get(group.getContext(), parameter.getTensorType()),
          name);
    }
    shards.push_back(shard);
  }
  return shards;
}

struct CrossStepPrefetchPass
    : zplan::impl::CrossStepPrefetchBase<CrossStepPrefetchPass> {
  using CrossStepPrefetchBase::CrossStepPrefetchBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto decode = module.lookupSymbol<func::FuncOp>(kDecodeName);
    if (!decode)
      return; // Not a generation module.
    FailureOr<CostModel> cost = hoistingCostModel(
        module, "zplan-cross-step-prefetch", hardware, hardwareProfile);
    if (failed(cost))
      return signalPassFailure();
    // jit is FSDP2's generate: no prefetch across tokens.
    if (policy == SchedulePolicy::Jit)
      return;

    zero::GatherStartOp first;
    zero::GroupOp group;
    for (auto start : decode.getOps<zero::GatherStartOp>())
      if ((group = streamedGroup(start))) {
        first = start;
        break;
      }
    if (!first)
      return; // Nothing streamed: nothing to carry.
    auto prefill = module.lookupSymbol<func::FuncOp>(kPrefillName);
    auto end = module.lookupSymbol<func::FuncOp>(kGenerateEndName);
    if (!prefill || !end) {
      module.emitError() << "zplan-cross-step-prefetch: a generation module "
                            "needs @"
                         << kPrefillName << " and @" << kGenerateEndName
                         << " beside @" << kDecodeName;
      return signalPassFailure();
    }
    uint64_t bytes = groupBytes(group);
    auto name = FlatSymbolRefAttr::get(group.getSymNameAttr());
    Builder builder(&getContext());
    auto record = [&](StringRef attribute, StringRef reason) {
      SmallVector<NamedAttribute> fields{
          builder.getNamedAttr("group", name),
          builder.getNamedAttr(
              "bytes", builder.getI64IntegerAttr(static_cast<int64_t>(bytes)))};
      if (!reason.empty())
        fields.push_back(
            builder.getNamedAttr("reason", builder.getStringAttr(reason)));
      module->setAttr(attribute, builder.getDictionaryAttr(fields));
    };
    // A skipped carry is recorded apart from `zplan.carry`, which means
    // the carry ops exist.
    // One rank fetches an offloaded shard whole into the copy its reader
    // uses (docs/offload.md): no collective to carry, and a tier copy that
    // outlives its program is not built. With more ranks the carried
    // gather reads a staging copy that its own program fetched.
    if (group.getWorldSize() == 1 &&
        selectOffloaded(module, SymbolTable(module))
            .shards.contains(group.getSymName()))
      return record("zplan.carry_skipped",
                    "on one rank its offloaded shard is fetched whole into "
                    "the copy decode reads, and a fetch carried across "
                    "programs is not built");
    if (!fitsBudget(prefill, decode, first, bytes))
      return record("zplan.carry_skipped",
                    "its copy does not fit the memory budget at the end of "
                    "prefill/decode or before its gather in decode");

    // Carrying pays only when the tail hides more of the collective than
    // the token's start did: try it on a copy, and compare the decode
    // steps (the runtime's two queues, GenerationCost.h).
    OwningOpRef<ModuleOp> trial = module.clone();
    carry(*trial, name, *cost);
    double before = replayProgram(decode, *cost).seconds;
    double after =
        replayProgram(trial->lookupSymbol<func::FuncOp>(kDecodeName), *cost)
            .seconds;
    if (after >= before) {
      std::string reason;
      llvm::raw_string_ostream os(reason);
      os << "carrying it would not shorten a decode step ("
         << llvm::format("%.3f", after * 1e6) << " us with the carry, "
         << llvm::format("%.3f", before * 1e6)
         << " us without): the tail hides less of its gather than the "
            "token's start does";
      // Where overlap is not free, say so: that is why on CPU ranks.
      if (double slowdown = cost->profile().computeSlowdownDuringCollective)
        os << ", and compute beside a collective pays "
           << llvm::format("%.3g", slowdown)
           << " of its time on this hardware profile";
      return record("zplan.carry_skipped", os.str());
    }
    carry(module, name, *cost);
    record("zplan.carry", "");
  }

  /// Carries `name`'s group in `module` (Passes.td, steps 3-5).
  void carry(ModuleOp module, FlatSymbolRefAttr name, const CostModel &cost) {
    auto group = module.lookupSymbol<zero::GroupOp>(name.getAttr());
    auto prefill = module.lookupSymbol<func::FuncOp>(kPrefillName);
    auto decode = module.lookupSymbol<func::FuncOp>(kDecodeName);
    auto end = module.lookupSymbol<func::FuncOp>(kGenerateEndName);
    zero::GatherStartOp first = *llvm::find_if(
        decode.getOps<zero::GatherStartOp>(), [&](zero::GatherStartOp start) {
          return start.getGroupAttr() == name;
        });
    uint64_t bytes = groupBytes(group);
    // An offloaded shard's fetch runs before the carried collective.
    double fetchSeconds = shardFetchSeconds(
        group, selectOffloaded(module, SymbolTable(module)), cost);
    zero::CarryWaitOp carried = replaceFirstGather(first, name);
    for (func::FuncOp func : {prefill, decode}) {
      Operation *terminator = func.getBody().front().getTerminator();
      OpBuilder builder(terminator);
      SmallVector<Value> shards = shardsOf(func, group);
      auto start =
          builder.create<zero::CarryStartOp>(group.getLoc(), shards, name);
      // In @decode the carried copy this token read must not be
      // overwritten while read: the start stays below its readers.
      llvm::SmallPtrSet<Operation *, 8> readers;
      if (func == decode) {
        readers.insert(carried);
        for (Value tensor : carried.getTensors())
          for (Operation *reader : collectUsesThroughViews(tensor))
            readers.insert(reader);
      }
      // The cost stop alone: jit has no cross-token prefetch to be at
      // least as early as.
      HoistLimits limits;
      limits.atLeastHookDistance = false;
      limits.memoryBudget =
          memoryBudget > 0 ? static_cast<uint64_t>(memoryBudget) : 0;
      limits.maxInFlight = maxInFlight;
      limits.maxInFlightBytes = maxInFlightBytes;
      // A fresh picture: the carry rewrote the program since the last one.
      HoistPicture picture(func);
      [[maybe_unused]] HoistResult result = hoistStart(
          start, terminator, bytes, group.getWorldSize(), fetchSeconds, cost,
          limits, picture, [&](Operation *op) { return readers.contains(op); });
      LLVM_DEBUG(llvm::dbgs()
                 << "@" << func.getSymName() << ": carry of @"
                 << group.getSymName() << " moved " << result.moved
                 << " ops up, overlapping " << result.overlappedSeconds
                 << " s of " << result.neededSeconds << " s\n");
    }
    OpBuilder::atBlockBegin(&end.getBody().front())
        .create<zero::CarryDrainOp>(group.getLoc(), name);
  }

  /// Whether the carried copy fits the budget where it adds bytes before
  /// any hoisting: in @decode from op 0 to where the gather it replaces
  /// started, and at the end of @prefill and @decode (the carry_start's
  /// first place). Hoisting then checks every op it passes.
  bool fitsBudget(func::FuncOp prefill, func::FuncOp decode,
                  zero::GatherStartOp first, uint64_t bytes) {
    if (memoryBudget <= 0)
      return true;
    uint64_t budget = static_cast<uint64_t>(memoryBudget);
    for (func::FuncOp func : {prefill, decode}) {
      LivenessAnalysis live(func);
      std::vector<uint64_t> liveBytes = live.liveBytes();
      auto fits = [&](int64_t index) {
        return live.residentBytes() + liveBytes[index] + bytes <= budget;
      };
      if (liveBytes.empty() || !fits(liveBytes.size() - 1))
        return false;
      if (func == decode)
        for (int64_t i = 0, e = live.indexOf(first); i < e; ++i)
          if (!fits(i))
            return false;
    }
    return true;
  }

  /// `first`'s gather_start / gather_wait pair becomes one carry_wait of
  /// the same shards where the wait was; its release stays.
  static zero::CarryWaitOp replaceFirstGather(zero::GatherStartOp first,
                                              FlatSymbolRefAttr name) {
    auto wait =
        llvm::cast<zero::GatherWaitOp>(*first.getToken().getUsers().begin());
    OpBuilder builder(wait);
    auto carried = builder.create<zero::CarryWaitOp>(
        wait.getLoc(), wait.getResultTypes(), first.getShards(), name);
    wait.replaceAllUsesWith(carried.getResults());
    wait->erase();
    first->erase();
    return carried;
  }
};

} // namespace
