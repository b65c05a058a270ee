//===- Loss.h - the training loss appended to train_micro_step ------------===//
//
// zplan-autodiff differentiates a scalar: the loss built here from the
// forward's outputs (Passes.td, zplan-autodiff step 1).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_AUTODIFF_LOSS_H
#define ZPLAN_COMPILER_AUTODIFF_LOSS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include <string>

namespace zplan::autodiff {

/// What the loss is.
struct LossOptions {
  /// "causal-lm" (next-token cross-entropy of the `logits` output) or
  /// "output:NAME" (the forward's scalar float output NAME).
  std::string loss = "causal-lm";
  /// causal-lm only: give train_micro_step an extra input `labels` (i64
  /// [batch, sequence]) instead of using input_ids as the labels. An input
  /// named `labels` the model already has is used in any case.
  bool labelsInput = false;
};

/// Appends the loss ops at the builder's insertion point in `train`, whose
/// forward outputs are `outputs` (the operands of its original return), and
/// returns the loss, a tensor<f32>. May add the `labels` argument to
/// `train`. Reports an error on `train` and fails when the outputs do not
/// fit the loss.
mlir::FailureOr<mlir::Value> buildLoss(mlir::OpBuilder &builder,
                                       mlir::func::FuncOp train,
                                       mlir::ValueRange outputs,
                                       const LossOptions &options);

} // namespace zplan::autodiff

#endif // ZPLAN_COMPILER_AUTODIFF_LOSS_H
