//===- VerifySchedule.cpp - the zplan-verify-schedule pass ----------------===//
//
// The whole-program half of the safety argument (the op verifiers in
// ZeroOps.cpp are the local half). Runs at the end of every zcc pipeline,
// so a plan that reaches zrun cannot read a partitioned or released
// parameter, leak a gathered copy, exceed its budget, or make ranks issue
// different collectives. The numbered rules are in Passes.td. Tests:
// test/transforms/verify-schedule*.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/Liveness.h"
#include "compiler/analysis/Lockstep.h"
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
static std::string describeGathered(Value tensor, FlatSymbolRefAttr group) {
  std::string text = describeValue(tensor);
  if (group)
    text += " of group @" + group.getValue().str();
  return text;
}

struct VerifySchedulePass
    : zplan::impl::VerifyScheduleBase<VerifySchedulePass> {
  using VerifyScheduleBase::VerifyScheduleBase;

  void runOnOperation() override {
    // Rule 22 first, then rules 20-21 (VerifyProgramBoundaries.h) and 18
    // last: each names the violation where it is clearest.
    if (failed(verifyGatheredReads(getOperation())) ||
        failed(verifyResidency(getOperation())) ||
        failed(verifyCarry(getOperation())))
      return signalPassFailure();
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(verifyFunction(func)))
        return signalPassFailure();
    if (failed(verifyProgramBoundaries(getOperation())) ||
        failed(verifyLockstep(getOperation())))
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

  // Rule 18: @decode runs as often as each rank's rows need, so its
  // collectives are the same on every rank only when the ranks agree on
  // when to stop (Lockstep.h).
  LogicalResult verifyLockstep(ModuleOp module) {
    auto decode = module.lookupSymbol<func::FuncOp>(kDecodeName);
    if (!decode)
      return success();
    if (auto period =
            decode->getAttrOfType<IntegerAttr>(kLockstepPeriodAttrName);
        period && period.getInt() < 1)
      return decode.emitError()
             << "@" << kDecodeName << " has " << kLockstepPeriodAttrName
             << " = " << period.getInt() << "; a period is at least 1";
    Operation *collective = firstCollective(decode);
    if (!collective || lockstepPeriodOf(decode) >= 1 ||
        worldSizeOf(module) == 1)
      return success();
    return collective->emitError()
           << "is a collective in @" << kDecodeName
           << ", which each rank runs until its own rows finish: the "
              "collective count depends on the rank's data, and a rank "
              "whose rows finished first would leave the others waiting "
              "here; @"
           << kDecodeName << " needs " << kLockstepPeriodAttrName
           << " (zplan-decode-lockstep) so that the ranks agree on when to "
              "stop";
  }

  // Rules 13-17: cross-step prefetch (docs/generation.md section 6). The
  // runtime runs prefill, then decode per token, then generate_end; each
  // of prefill and decode leaves one carried gather that the next decode
  // completes, or generate_end drains. So every decode finds exactly one
  // carried copy, and none outlives the generation.
  LogicalResult verifyCarry(ModuleOp module) {
    SmallVector<zero::CarryStartOp> starts;
    SmallVector<zero::CarryWaitOp> waits;
    SmallVector<zero::CarryDrainOp> drains;
    // Rule 13: each carry op in its program.
    for (auto func : module.getOps<func::FuncOp>()) {
      StringRef name = func.getSymName();
      WalkResult walk = func.walk([&](Operation *op) {
        if (auto start = llvm::dyn_cast<zero::CarryStartOp>(op)) {
          if (name != kPrefillName && name != kDecodeName) {
            start.emitError()
                << "starts a carried gather of group " << start.getGroupAttr()
                << " in @" << name << "; only @" << kPrefillName << " and @"
                << kDecodeName << " may (a @" << kDecodeName << " must follow)";
            return WalkResult::interrupt();
          }
          starts.push_back(start);
        } else if (auto wait = llvm::dyn_cast<zero::CarryWaitOp>(op)) {
          if (name != kDecodeName) {
            wait.emitError()
                << "completes a carried gather of group " << wait.getGroupAttr()
                << " in @" << name << "; only @" << kDecodeName << " may";
            return WalkResult::interrupt();
          }
          waits.push_back(wait);
        } else if (auto drain = llvm::dyn_cast<zero::CarryDrainOp>(op)) {
          if (name != kGenerateEndName) {
            drain.emitError()
                << "drains the carried gather of group " << drain.getGroupAttr()
                << " in @" << name << "; only @" << kGenerateEndName << " may";
            return WalkResult::interrupt();
          }
          drains.push_back(drain);
        }
        return WalkResult::advance();
      });
      if (walk.wasInterrupted())
        return failure();
    }
    if (starts.empty() && waits.empty() && drains.empty())
      return success();

    // Rule 14: one carried group; one start in each of @prefill and
    // @decode, one wait in @decode, one drain in @generate_end.
    FlatSymbolRefAttr group = !waits.empty()    ? waits.front().getGroupAttr()
                              : !starts.empty() ? starts.front().getGroupAttr()
                                                : drains.front().getGroupAttr();
    auto sameGroup = [&](Operation *op, FlatSymbolRefAttr name) {
      if (name == group)
        return success();
      return LogicalResult(op->emitError()
                           << "carries group " << name << " but the module "
                           << "carries group " << group
                           << " (one carried group per generation)");
    };
    for (auto start : starts)
      if (failed(sameGroup(start, start.getGroupAttr())))
        return failure();
    for (auto wait : waits)
      if (failed(sameGroup(wait, wait.getGroupAttr())))
        return failure();
    for (auto drain : drains)
      if (failed(sameGroup(drain, drain.getGroupAttr())))
        return failure();
    auto decode = module.lookupSymbol<func::FuncOp>(kDecodeName);
    auto exactlyOne = [&](auto ops, StringRef function, StringRef what,
                          StringRef why) -> LogicalResult {
      size_t count = llvm::count_if(ops, [&](auto op) {
        return op->template getParentOfType<func::FuncOp>().getSymName() ==
               function;
      });
      if (count == 1)
        return success();
      Operation *anchor = module.lookupSymbol(function);
      if (!anchor)
        anchor = module;
      return anchor->emitError() << "@" << function << " must hold exactly one "
                                 << what << " of carried group " << group
                                 << " (it holds " << count << "): " << why;
    };
    if (failed(exactlyOne(starts, kPrefillName, "zero.carry_start",
                          "the first @decode completes it")) ||
        failed(exactlyOne(starts, kDecodeName, "zero.carry_start",
                          "the next @decode completes it")) ||
        failed(exactlyOne(waits, kDecodeName, "zero.carry_wait",
                          "each @decode completes the previous program's "
                          "carried gather once")) ||
        failed(exactlyOne(drains, kGenerateEndName, "zero.carry_drain",
                          "the last program's carried gather must end with "
                          "the generation")))
      return failure();

    // Rule 16: the carry is last on its program's comm queue (the runtime
    // lets the program end with it in flight).
    for (auto start : starts)
      for (Operation *op = start->getNextNode(); op; op = op->getNextNode())
        if (llvm::isa<zero::GatherStartOp, zero::ReduceScatterStartOp>(op))
          return op->emitError()
                 << "starts a collective after the carried gather of group "
                 << group << ": the carried gather must be the last on the "
                 << "comm queue of @"
                 << start->getParentOfType<func::FuncOp>().getSymName();

    zero::CarryWaitOp wait = waits.front();
    // Rule 15: in @decode, the carry_wait is the group's first gather.
    for (auto start : decode.getOps<zero::GatherStartOp>())
      if (start.getGroupAttr() == group && start->isBeforeInBlock(wait))
        return start.emitError()
               << "gathers carried group " << group << " before its "
               << "zero.carry_wait in @" << kDecodeName
               << ": the carried copy is the token's first";
    // Rule 17: in @decode the next carried gather writes the bytes this
    // token's copy occupies: it starts after the copy's last reader.
    zero::CarryStartOp next = *llvm::find_if(starts, [&](auto start) {
      return start->template getParentOfType<func::FuncOp>() == decode;
    });
    if (next->isBeforeInBlock(wait))
      return next.emitError() << "starts the next carried gather of group "
                              << group << " before this token's "
                              << "zero.carry_wait";
    for (Value tensor : wait.getTensors())
      for (Operation *reader : collectUsesThroughViews(tensor))
        if (next->isBeforeInBlock(reader))
          return next.emitError()
                 << "starts the next carried gather of group " << group
                 << " while " << describeGathered(tensor, group)
                 << " is still read (by " << describeOp(reader)
                 << "): it would overwrite the copy";
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
                     zero::CarryStartOp, zero::CarryWaitOp,
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
    for (auto wait : func.getOps<zero::CarryWaitOp>())
      if (failed(verifyReleases(
              wait, wait.getTensors(), wait.getGroupAttr(),
              SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
                  wait, wait.getGroupAttr()))))
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
  // computes on tensors or communicates; it updates each group that is not
  // frozen once (a frozen group never: zero.optimizer_update refuses one).
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
      if (!group.getFrozen() && !updated.contains(group.getSymName()))
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
    return verifyReleases(wait, wait.getTensors(), groupName, group);
  }

  /// Rules 3 and 4 for one gathered copy: the results `tensors` of `wait`
  /// (a zero.gather_wait or zero.carry_wait of `group`).
  LogicalResult verifyReleases(Operation *wait, ValueRange tensors,
                               FlatSymbolRefAttr groupName,
                               zero::GroupOp group) {
    // Rule 4: released exactly once, as a whole group.
    SmallVector<zero::ReleaseOp> releases;
    for (Value tensor : tensors)
      for (Operation *user : tensor.getUsers())
        if (auto release = llvm::dyn_cast<zero::ReleaseOp>(user))
          if (!llvm::is_contained(releases, release))
            releases.push_back(release);
    // Use lists are in no useful order (newest first): report the releases
    // as the program meets them.
    llvm::sort(releases, [](zero::ReleaseOp a, zero::ReleaseOp b) {
      return a->isBeforeInBlock(b);
    });
    if (group && group.getPersistent()) {
      if (!releases.empty())
        return releases.front().emitError()
               << "releases persistent group " << groupName
               << ", which must stay gathered";
      return success();
    }
    if (releases.empty())
      return wait->emitError()
             << "the gathered copy of group " << groupName << " ("
             << describeValue(tensors.front())
             << (tensors.size() > 1 ? ", ..." : "") << ") is never released";
    // Each release first, so that a copy released in two halves is reported
    // as partial, not as released twice.
    for (zero::ReleaseOp release : releases) {
      size_t covered = llvm::count_if(tensors, [&](Value tensor) {
        return llvm::is_contained(release.getTensors(), tensor);
      });
      if (covered != tensors.size() || release.getTensors().size() != covered)
        return release.emitError()
               << "must release the whole gathered copy of group " << groupName
               << " (" << tensors.size()
               << " tensors) at once, and nothing else; it releases " << covered
               << " of them and " << release.getTensors().size() - covered
               << " other tensors";
    }
    if (releases.size() > 1)
      return releases[1].emitError() << "releases the gathered copy of group "
                                     << groupName << " a second time";
    zero::ReleaseOp release = releases.front();

    // Rule 3: nothing reads the copy, or a view of it, after the release.
    for (Value tensor : tensors)
      for (Operation *reader : collectUsesThroughViews(tensor)) {
        if (reader == release.getOperation())
          continue;
        if (release->isBeforeInBlock(reader))
          return reader->emitError()
                 << "reads " << describeGathered(tensor, groupName)
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
          {buffer->group
               ? (buffer->kind == LivenessAnalysis::BufferKind::Carried
                      ? "carried group @"
                      : "gathered group @") +
                     zero::GroupOp(buffer->group).getSymName().str()
               : describeValue(buffer->value),
           buffer->bytes});
    return emitOverBudget(live.ops()[index], index, budget,
                          live.residentBytes(), transient, buffers,
                          "in the schedule as placed");
  }
};

} // namespace
