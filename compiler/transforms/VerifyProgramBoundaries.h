//===- VerifyProgramBoundaries.h - rules 20-22 of zplan-verify-schedule ---===//
//
// One plan holds the programs of training and generation (docs/one-plan.md),
// and the runtime interleaves them: generation may run between two
// micro-steps of a gradient-accumulation window. These rules prove, per
// program and without knowing the order the runtime picks, that the
// interleaving is safe; Passes.td (VerifySchedule) states them.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_TRANSFORMS_VERIFYPROGRAMBOUNDARIES_H
#define ZPLAN_COMPILER_TRANSFORMS_VERIFYPROGRAMBOUNDARIES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LogicalResult.h"

namespace zplan {

/// Rules 20 and 21: nothing of a collective crosses a program boundary (no
/// shard or token among a program's arguments or results);
/// gradient state is touched by @train_micro_step and @optimizer_step only.
/// Runs after the per-function rules, which name a shard's misuse more
/// precisely where they apply (rule 1).
mlir::LogicalResult verifyProgramBoundaries(mlir::ModuleOp module);

/// Rule 22: no nn op reads a parameter from its shard by any path that
/// skips the gather. Runs first, so that the nn op is named rather than the
/// op that reinterpreted the shard (rule 1).
mlir::LogicalResult verifyGatheredReads(mlir::ModuleOp module);

} // namespace zplan

#endif // ZPLAN_COMPILER_TRANSFORMS_VERIFYPROGRAMBOUNDARIES_H
