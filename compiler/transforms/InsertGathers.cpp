//===- InsertGathers.cpp - the zplan-insert-gathers pass ------------------===//
//
// Gives every sharded group one gather and one release per segment of its
// uses (see Passes.td for the policies). The decision is made on a simple
// memory model first — activations from LivenessAnalysis plus each segment's
// gathered bytes over [first use, last use] — and only then written into the
// IR, so that splitting a segment never has to undo IR. Tests:
// test/transforms/insert-gathers.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/Liveness.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/ScheduleDiagnostics.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/IR/Builders.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "zplan-insert-gathers"

namespace zplan {
#define GEN_PASS_DEF_INSERTGATHERS
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

/// Ops that read a group's tensors directly, with how far their reads reach
/// through views (a reshape of a weight and its readers stay together).
struct UseUnit {
  int64_t first;
  int64_t last;
  /// (op, operand number) pairs to redirect to the segment's gather.
  SmallVector<OpOperand *> operands;
};

struct GroupUses {
  zero::GatherStartOp start;
  zero::GatherWaitOp wait;
  zero::GroupOp group;
  uint64_t bytes;
  std::vector<UseUnit> units;
  /// Segment boundaries: segment k holds units [cuts[k], cuts[k+1]).
  std::vector<size_t> cuts;

  size_t numSegments() const { return cuts.size() - 1; }
  int64_t segmentFirst(size_t k) const { return units[cuts[k]].first; }
  int64_t segmentLast(size_t k) const {
    int64_t last = 0;
    for (size_t u = cuts[k]; u < cuts[k + 1]; ++u)
      last = std::max(last, units[u].last);
    return last;
  }
};

struct InsertGathersPass : zplan::impl::InsertGathersBase<InsertGathersPass> {
  using InsertGathersBase::InsertGathersBase;

  void runOnOperation() override {
    if (policy != "default" && policy != "jit") {
      getOperation().emitError() << "zplan-insert-gathers: unknown policy '"
                                 << policy << "' (expected default or jit)";
      return signalPassFailure();
    }
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(placeGathers(func)))
        return signalPassFailure();
  }

  /// The units of each sharded group's gather, in program order.
  static std::vector<GroupUses> collectGroupUses(func::FuncOp func,
                                                 const LivenessAnalysis &live) {
    std::vector<GroupUses> groups;
    for (auto wait : func.getOps<zero::GatherWaitOp>()) {
      zero::GatherStartOp start = wait.getStart();
      auto group = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
          start, start.getGroupAttr());
      if (!group || group.getPersistent())
        continue;
      GroupUses uses{start, wait, group, groupBytes(group), {}, {}};
      for (Value tensor : wait.getTensors())
        for (OpOperand &operand : tensor.getUses()) {
          Operation *user = operand.getOwner();
          int64_t index = live.indexOf(user), last = index;
          for (Value result : user->getResults())
            if (llvm::isa<nn::ReshapeOp>(user))
              for (Operation *reader : collectUsesThroughViews(result))
                last = std::max(last, live.indexOf(reader));
          uses.units.push_back({index, last, {&operand}});
        }
      llvm::sort(uses.units, [](const UseUnit &a, const UseUnit &b) {
        return a.first < b.first;
      });
      // Units whose reads overlap are one unit.
      std::vector<UseUnit> merged;
      for (UseUnit &unit : uses.units) {
        if (!merged.empty() && unit.first <= merged.back().last) {
          merged.back().last = std::max(merged.back().last, unit.last);
          llvm::append_range(merged.back().operands, unit.operands);
        } else {
          merged.push_back(unit);
        }
      }
      uses.units = std::move(merged);
      if (uses.units.empty())
        continue;
      uses.cuts = {0, uses.units.size()};
      groups.push_back(std::move(uses));
    }
    return groups;
  }

  /// jit: a new segment wherever another group is read in between.
  static void splitLikeHooks(std::vector<GroupUses> &groups) {
    for (GroupUses &mine : groups) {
      std::vector<size_t> cuts{0};
      for (size_t u = 1; u < mine.units.size(); ++u) {
        int64_t gapStart = mine.units[u - 1].last, gapEnd = mine.units[u].first;
        bool otherInBetween = llvm::any_of(groups, [&](const GroupUses &other) {
          return &other != &mine &&
                 llvm::any_of(other.units, [&](const UseUnit &unit) {
                   return unit.first > gapStart && unit.first < gapEnd;
                 });
        });
        if (otherInBetween)
          cuts.push_back(u);
      }
      cuts.push_back(mine.units.size());
      mine.cuts = cuts;
    }
  }

  /// Live bytes per op: activations and inputs, plus every segment's copy.
  static std::vector<uint64_t> modelLiveBytes(const LivenessAnalysis &live,
                                              ArrayRef<GroupUses> groups) {
    // Difference array: +bytes where a buffer starts, -bytes after its end.
    std::vector<uint64_t> bytes(live.ops().size() + 1, 0);
    auto add = [&](int64_t first, int64_t last, uint64_t size) {
      bytes[first] += size;
      bytes[last + 1] -= size;
    };
    for (const LivenessAnalysis::Buffer &buffer : live.buffers())
      if (buffer.kind != LivenessAnalysis::BufferKind::Gathered)
        add(buffer.start, buffer.end, buffer.bytes);
    // The copy exists from its start, placed right before the first use, to
    // its release, right after the last. Counting it from the first use is
    // exact: what is live at the inserted start and wait (buffers crossing
    // into the first use, other copies not yet released) is a subset of what
    // is live at the first use, and likewise at the release. Counting it
    // from the op before would charge it where an activation dies, and
    // refuse (or split for) schedules that fit.
    for (const GroupUses &group : groups)
      for (size_t k = 0; k < group.numSegments(); ++k)
        add(group.segmentFirst(k), group.segmentLast(k), group.bytes);
    for (size_t i = 1; i < bytes.size(); ++i)
      bytes[i] += bytes[i - 1];
    bytes.pop_back();
    return bytes;
  }

  /// Splits, at `index`, the segment that keeps the most bytes across a gap
  /// there. False when no segment has a gap over `index`.
  static bool splitAt(std::vector<GroupUses> &groups, int64_t index) {
    GroupUses *best = nullptr;
    size_t bestCut = 0;
    for (GroupUses &group : groups) {
      for (size_t k = 0; k < group.numSegments(); ++k)
        for (size_t u = group.cuts[k] + 1; u < group.cuts[k + 1]; ++u)
          if (group.units[u - 1].last < index && index < group.units[u].first &&
              (!best || group.bytes > best->bytes)) {
            best = &group;
            bestCut = u;
          }
    }
    if (!best)
      return false;
    best->cuts.insert(llvm::upper_bound(best->cuts, bestCut), bestCut);
    return true;
  }

  LogicalResult placeGathers(func::FuncOp func) {
    LivenessAnalysis live(func);
    std::vector<GroupUses> groups = collectGroupUses(func, live);
    if (policy == "jit")
      splitLikeHooks(groups);

    if (memoryBudget > 0) {
      uint64_t budget = static_cast<uint64_t>(memoryBudget);
      while (true) {
        std::vector<uint64_t> bytes = modelLiveBytes(live, groups);
        int64_t peak = 0;
        for (size_t i = 1; i < bytes.size(); ++i)
          if (bytes[i] > bytes[peak])
            peak = i;
        if (bytes.empty() || live.residentBytes() + bytes[peak] <= budget)
          break;
        // Split at the op furthest over budget; with every gap over it
        // split, nothing more can be done there.
        if (!splitAt(groups, peak))
          return reportOverBudget(func, live, groups, peak, bytes[peak],
                                  budget);
      }
    }
    rewrite(groups);
    return success();
  }

  LogicalResult reportOverBudget(func::FuncOp func,
                                 const LivenessAnalysis &live,
                                 ArrayRef<GroupUses> groups, int64_t index,
                                 uint64_t transient, uint64_t budget) {
    SmallVector<std::pair<std::string, uint64_t>> buffers;
    for (const LivenessAnalysis::Buffer &buffer : live.buffers())
      if (buffer.kind != LivenessAnalysis::BufferKind::Gathered &&
          buffer.start <= index && index <= buffer.end)
        buffers.push_back({describeValue(buffer.value), buffer.bytes});
    for (const GroupUses &group : groups)
      for (size_t k = 0; k < group.numSegments(); ++k)
        if (group.segmentFirst(k) <= index && index <= group.segmentLast(k))
          buffers.push_back({"gathered group @" +
                                 zero::GroupOp(group.group).getSymName().str(),
                             group.bytes});
    return emitOverBudget(live.ops()[index], index, budget,
                          live.residentBytes(), transient, buffers,
                          "even with every gathered copy released between "
                          "uses and gathered just in time");
  }

  void rewrite(std::vector<GroupUses> &groups) {
    for (GroupUses &group : groups) {
      LLVM_DEBUG(llvm::dbgs() << "@" << group.group.getSymName() << ": "
                              << group.numSegments() << " segment(s)\n");
      for (size_t k = 0; k < group.numSegments(); ++k) {
        const UseUnit &firstUnit = group.units[group.cuts[k]];
        Operation *firstOp = firstUnit.operands.front()->getOwner();
        for (OpOperand *operand : firstUnit.operands)
          if (operand->getOwner()->isBeforeInBlock(firstOp))
            firstOp = operand->getOwner();
        OpBuilder builder(firstOp);
        auto start = builder.create<zero::GatherStartOp>(
            group.start.getLoc(), group.start.getToken().getType(),
            group.start.getShards(), group.start.getGroupAttr());
        auto wait = builder.create<zero::GatherWaitOp>(
            group.wait.getLoc(), group.wait.getResultTypes(), start);
        // Redirect this segment's reads and find its last one.
        Operation *lastOp = firstOp;
        for (size_t u = group.cuts[k]; u < group.cuts[k + 1]; ++u)
          for (OpOperand *operand : group.units[u].operands) {
            unsigned index =
                llvm::cast<OpResult>(operand->get()).getResultNumber();
            operand->set(wait.getResult(index));
            for (Operation *reader :
                 collectUsesThroughViews(wait.getResult(index)))
              if (lastOp->isBeforeInBlock(reader))
                lastOp = reader;
          }
        if (llvm::isa<func::ReturnOp>(lastOp))
          continue; // Returned parameters outlive the program.
        builder.setInsertionPointAfter(lastOp);
        builder.create<zero::ReleaseOp>(group.wait.getLoc(), wait.getResults());
      }
      group.wait->erase();
      group.start->erase();
    }
  }
};

} // namespace
