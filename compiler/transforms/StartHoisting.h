//===- StartHoisting.h - moving a collective's start earlier --------------===//
//
// zplan-prefetch moves each zero.gather_start up so its collective runs on
// the comm queue while the compute queue works; zplan-cross-step-prefetch
// moves the zero.carry_start it places at the end of @prefill and @decode
// up the same way. Both call hoistStart, which holds the rules (Passes.td,
// zplan-prefetch): comm order, shard definitions, memory budget, in-flight
// limits, and the cost stop.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_TRANSFORMS_STARTHOISTING_H
#define ZPLAN_COMPILER_TRANSFORMS_STARTHOISTING_H

#include "compiler/analysis/CostModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>

namespace zplan {

/// How far a start may move.
struct HoistLimits {
  /// Stop once the compute between the start and its consumer covers the
  /// collective plus the comm backlog ahead of it (the default policy);
  /// otherwise move as far as the other limits allow.
  bool stopWhenCovered = true;
  /// The cost stop applies only once the start is at least right after the
  /// previous zero.gather_wait (where hook-based ZeRO-3 issues a gather):
  /// the default policy is never later than jit.
  bool atLeastHookDistance = true;
  /// Never above a zero.gather_wait (jit: hook-based ZeRO-3 prefetches one
  /// module ahead).
  bool stopAtWait = false;
  /// Bytes per rank; 0 = none.
  uint64_t memoryBudget = 0;
  /// Most collectives in flight at any op, this one included.
  int64_t maxInFlight = 2;
  /// Most bytes being gathered at any op; 0 = none.
  int64_t maxInFlightBytes = 0;
};

/// What hoistStart did.
struct HoistResult {
  int64_t moved = 0;
  /// Compute between the start and its consumer after the move, and the
  /// collective's own time (cost model).
  double overlappedSeconds = 0;
  double neededSeconds = 0;
};

/// What hoistStart reads at each op a start may pass: the transient bytes
/// live there (LivenessAnalysis) and the collectives in flight. Moving a
/// start changes the picture only at the ops it passes: its copy is live and
/// its collective in flight there now; nothing moves below its old place.
/// So a pass that moves the starts of one function in program order builds
/// one picture and lets hoistStart keep it current, instead of a fresh
/// LivenessAnalysis per start (quadratic in the op count: 56% of an 80-layer
/// training compile before).
class HoistPicture {
public:
  explicit HoistPicture(mlir::func::FuncOp func);

  struct AtOp {
    /// Transient bytes live at the op.
    uint64_t liveBytes = 0;
    /// Collectives started before the op and completed at it or later, and
    /// their bytes.
    int64_t inFlight = 0;
    uint64_t inFlightBytes = 0;
  };
  const AtOp &at(mlir::Operation *op) const { return perOp.find(op)->second; }
  /// Shards, persistent groups and state: the same at every op.
  uint64_t residentBytes() const { return resident; }

  /// A start of `bytes` now begins above `op`.
  void passed(mlir::Operation *op, uint64_t bytes);

private:
  llvm::DenseMap<mlir::Operation *, AtOp> perOp;
  uint64_t resident = 0;
};

/// The cost model of a schedule pass's `hardware` and `hardware-profile`
/// options (loadHardwareProfile); on error (a profile that does not parse or
/// cannot be read), one diagnostic on `op` naming `pass`.
mlir::FailureOr<CostModel> hoistingCostModel(mlir::Operation *op,
                                             llvm::StringRef pass,
                                             Hardware hardware,
                                             llvm::StringRef hardwareProfile);

/// Moves `start` (a zero.gather_start or zero.carry_start of `bytes`
/// gathered over `worldSize` ranks) up op by op within its block. The
/// compute between it and `consumer` (its wait, or the block's terminator
/// for a carry_start, whose collective ends with the program) is what it
/// overlaps. It never passes a zero.gather_start (the comm queue keeps the
/// order the waits need), an op defining one of its operands, or an op for
/// which `barrier` holds; and at every op it passes, the copy must fit
/// `limits.memoryBudget` beside the live buffers and stay within the
/// in-flight limits. `picture` must describe the function as it stands above
/// `start` (starts below it may not have moved yet); hoistStart updates it.
/// `fetchSeconds` is the tier_fetch an offloaded shard's collective waits
/// for on the comm queue (OffloadSelection.h's shardFetchSeconds; 0 when
/// the shard is on the device): the compute below must cover it too.
HoistResult
hoistStart(mlir::Operation *start, mlir::Operation *consumer, uint64_t bytes,
           int64_t worldSize, double fetchSeconds, const CostModel &cost,
           const HoistLimits &limits, HoistPicture &picture,
           llvm::function_ref<bool(mlir::Operation *)> barrier = nullptr);

} // namespace zplan

#endif // ZPLAN_COMPILER_TRANSFORMS_STARTHOISTING_H
