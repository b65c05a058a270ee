//===- InsertGathers.cpp - the zplan-insert-gathers pass ------------------===//
//
// Gives every sharded group one gather and one release per segment of its
// uses (see Passes.td for the policies). The decision is made on a simple
// memory model first — activations from LivenessAnalysis plus each segment's
// gathered bytes over [first use, last use], the model Liveness.h's
// liveBytesWithCopies() shares with zplan-residency and zplan-recompute —
// and only then written into the IR, so that splitting a segment never has
// to undo IR. Tests:
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

struct InsertGathersPass : zplan::impl::InsertGathersBase<InsertGathersPass> {
  using InsertGathersBase::InsertGathersBase;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(placeGathers(func)))
        return signalPassFailure();
  }

  /// The copies this pass places: a sharded group's, gathered (not kept
  /// resident).
  static bool isPlaced(const GatheredCopy &copy) {
    return copy.group && !copy.resident;
  }

  /// Splits, at `index`, the segment that keeps the most bytes across a gap
  /// there, preferring a gap hooks cut too (`hookCuts[c]`: copy c's cuts
  /// under policy jit): while only those are split, no group is gathered
  /// more often than under jit, and when jit's segments fit the budget, one
  /// of them covers every op still over it. False when no segment has a gap
  /// over `index`.
  static bool splitAt(std::vector<GatheredCopy> &copies,
                      ArrayRef<std::vector<size_t>> hookCuts, int64_t index) {
    GatheredCopy *best = nullptr;
    size_t bestCut = 0;
    bool bestIsHookCut = false;
    for (auto [copy, hooks] : llvm::zip_equal(copies, hookCuts)) {
      if (!isPlaced(copy))
        continue;
      for (size_t k = 0; k < copy.numSegments(); ++k)
        for (size_t u = copy.cuts[k] + 1; u < copy.cuts[k + 1]; ++u) {
          if (copy.reads[u - 1].last >= index || index >= copy.reads[u].first)
            continue;
          bool isHookCut = llvm::is_contained(hooks, u);
          if (!best || (isHookCut && !bestIsHookCut) ||
              (isHookCut == bestIsHookCut && copy.bytes > best->bytes)) {
            best = &copy;
            bestCut = u;
            bestIsHookCut = isHookCut;
          }
        }
    }
    if (!best)
      return false;
    best->cuts.insert(llvm::upper_bound(best->cuts, bestCut), bestCut);
    return true;
  }

  LogicalResult placeGathers(func::FuncOp func) {
    LivenessAnalysis live(func);
    std::vector<GatheredCopy> copies = collectGatheredCopies(live);
    std::vector<std::vector<size_t>> hookCuts;
    for (size_t c = 0; c < copies.size(); ++c)
      hookCuts.push_back(cutsLikeHooks(copies, c));
    // jit: a new segment wherever another group is read in between.
    if (policy == SchedulePolicy::Jit)
      for (auto [copy, hooks] : llvm::zip_equal(copies, hookCuts))
        if (isPlaced(copy))
          copy.cuts = hooks;

    if (memoryBudget > 0) {
      uint64_t budget = static_cast<uint64_t>(memoryBudget);
      while (true) {
        std::vector<uint64_t> bytes = liveBytesWithCopies(live, copies);
        int64_t peak = 0;
        for (size_t i = 1; i < bytes.size(); ++i)
          if (bytes[i] > bytes[peak])
            peak = i;
        if (bytes.empty() || live.residentBytes() + bytes[peak] <= budget)
          break;
        // Split at the op furthest over budget; with every gap over it
        // split, nothing more can be done there.
        if (!splitAt(copies, hookCuts, peak))
          return reportOverBudget(live, copies, peak, bytes[peak], budget);
      }
    }
    rewrite(copies);
    return success();
  }

  LogicalResult reportOverBudget(const LivenessAnalysis &live,
                                 ArrayRef<GatheredCopy> copies, int64_t index,
                                 uint64_t transient, uint64_t budget) {
    SmallVector<std::pair<std::string, uint64_t>> buffers;
    for (const LivenessAnalysis::Buffer &buffer : live.buffers())
      if (buffer.kind != LivenessAnalysis::BufferKind::Gathered &&
          buffer.start <= index && index <= buffer.end)
        buffers.push_back({describeValue(buffer.value), buffer.bytes});
    for (const GatheredCopy &copy : copies) {
      if (!isPlaced(copy))
        continue;
      for (size_t k = 0; k < copy.numSegments(); ++k)
        if (copy.segmentFirst(k) <= index && index <= copy.segmentLast(k))
          buffers.push_back({"gathered group @" +
                                 zero::GroupOp(copy.group).getSymName().str(),
                             copy.bytes});
    }
    return emitOverBudget(live.ops()[index], index, budget,
                          live.residentBytes(), transient, buffers,
                          "even with every gathered copy released between "
                          "uses and gathered just in time");
  }

  void rewrite(ArrayRef<GatheredCopy> copies) {
    for (const GatheredCopy &copy : copies) {
      if (!isPlaced(copy))
        continue;
      auto oldWait = llvm::cast<zero::GatherWaitOp>(copy.source);
      zero::GatherStartOp oldStart = oldWait.getStart();
      LLVM_DEBUG(llvm::dbgs() << "@" << zero::GroupOp(copy.group).getSymName()
                              << ": " << copy.numSegments() << " segment(s)\n");
      for (size_t k = 0; k < copy.numSegments(); ++k) {
        const CopyRead &firstRead = copy.reads[copy.cuts[k]];
        Operation *firstOp = firstRead.operands.front()->getOwner();
        for (OpOperand *operand : firstRead.operands)
          if (operand->getOwner()->isBeforeInBlock(firstOp))
            firstOp = operand->getOwner();
        OpBuilder builder(firstOp);
        auto start = builder.create<zero::GatherStartOp>(
            oldStart.getLoc(), oldStart.getToken().getType(),
            oldStart.getShards(), oldStart.getGroupAttr());
        auto wait = builder.create<zero::GatherWaitOp>(
            oldWait.getLoc(), oldWait.getResultTypes(), start);
        // Redirect this segment's reads and find its last one.
        Operation *lastOp = firstOp;
        for (size_t u = copy.cuts[k]; u < copy.cuts[k + 1]; ++u)
          for (OpOperand *operand : copy.reads[u].operands) {
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
        builder.create<zero::ReleaseOp>(oldWait.getLoc(), wait.getResults());
      }
      oldWait->erase();
      oldStart->erase();
    }
  }
};

} // namespace
