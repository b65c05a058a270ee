//===- Prefetch.cpp - the zplan-prefetch pass -----------------------------===//
//
// Moves each gather_start earlier so its collective runs on the comm queue
// while the compute queue works (see Passes.td for the rules; the moving
// itself is StartHoisting.h's, shared with zplan-cross-step-prefetch). Each
// start is moved with the memory and in-flight picture of the program as it
// stands after the previous starts moved (one HoistPicture per function,
// kept current), so later decisions see earlier ones.
// Tests: test/transforms/prefetch.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/CostModel.h"
#include "compiler/analysis/Liveness.h"
#include "compiler/analysis/OffloadSelection.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/StartHoisting.h"
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
    FailureOr<CostModel> cost = hoistingCostModel(
        getOperation(), "zplan-prefetch", hardware, hardwareProfile);
    if (failed(cost))
      return signalPassFailure();
    // One table for every group lookup (a lookup without one scans the
    // module's ops).
    SymbolTable symbols(getOperation());
    offloaded = selectOffloaded(getOperation(), symbols);
    for (auto func : getOperation().getOps<func::FuncOp>())
      prefetchFunction(func, *cost, symbols);
  }

  /// Groups whose shards are offloaded: each gather waits for a fetch.
  OffloadSelection offloaded;

  void prefetchFunction(func::FuncOp func, const CostModel &cost,
                        const SymbolTable &symbols) {
    SmallVector<std::pair<zero::GatherStartOp, zero::GroupOp>> starts;
    for (auto start : func.getOps<zero::GatherStartOp>()) {
      auto group =
          start.getGroupAttr()
              ? symbols.lookup<zero::GroupOp>(start.getGroupAttr().getAttr())
              : zero::GroupOp();
      if (group && !group.getPersistent())
        starts.push_back({start, group});
    }
    // Program order: each start moves only above its own place, where the
    // starts before it have already moved.
    HoistPicture picture(func);
    for (auto [start, group] : starts)
      hoist(start, group, cost, symbols, picture);
  }

  void hoist(zero::GatherStartOp start, zero::GroupOp group,
             const CostModel &cost, const SymbolTable &symbols,
             HoistPicture &picture) {
    HoistLimits limits;
    limits.stopWhenCovered = policy == SchedulePolicy::Default;
    limits.stopAtWait = policy == SchedulePolicy::Jit;
    limits.memoryBudget =
        memoryBudget > 0 ? static_cast<uint64_t>(memoryBudget) : 0;
    limits.maxInFlight = maxInFlight;
    limits.maxInFlightBytes = maxInFlightBytes;
    Operation *wait = *start.getToken().getUsers().begin();
    [[maybe_unused]] HoistResult result = hoistStart(
        start, wait, groupBytes(group, symbols), group.getWorldSize(),
        shardFetchSeconds(group, offloaded, cost), cost, limits, picture);
    LLVM_DEBUG(llvm::dbgs()
               << "@" << group.getSymName() << ": moved " << result.moved
               << " ops earlier, overlapping " << result.overlappedSeconds
               << " s of " << result.neededSeconds << " s\n");
  }
};

} // namespace
