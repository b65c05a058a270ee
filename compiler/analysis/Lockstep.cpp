//===- Lockstep.cpp - how the ranks' decode loops stay together -----------===//

#include "compiler/analysis/Lockstep.h"

#include "dialects/zero/ZeroDialect.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace zplan;

/// Bytes of one agreement: each rank's count of running rows, an int64.
static constexpr uint64_t kAgreementBytes = 8;

zero::GroupOp zplan::shardedGroup(Operation *op, FlatSymbolRefAttr name) {
  if (!name)
    return nullptr;
  auto group = SymbolTable::lookupNearestSymbolFrom<zero::GroupOp>(op, name);
  return group && !group.getPersistent() ? group : nullptr;
}

bool zplan::isCollective(Operation *op) {
  // A persistent group is whole on every rank: its gather moves nothing and
  // the plan has no instruction for it.
  if (auto start = llvm::dyn_cast<zero::GatherStartOp>(op))
    return shardedGroup(op, start.getGroupAttr()) != nullptr;
  return llvm::isa<zero::CarryStartOp, zero::AllReduceOp,
                   zero::ReduceScatterStartOp, zero::ResidentGatherOp>(op);
}

int64_t zplan::worldSizeOf(ModuleOp module) {
  for (auto group : module.getOps<zero::GroupOp>())
    return group.getWorldSize();
  return 1;
}

Operation *zplan::firstCollective(func::FuncOp func) {
  Operation *found = nullptr;
  func.walk([&](Operation *op) {
    if (!isCollective(op))
      return WalkResult::advance();
    found = op;
    return WalkResult::interrupt();
  });
  return found;
}

int64_t zplan::lockstepPeriodOf(func::FuncOp decode) {
  if (auto period = decode->getAttrOfType<IntegerAttr>(kLockstepPeriodAttrName))
    return period.getInt();
  return 0;
}

double zplan::agreementSeconds(const CostModel &cost, int64_t worldSize) {
  return cost.allReduceSeconds(kAgreementBytes, worldSize);
}

int64_t zplan::chooseLockstepPeriod(double agreementSeconds,
                                    double decodeSeconds, int64_t maxTokens) {
  maxTokens = std::max<int64_t>(maxTokens, 1);
  if (decodeSeconds <= 0)
    return maxTokens;
  // Per token: a / K for the agreements, (K - 1) t / (2 M) for the decode
  // steps after the last row finished (uniform over the K - 1 it can be);
  // the minimum over real K is sqrt(2 a M / t).
  double best = std::sqrt(2.0 * agreementSeconds *
                          static_cast<double>(maxTokens) / decodeSeconds);
  return std::clamp<int64_t>(std::llround(best), 1, maxTokens);
}
