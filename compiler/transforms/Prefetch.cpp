//===- Prefetch.cpp - the zplan-prefetch pass -----------------------------===//
//
// Moves each gather_start earlier so its collective runs on the comm queue
// while the compute queue works (see Passes.td for the rules). Each start is
// moved with the memory and in-flight picture of the program as it stands
// after the previous starts moved, so later decisions see earlier ones.
// Tests: test/transforms/prefetch.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/CostModel.h"
#include "compiler/analysis/Liveness.h"
#include "compiler/transforms/Passes.h"
#include "dialects/zero/ZeroDialect.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "zplan-prefetch"

namespace zplan {
#define GEN_PASS_DEF_PREFETCH
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

struct PrefetchPass : zplan::impl::PrefetchBase<PrefetchPass> {
  using PrefetchBase::PrefetchBase;

  void runOnOperation() override {
    if (policy != "default" && policy != "jit") {
      getOperation().emitError() << "zplan-prefetch: unknown policy '" << policy
                                 << "' (expected default or jit)";
      return signalPassFailure();
    }
    llvm::Expected<HardwareProfile> profile = getHardwareProfile(hardware);
    if (!profile) {
      getOperation().emitError()
          << "zplan-prefetch: " << llvm::toString(profile.takeError());
      return signalPassFailure();
    }
    CostModel cost(*profile);
    for (auto func : getOperation().getOps<func::FuncOp>())
      prefetchFunction(func, cost);
  }

  void prefetchFunction(func::FuncOp func, const CostModel &cost) {
    SmallVector<zero::GatherStartOp> starts;
    for (auto start : func.getOps<zero::GatherStartOp>()) {
      auto group = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
          start, start.getGroupAttr());
      if (group && !group.getPersistent())
        starts.push_back(start);
    }
    for (zero::GatherStartOp start : starts)
      hoist(start, cost);
  }

  /// Gathers (other than `self`) that a start placed right before op i
  /// would find in flight: started before i and waited for at i or later;
  /// and their bytes.
  static void inFlightAt(const LivenessAnalysis &live, Operation *self,
                         std::vector<int64_t> &count,
                         std::vector<uint64_t> &bytes) {
    size_t n = live.ops().size();
    count.assign(n + 2, 0);
    bytes.assign(n + 2, 0);
    for (const LivenessAnalysis::Buffer &buffer : live.buffers()) {
      if (buffer.kind != LivenessAnalysis::BufferKind::Gathered ||
          buffer.gatherStart == self)
        continue;
      int64_t first = buffer.start;
      int64_t waitIndex = first;
      for (Operation *user :
           zero::GatherStartOp(buffer.gatherStart).getToken().getUsers())
        waitIndex = live.indexOf(user);
      count[first + 1] += 1;
      count[waitIndex + 1] -= 1;
      bytes[first + 1] += buffer.bytes;
      bytes[waitIndex + 1] -= buffer.bytes;
    }
    for (size_t i = 1; i <= n; ++i) {
      count[i] += count[i - 1];
      bytes[i] += bytes[i - 1];
    }
  }

  void hoist(zero::GatherStartOp start, const CostModel &cost) {
    auto func = start->getParentOfType<func::FuncOp>();
    auto group = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(
        start, start.getGroupAttr());
    uint64_t bytes = groupBytes(group);
    double needed = cost.allGatherSeconds(bytes, group.getWorldSize());

    LivenessAnalysis live(func);
    std::vector<uint64_t> liveBytes = live.liveBytes();
    std::vector<int64_t> flightCount;
    std::vector<uint64_t> flightBytes;
    inFlightAt(live, start, flightCount, flightBytes);
    uint64_t limit = memoryBudget > 0 ? static_cast<uint64_t>(memoryBudget)
                                      : std::numeric_limits<uint64_t>::max();

    Operation *wait = *start.getToken().getUsers().begin();
    double overlapped = 0;
    for (Operation *op = start->getNextNode(); op != wait;
         op = op->getNextNode())
      overlapped += cost.computeSeconds(op);

    int moved = 0;
    // The default policy goes at least as far as jit (right after the
    // previous group's wait), then on until the compute in between covers
    // the collective and the ones queued ahead of it on the comm queue.
    // (The first group has no previous wait: only the cost stop applies.)
    bool pastHookDistance = true;
    for (Operation *op = start->getPrevNode(); op; op = op->getPrevNode())
      if (llvm::isa<zero::GatherWaitOp>(op))
        pastHookDistance = false;
    while (Operation *previous = start->getPrevNode()) {
      if (llvm::isa<zero::GatherWaitOp>(previous))
        pastHookDistance = true;
      if (policy == "default" && pastHookDistance) {
        int64_t here = live.indexOf(previous);
        double backlog =
            flightCount[here] > 0
                ? cost.allGatherSeconds(flightBytes[here], group.getWorldSize())
                : 0;
        if (overlapped >= needed + backlog)
          break;
      }
      // Comm order stays wait order; jit stops at the previous group's wait.
      if (llvm::isa<zero::GatherStartOp>(previous) ||
          (policy == "jit" && llvm::isa<zero::GatherWaitOp>(previous)))
        break;
      // Not above the ops defining its shards. (Ops without results, such as
      // zero.release, define none: getResult(0) would be out of range.)
      if (llvm::any_of(previous->getResults(), [&](Value result) {
            return llvm::is_contained(start->getOperands(), result);
          }))
        break;
      int64_t index = live.indexOf(previous);
      if (live.residentBytes() + liveBytes[index] + bytes > limit)
        break;
      if (flightCount[index] + 1 > maxInFlight ||
          (maxInFlightBytes > 0 && flightBytes[index] + bytes >
                                       static_cast<uint64_t>(maxInFlightBytes)))
        break;
      overlapped += cost.computeSeconds(previous);
      start->moveBefore(previous);
      ++moved;
    }
    LLVM_DEBUG(llvm::dbgs() << "@" << group.getSymName() << ": moved " << moved
                            << " ops earlier, overlapping " << overlapped
                            << " s of " << needed << " s\n");
  }
};

} // namespace
