//===- StartHoisting.cpp - moving a collective's start earlier ------------===//
//
// Each start is moved with the memory and in-flight picture of the program
// as it stands (a HoistPicture kept current as starts move), so later
// decisions see earlier ones.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/StartHoisting.h"

#include "compiler/analysis/Liveness.h"
#include "dialects/zero/ZeroDialect.h"

#include <limits>

using namespace mlir;
using namespace zplan;

HoistPicture::HoistPicture(func::FuncOp func) {
  LivenessAnalysis live(func);
  resident = live.residentBytes();
  std::vector<uint64_t> liveBytes = live.liveBytes();
  // Difference arrays over op indices: a collective is in flight at the ops
  // after its start, through the op that completes it.
  size_t n = live.ops().size();
  std::vector<int64_t> count(n + 1, 0);
  std::vector<uint64_t> bytes(n + 1, 0);
  for (const LivenessAnalysis::Buffer &buffer : live.buffers()) {
    if (!buffer.collective)
      continue;
    count[buffer.start + 1] += 1;
    count[buffer.collectiveDone + 1] -= 1;
    bytes[buffer.start + 1] += buffer.bytes;
    bytes[buffer.collectiveDone + 1] -= buffer.bytes;
  }
  perOp.reserve(n);
  int64_t flight = 0;
  uint64_t flightBytes = 0;
  for (size_t i = 0; i < n; ++i) {
    flight += count[i];
    flightBytes += bytes[i];
    perOp[live.ops()[i]] = {liveBytes[i], flight, flightBytes};
  }
}

void HoistPicture::passed(Operation *op, uint64_t bytes) {
  AtOp &here = perOp[op];
  here.liveBytes += bytes;
  here.inFlight += 1;
  here.inFlightBytes += bytes;
}

FailureOr<CostModel> zplan::hoistingCostModel(Operation *op, StringRef pass,
                                              Hardware hardware,
                                              StringRef hardwareProfile) {
  llvm::Expected<HardwareProfile> profile =
      loadHardwareProfile(hardware, hardwareProfile);
  if (!profile)
    return op->emitError() << pass << ": "
                           << llvm::toString(profile.takeError());
  return CostModel(*profile);
}

HoistResult zplan::hoistStart(Operation *start, Operation *consumer,
                              uint64_t bytes, int64_t worldSize,
                              double fetchSeconds, const CostModel &cost,
                              const HoistLimits &limits, HoistPicture &picture,
                              llvm::function_ref<bool(Operation *)> barrier) {
  HoistResult result;
  result.neededSeconds = fetchSeconds + cost.allGatherSeconds(bytes, worldSize);
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
    for (Operation *op = start->getPrevNode(); op && pastHookDistance;
         op = op->getPrevNode())
      if (llvm::isa<zero::GatherWaitOp>(op))
        pastHookDistance = false;
  while (Operation *previous = start->getPrevNode()) {
    if (llvm::isa<zero::GatherWaitOp>(previous))
      pastHookDistance = true;
    const HoistPicture::AtOp &here = picture.at(previous);
    if (limits.stopWhenCovered && pastHookDistance) {
      // (The backlog counts the collectives in flight, not the fetches
      // of offloaded shards ahead of them.)
      double backlog =
          here.inFlight > 0
              ? cost.allGatherSeconds(here.inFlightBytes, worldSize)
              : 0;
      // Compute beside the collectives runs slower (CostModel::
      // computeSecondsBesideCollective), so it spans them sooner; where it
      // pays all of their time (a CPU rank), moving further gains nothing.
      if (cost.computeSecondsBesideCollective(result.overlappedSeconds,
                                              result.neededSeconds + backlog) >=
          result.neededSeconds + backlog)
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
    if (picture.residentBytes() + here.liveBytes + bytes > budget)
      break;
    if (here.inFlight + 1 > limits.maxInFlight ||
        (limits.maxInFlightBytes > 0 &&
         here.inFlightBytes + bytes >
             static_cast<uint64_t>(limits.maxInFlightBytes)))
      break;
    result.overlappedSeconds += cost.computeSeconds(previous);
    start->moveBefore(previous);
    picture.passed(previous, bytes);
    ++result.moved;
  }
  return result;
}
