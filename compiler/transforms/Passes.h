//===- Passes.h - zplan compiler passes -----------------------------------===//
//
// Declarations of every pass in Passes.td, and the pattern sets the
// nn-forming pass is made of (so tests and other passes can reuse them).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_TRANSFORMS_PASSES_H
#define ZPLAN_COMPILER_TRANSFORMS_PASSES_H

#include "compiler/ScheduleChoices.h"
#include "dialects/nn/NNDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Pass/Pass.h"

namespace zplan {

#define GEN_PASS_DECL
#include "compiler/transforms/Passes.h.inc"

/// layer_norm and rms_norm from their primitive chains.
void populateNormalizationPatterns(mlir::RewritePatternSet &patterns);
/// gelu (erf and tanh forms) and silu.
void populateActivationPatterns(mlir::RewritePatternSet &patterns);
/// scaled dot-product attention; `dropNanGuards`: also where torch's SDPA
/// NaN guard covers a run-time mask (see zplan-form-nn-ops).
void populateAttentionPatterns(mlir::RewritePatternSet &patterns,
                               bool dropNanGuards = false);
/// OPT's attention (heads merged around the matmuls, scores clamped with
/// Max): not in zplan-form-nn-ops; generation forms it (every attention's
/// keys and values must reach the KV cache).
void populateClampedAttentionPatterns(mlir::RewritePatternSet &patterns);
/// embedding lookup and matmul with bias.
void populateLinearPatterns(mlir::RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "compiler/transforms/Passes.h.inc"

} // namespace zplan

#endif // ZPLAN_COMPILER_TRANSFORMS_PASSES_H
