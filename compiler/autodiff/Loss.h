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
#include <optional>
#include <string>

namespace zplan::autodiff {

/// What the loss is.
struct LossOptions {
  /// "causal-lm" (next-token cross-entropy of the `logits` output),
  /// "output:NAME" (the forward's scalar float output NAME), "grpo" (TRL
  /// GRPOTrainer's clipped policy gradient) or "dpo" (TRL DPOTrainer's
  /// sigmoid loss); docs/rl.md states the RL formulas.
  std::string loss = "causal-lm";
  /// causal-lm only: give train_micro_step an extra input `labels` (i64
  /// [batch, sequence]) instead of using input_ids as the labels. An input
  /// named `labels` the model already has is used in any case.
  bool labelsInput = false;
  /// grpo: TRL's loss_type, "grpo" (each sequence's mean over its completion
  /// tokens, then the mean over sequences) or "dapo" (the sum over the
  /// completion tokens, divided by the runtime by the window's global
  /// count).
  std::string lossType = "dapo";
  /// grpo: the KL coefficient (0: no reference input); dpo: the temperature.
  /// Unset: TRL's defaults, 0.0 for grpo and 0.1 for dpo.
  std::optional<double> beta;
  /// grpo: the ratio is clipped to [1 - epsilon, 1 + epsilonHigh];
  /// epsilonHigh unset is epsilon.
  double epsilon = 0.2;
  std::optional<double> epsilonHigh;
  /// grpo: take the behaviour policy's log-probs as an input `old_logprobs`;
  /// without, the ratio is exp(logp - stop_gradient(logp)) (TRL with
  /// num_iterations 1).
  bool oldLogprobs = false;
  /// grpo: advantages per token [B, T] instead of per sequence [B].
  bool perTokenAdvantages = false;
  /// grpo: multiply the KL term by the ratio (TRL's use_bias_correction_kl,
  /// on by default).
  bool biasCorrectionKl = true;
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

/// An op carrying this unit attribute is a constant for zplan-autodiff
/// (torch's .detach()): no cotangent flows through it.
inline constexpr llvm::StringLiteral kStopGradientAttr = "zplan.stop_gradient";

/// The per-token log-probs of `tokens` (i64|i32 [B, T]) under `logits`
/// ([B, T, V] float), aligned with the tokens as Hugging Face shifts labels:
/// [b, t] = log_softmax(logits[b, t - 1])[tokens[b, t]] for t >= 1, and 0
/// at t = 0. f32 [B, T].
mlir::Value buildAlignedLogprobs(mlir::OpBuilder &builder, mlir::Location loc,
                                 mlir::Value logits, mlir::Value tokens);

/// The entropy of softmax(logits[b, t - 1]) at [b, t] for t >= 1, 0 at
/// t = 0: f32 [B, T], aligned as buildAlignedLogprobs.
mlir::Value buildAlignedEntropy(mlir::OpBuilder &builder, mlir::Location loc,
                                mlir::Value logits);

/// The forward output named `logits` of `func` among `outputs` (the single
/// output when there is one); reports `what` needs it and fails otherwise.
/// It must be float [B, T, V].
mlir::FailureOr<mlir::Value> findLogits(mlir::func::FuncOp func,
                                        mlir::ValueRange outputs,
                                        llvm::StringRef what);

/// The argument of `func` named `name` (its nn.name), or null.
mlir::Value argumentNamed(mlir::func::FuncOp func, llvm::StringRef name);

/// Appends a GRPO or DPO loss (options.loss "grpo" or "dpo"; RlLosses.cpp):
/// adds its inputs to `train` and, for "dapo", marks `train` with
/// kTokenSumLossAttr.
mlir::FailureOr<mlir::Value> buildRlLoss(mlir::OpBuilder &builder,
                                         mlir::func::FuncOp train,
                                         mlir::ValueRange outputs,
                                         const LossOptions &options);

} // namespace zplan::autodiff

#endif // ZPLAN_COMPILER_AUTODIFF_LOSS_H
