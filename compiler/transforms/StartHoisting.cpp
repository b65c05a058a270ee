//===- StartHoisting.cpp - moving a collective's start earlier ------------===//
//
// Each start is moved with the memory and in-flight picture of the program
// as it stands (a fresh LivenessAnalysis), so later decisions see earlier
// ones.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/StartHoisting.h"

#include "compiler/analysis/Liveness.h"
#include "dialects/zero/ZeroDialect.h"

#include <limits>

using namespace mlir;
using namespace zplan;

/// Collectives (other than `self`'s) that a start placed right before op i
/// would find in flight: started before i and completed at i or later; and
/// their bytes.
static void inFlightAt(const LivenessAnalysis &live, Operation *self,
                       std::vector<int64_t> &count,
                       std::vector<uint64_t> &bytes) {
  size_t n = live.ops().size();
  count.assign(n + 2, 0);
  bytes.assign(n + 2, 0);
  for (const LivenessAnalysis::Buffer &buffer : live.buffers()) {
    if (!buffer.collective || buffer.collective == self)
      continue;
    count[buffer.start + 1] += 1;
    count[buffer.collectiveDone + 1] -= 1;
    bytes[buffer.start + 1] += buffer.bytes;
    bytes[buffer.collectiveDone + 1] -= buffer.bytes;
  }
  for (size_t i = 1; i <= n; ++i) {
    count[i] += count[i - 1];
    bytes[i] += bytes[i - 1];
  }
}

FailureOr<CostModel> zplan::hoistingCostModel(Operation *op, StringRef pass,
                                              Hardware hardware) {
  llvm::Expected<HardwareProfile> profile = getHardwareProfile(hardware);
  if (!profile)
    return op->emitError() << pass << ": "
                           << llvm::toString(profile.takeError());
  return CostModel(*profile);
}

HoistResult zplan::hoistStart(Operation *start, Operation *consumer,
                              uint64_t bytes, int64_t worldSize,
                              const CostModel &cost, const HoistLimits &limits,
                              llvm::function_ref<bool(Operation *)> barrier) {
  HoistResult result;
  result.neededSeconds = cost.allGatherSeconds(bytes, worldSize);
  auto func = start->getParentOfType<func::FuncOp>();
  LivenessAnalysis live(func);
  std::vector<uint64_t> liveBytes = live.liveBytes();
  std::vector<int64_t> flightCount;
  std::vector<uint64_t> flightBytes;
  inFlightAt(live, start, flightCount, flightBytes);
  uint64_t budget = limits.memoryBudget > 0
                        ? limits.memoryBudget
                        : std::numeric_limits<uint64_t>::max();

  for (Operation *op = start->getNextNode(); op && op != consumer;
       op = op->getNextNode())
    result.overlappedSeconds += cost.computeSeconds(op);

  // The cost stop applies only once the start is at least as early as
  // hook-based ZeRO-3 would issue it: right after the previous wait. (With
  // no previous wait, only the cost stop applies.)
  bool pastHookDistance = true;
  if (limits.atLeastHookDistance)
    for (Operation *op = start->getPrevNode(); op; op = op->getPrevNode())
      if (llvm::isa<zero::GatherWaitOp>(op))
        pastHookDistance = false;
  while (Operation *previous = start->getPrevNode()) {
    if (llvm::isa<zero::GatherWaitOp>(previous))
      pastHookDistance = true;
    if (limits.stopWhenCovered && pastHookDistance) {
      int64_t here = live.indexOf(previous);
      double backlog = flightCount[here] > 0
                           ? cost.allGatherSeconds(flightBytes[here], worldSize)
                           : 0;
      if (result.overlappedSeconds >= result.neededSeconds + backlog)
        break;
    }
    // Comm order stays wait order.
    if (llvm::isa<zero::GatherStartOp>(previous) ||
        (limits.stopAtWait && llvm::isa<zero::GatherWaitOp>(previous)))
      break;
    // Not above the ops defining its shards. (Ops without results, such as
    // zero.release, define none.)
    if (llvm::any_of(previous->getResults(), [&](Value result) {
          return llvm::is_contained(start->getOperands(), result);
        }))
      break;
    if (barrier && barrier(previous))
      break;
    int64_t index = live.indexOf(previous);
    if (live.residentBytes() + liveBytes[index] + bytes > budget)
      break;
    if (flightCount[index] + 1 > limits.maxInFlight ||
        (limits.maxInFlightBytes > 0 &&
         flightBytes[index] + bytes >
             static_cast<uint64_t>(limits.maxInFlightBytes)))
      break;
    result.overlappedSeconds += cost.computeSeconds(previous);
    start->moveBefore(previous);
    ++result.moved;
  }
  return result;
}
