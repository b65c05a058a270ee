//===- VerifySchedule.cpp - the zplan-verify-schedule pass ----------------===//
//
// The whole-program half of the safety argument (the op verifiers in
// ZeroOps.cpp are the local half). Runs at the end of every zcc pipeline,
// so a plan that reaches zrun cannot read a partitioned or released
// parameter, leak a gathered copy, exceed its budget, or make ranks issue
// different collectives. The numbered rules are in Passes.td. Tests:
// test/transforms/verify-schedule.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/Liveness.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/Programs.h"
#include "compiler/transforms/ScheduleDiagnostics.h"
#include "compiler/transforms/VerifyProgramBoundaries.h"
#include "dialects/zero/ZeroDialect.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "zplan-verify-schedule"

namespace zplan {
#define GEN_PASS_DEF_VERIFYSCHEDULE
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

/// "parameter 'h.0.w' of group @group3", for messages about one copy.
static std::string describeGathered(zero::GatherWaitOp wait, Value tensor) {
  std::string text = describeValue(tensor);
  if (auto start = wait.getStart())
    if (auto group = start.getGroupAttr())
      text += " of group @" + group.getValue().str();
  return text;
}

struct VerifySchedulePass
    : zplan::impl::VerifyScheduleBase<VerifySchedulePass> {
  using VerifyScheduleBase::VerifyScheduleBase;

  void runOnOperation() override {
    // Rule 22 first and rules 20-21 last (VerifyProgramBoundaries.h): each
    // names the violation where it is clearest.
    if (failed(verifyGatheredReads(getOperation())) ||
        failed(verifyResidency(getOperation())))
      return signalPassFailure();
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(verifyFunction(func)))
        return signalPassFailure();
    if (failed(verifyProgramBoundaries(getOperation())))
      return signalPassFailure();
  }

  // Rules 10-12: a resident copy lives from @generate_begin to
  // @generate_end, which the runtime runs first and last; inside, only
  // @prefill and @decode read it, and nothing releases it early. So no
  // program can read a copy that is not gathered, or was released.
  LogicalResult verifyResidency(ModuleOp module) {
    llvm::StringMap<zero::ResidentGatherOp> gathered;
    llvm::StringMap<zero::ResidentReleaseOp> released;
    for (auto func : module.getOps<func::FuncOp>()) {
      StringRef name = func.getSymName();
      bool isBegin = name == kGenerateBeginName,
           isEnd = name == kGenerateEndName;
      bool reads = name == kPrefillName || name == kDecodeName;
      WalkResult walk = func.walk([&](Operation *op) {
        if (auto gather = llvm::dyn_cast<zero::ResidentGatherOp>(op)) {
          if (!isBegin) {
            gather.emitError()
                << "gathers resident group " << gather.getGroupAttr() << " in @"
                << name << "; only @" << kGenerateBeginName << " may";
            return WalkResult::interrupt();
          }
          if (!gathered.try_emplace(gather.getGroup(), gather).second) {
            gather.emitError() << "gathers resident group "
                               << gather.getGroupAttr() << " a second time";
            return WalkResult::interrupt();
          }
        } else if (auto release = llvm::dyn_cast<zero::ResidentReleaseOp>(op)) {
          if (!isEnd) {
            release.emitError()
                << "releases resident group " << release.getGroupAttr()
                << " in @" << name << "; only @" << kGenerateEndName
                << " may (a later program would read a "
                   "released copy)";
            return WalkResult::interrupt();
          }
          if (!released.try_emplace(release.getGroup(), release).second) {
            release.emitError() << "releases resident group "
                                << release.getGroupAttr() << " a second time";
            return WalkResult::interrupt();
          }
        } else if (auto read = llvm::dyn_cast<zero::ResidentReadOp>(op)) {
          if (!reads) {
            read.emitError() << "reads resident group " << read.getGroupAttr()
                             << " in @" << name << "; only @" << kPrefillName
                             << " and @" << kDecodeName << " may";
            return WalkResult::interrupt();
          }
          // A zero.release of its tensors is refused by the release's own
          // verifier (it releases only zero.gather_wait results).
        } else if (auto start = llvm::dyn_cast<zero::GatherStartOp>(op)) {
          auto group =
              start.getGroupAttr()
                  ? SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
                        start, start.getGroupAttr())
                  : zero::GroupOp();
          // Training programs (train,generate) run outside the generation
          // window, where no resident copy exists: they gather their own.
          if (group && group.getResident() && (reads || isBegin || isEnd)) {
            start.emitError()
                << "gathers resident group " << start.getGroupAttr() << " in @"
                << name << ": its copy is gathered once in @"
                << kGenerateBeginName << " and read with zero.resident_read";
            return WalkResult::interrupt();
          }
        }
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return failure();
    }
    for (auto group : module.getOps<zero::GroupOp>()) {
      if (!group.getResident())
        continue;
      StringRef name = group.getSymName();
      if (!gathered.count(name))
        return group.emitError()
               << "resident group @" << name << " is never gathered in @"
               << kGenerateBeginName;
      if (!released.count(name))
        return group.emitError()
               << "resident group @" << name << " is never released in @"
               << kGenerateEndName;
    }
    return success();
  }

  LogicalResult verifyFunction(func::FuncOp func) {
    // Rule 6: one block, and no op that could send ranks different ways.
    if (!func.getBody().hasOneBlock())
      return func.emitError("a scheduled function must be one straight-line "
                            "block (the collective sequence must not depend "
                            "on the rank)");
    for (Operation &op : func.getBody().front()) {
      if (op.getNumRegions() > 0)
        return op.emitError("ops with regions are not allowed in a scheduled "
                            "function: they could make the collective "
                            "sequence depend on the rank");
      // Rule 1: shards flow only into gathers (gradient shards: rule 8).
      if (!llvm::isa<zero::GatherStartOp, zero::ResidentReadOp,
                     zero::ReduceScatterWaitOp>(op))
        for (Value operand : op.getOperands())
          if (llvm::isa<zero::ShardType>(operand.getType()) &&
              !operand.getDefiningOp<zero::GradShardOp>())
            return op.emitError()
                   << "reads " << describeShard(operand)
                   << " without gathering it: only zero.gather_start may "
                      "consume a parameter shard";
      if (auto start = llvm::dyn_cast<zero::GatherStartOp>(op))
        for (Value shard : start.getShards())
          if (auto read = shard.getDefiningOp<zero::GradShardOp>())
            return op.emitError()
                   << "gathers the gradient shard of parameter '"
                   << read.getParam() << "' as if it were the parameter";
    }
    for (auto start : func.getOps<zero::GatherStartOp>())
      if (failed(verifyGather(start)))
        return failure();
    for (auto start : func.getOps<zero::ReduceScatterStartOp>())
      if (failed(verifyReduceScatter(start)))
        return failure();
    for (auto read : func.getOps<zero::GradShardOp>())
      if (failed(verifyGradientRead(read)))
        return failure();
    if (func.getSymName() == kOptimizerStepName &&
        failed(verifyOptimizerStep(func)))
      return failure();
    return verifyBudget(func);
  }

  // Rule 7: one reduce-scatter per group, waited for in the same function.
  LogicalResult verifyReduceScatter(zero::ReduceScatterStartOp start) {
    auto groupName = start.getGroupAttr();
    if (!groupName)
      return start.emitError("reduces gradients outside any zero.group (run "
                             "zplan-shard-parameters first)");
    auto group =
        SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(start, groupName);
    if (!group || group.getParams().size() != start.getGradients().size())
      return start.emitError()
             << "must reduce exactly the gradients of group " << groupName;
    auto wait = llvm::cast<zero::ReduceScatterWaitOp>(
        *start.getToken().getUsers().begin());
    if (!start->isBeforeInBlock(wait))
      return wait.emitError() << "waits for the reduce-scatter of group "
                              << groupName << " before it starts";
    if (wait.getAccumulators().size() != group.getParams().size())
      return wait.emitError()
             << "must accumulate the reduce-scatter of group " << groupName
             << " into the gradient shards of its "
                "parameters";
    for (auto [accumulator, param] :
         llvm::zip_equal(wait.getAccumulators(), group.getParams())) {
      auto read = accumulator.getDefiningOp<zero::GradShardOp>();
      if (!read || read.getParamAttr() != param)
        return wait.emitError()
               << "accumulates group " << groupName << " into "
               << (read
                       ? "the gradient shard of '" + read.getParam().str() + "'"
                       : std::string("a value that is not a zero.grad_shard"))
               << " where " << param << " belongs";
    }
    return success();
  }

  // Rule 8: a gradient shard is read only by the reduce-scatter wait that
  // accumulates into it (which completes the collective before touching
  // it); anything else would read a partial sum.
  LogicalResult verifyGradientRead(zero::GradShardOp read) {
    for (Operation *user : read->getUsers())
      if (!llvm::isa<zero::ReduceScatterWaitOp>(user))
        return user->emitError()
               << "reads the gradient shard of parameter '" << read.getParam()
               << "': only zero.reduce_scatter_wait may accumulate into it, "
                  "and only the optimizer step reads it";
    return success();
  }

  // Rule 9: the optimizer step touches shards only: nothing in it gathers,
  // computes on tensors or communicates; it updates each group once.
  LogicalResult verifyOptimizerStep(func::FuncOp func) {
    llvm::StringSet<> updated;
    for (Operation &op : func.getBody().front()) {
      if (llvm::isa<func::ReturnOp>(op))
        continue;
      auto update = llvm::dyn_cast<zero::OptimizerUpdateOp>(op);
      if (!update)
        return op.emitError()
               << "'" << op.getName() << "' in @" << kOptimizerStepName
               << ": the optimizer step may only update shards "
                  "(zero.optimizer_update), never gather or compute on "
                  "parameters";
      if (!updated.insert(update.getGroup()).second)
        return update.emitError()
               << "updates group @" << update.getGroup() << " a second time";
    }
    for (auto group : func->getParentOfType<ModuleOp>().getOps<zero::GroupOp>())
      if (!updated.contains(group.getSymName()))
        return func.emitError()
               << "@" << kOptimizerStepName << " never updates group @"
               << group.getSymName();
    return success();
  }

  static std::string describeShard(Value shard) {
    if (auto read = shard.getDefiningOp<zero::ShardOp>())
      return "the shard of parameter '" + read.getParam().str() + "'";
    return "a parameter shard";
  }

  LogicalResult verifyGather(zero::GatherStartOp start) {
    // Rule 2.
    auto groupName = start.getGroupAttr();
    if (!groupName)
      return start.emitError("gathers shards outside any zero.group (run "
                             "zplan-shard-parameters first)");
    auto group =
        SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(start, groupName);
    auto wait =
        llvm::cast<zero::GatherWaitOp>(*start.getToken().getUsers().begin());
    if (!start->isBeforeInBlock(wait))
      return wait.emitError()
             << "waits for group " << groupName << " before its gather_start";

    // Rule 4: released exactly once, as a whole group.
    SmallVector<zero::ReleaseOp> releases;
    for (Value tensor : wait.getTensors())
      for (Operation *user : tensor.getUsers())
        if (auto release = llvm::dyn_cast<zero::ReleaseOp>(user))
          if (!llvm::is_contained(releases, release))
            releases.push_back(release);
    // Use lists are in no useful order (newest first): report the releases
    // as the program meets them.
    llvm::sort(releases, [](zero::ReleaseOp a, zero::ReleaseOp b) {
      return a->isBeforeInBlock(b);
    });
    if (group.getPersistent()) {
      if (!releases.empty())
        return releases.front().emitError()
               << "releases persistent group " << groupName
               << ", which must stay gathered";
      return success();
    }
    if (releases.empty())
      return wait.emitError()
             << "the gathered copy of group " << groupName << " ("
             << describeValue(wait.getTensors().front())
             << (wait.getTensors().size() > 1 ? ", ..." : "")
             << ") is never released";
    // Each release first, so that a copy released in two halves is reported
    // as partial, not as released twice.
    for (zero::ReleaseOp release : releases) {
      size_t covered = llvm::count_if(wait.getTensors(), [&](Value tensor) {
        return llvm::is_contained(release.getTensors(), tensor);
      });
      if (covered != wait.getTensors().size() ||
          release.getTensors().size() != covered)
        return release.emitError()
               << "must release the whole gathered copy of group " << groupName
               << " (" << wait.getTensors().size()
               << " tensors) at once, and nothing else; it releases " << covered
               << " of them and " << release.getTensors().size() - covered
               << " other tensors";
    }
    if (releases.size() > 1)
      return releases[1].emitError() << "releases the gathered copy of group "
                                     << groupName << " a second time";
    zero::ReleaseOp release = releases.front();

    // Rule 3: nothing reads the copy, or a view of it, after the release.
    for (Value tensor : wait.getTensors())
      for (Operation *reader : collectUsesThroughViews(tensor)) {
        if (reader == release.getOperation())
          continue;
        if (release->isBeforeInBlock(reader))
          return reader->emitError()
                 << "reads " << describeGathered(wait, tensor)
                 << " after its release";
      }
    return success();
  }

  // Rule 5.
  LogicalResult verifyBudget(func::FuncOp func) {
    if (memoryBudget <= 0)
      return success();
    uint64_t budget = static_cast<uint64_t>(memoryBudget);
    LivenessAnalysis live(func);
    auto [index, transient] = live.peak();
    if (live.ops().empty() || live.residentBytes() + transient <= budget)
      return success();
    SmallVector<std::pair<std::string, uint64_t>> buffers;
    for (const LivenessAnalysis::Buffer *buffer : live.liveAt(index))
      buffers.push_back(
          {buffer->group ? "gathered group @" +
                               zero::GroupOp(buffer->group).getSymName().str()
                         : describeValue(buffer->value),
           buffer->bytes});
    return emitOverBudget(live.ops()[index], index, budget,
                          live.residentBytes(), transient, buffers,
                          "in the schedule as placed");
  }
};

} // namespace
