//===- Lockstep.h - how the ranks' decode loops stay together -------------===//
//
// Each rank generates its own rows (docs/generation.md section 8), so the
// number of @decode runs depends on each rank's data. A @decode that holds a
// collective therefore carries `zplan.lockstep_period = K`: the ranks
// all-reduce their running rows after @prefill and every K-th @decode and
// stop together (zplan-decode-lockstep decides K; VerifySchedule's rule 18
// requires it; the emitter writes it into the plan; the report prices it).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_ANALYSIS_LOCKSTEP_H
#define ZPLAN_COMPILER_ANALYSIS_LOCKSTEP_H

#include "compiler/analysis/CostModel.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace zplan {

/// The @decode attribute: an i64 K >= 1; absent means no agreement.
inline constexpr llvm::StringLiteral kLockstepPeriodAttrName =
    "zplan.lockstep_period";

/// The group `name` that `op` (a collective) refers to, when it is a
/// sharded (not persistent) one; null otherwise.
zero::GroupOp shardedGroup(mlir::Operation *op, mlir::FlatSymbolRefAttr name);
/// `op` starts or runs a collective over the ranks (a persistent group's
/// gather, which moves nothing, is none).
bool isCollective(mlir::Operation *op);
/// The world size of `module`'s groups (1 without any).
int64_t worldSizeOf(mlir::ModuleOp module);
/// The first collective in `func` (program order), or null.
mlir::Operation *firstCollective(mlir::func::FuncOp func);

/// @decode's K, or 0 when it has none.
int64_t lockstepPeriodOf(mlir::func::FuncOp decode);

/// One agreement: an all-reduce of one int64 over `worldSize` ranks.
double agreementSeconds(const CostModel &cost, int64_t worldSize);

/// K that minimizes a / K + (K - 1) t / (2 M) per token, for an agreement
/// of `agreementSeconds` (a), a decode step of `decodeSeconds` (t) and at
/// most `maxTokens` (M) tokens a row: the integer nearest sqrt(2 a M / t),
/// within [1, M].
int64_t chooseLockstepPeriod(double agreementSeconds, double decodeSeconds,
                             int64_t maxTokens);

} // namespace zplan

#endif // ZPLAN_COMPILER_ANALYSIS_LOCKSTEP_H
