//===- RlLosses.cpp - per-token log-probs, GRPO and DPO losses ------------===//
//
// The RL objectives of TRL's GRPOTrainer and DPOTrainer, built from nn ops
// that zplan-autodiff differentiates (docs/rl.md states them with TRL's
// option names). Every per-token tensor is f32 [B, T] and aligned with
// input_ids as Hugging Face shifts labels: column t is about token t given
// the tokens before it, and column 0 (no prediction) is 0 and never counted.
//
// grpo, per token, with A the advantages ([B] broadcast over T, or [B, T]):
//   old     = old_logprobs, or stop_gradient(logp) without --old-logprobs
//   ratio   = exp(logp - old)
//   clipped = min(max(ratio, 1 - epsilon), 1 + epsilon_high)
//   per     = -min(ratio A, clipped A)
//           + beta (exp(ref - logp) - (ref - logp) - 1) ratio  (beta != 0;
//             the ratio only with use_bias_correction_kl, TRL's default)
//   m       = completion_mask, 0 in column 0
//   loss_type grpo: mean over rows of sum_t(per m) / max(sum_t m, 1); the
//                   runtime's 1 / (K N) makes it the mean over all rows.
//   loss_type dapo: sum(per m); the runtime divides the window's gradient
//                   by the global count of m (plan LOSS_NORMALIZATION_
//                   TOKEN_SUM), as TRL's num_items_in_batch does.
// dpo (loss_type sigmoid), input_ids [2B, T]: rows [0, B) chosen, [B, 2B)
// rejected (TRL's concatenated_forward), per pair:
//   s = sum_t logp m, r = sum_t ref_logprobs m   (per row)
//   z = beta ((s_c - s_r) - (r_c - r_r)); loss = mean over pairs of
//   -log(sigmoid(z)).
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/GradientBuilder.h"
#include "compiler/autodiff/Loss.h"
#include "compiler/transforms/Programs.h"
#include "dialects/ShapeFormatting.h"
#include "dialects/nn/NNDialect.h"

using namespace mlir;
using namespace zplan;
using namespace zplan::autodiff;

static constexpr int64_t kIgnoreIndex = -100;

/// The tokens shifted left by one, the last column ignore_index: position t
/// of the logits scores token t + 1.
static Value shiftedTargets(OpBuilder &builder, Location loc, Value tokens) {
  auto type = llvm::cast<RankedTensorType>(tokens.getType());
  int64_t batch = type.getDimSize(0), length = type.getDimSize(1);
  Type element = type.getElementType();
  auto lastType = RankedTensorType::get({batch, 1}, element);
  Value ignored = builder.create<nn::ConstantOp>(
      loc, lastType,
      DenseElementsAttr::get(lastType,
                             builder.getIntegerAttr(element, kIgnoreIndex)));
  if (length == 1)
    return ignored;
  auto shiftedType = RankedTensorType::get({batch, length - 1}, element);
  Value shifted = builder.create<nn::SliceOp>(
      loc, shiftedType, tokens, builder.getDenseI64ArrayAttr({0, 1}),
      builder.getDenseI64ArrayAttr({1, 1}));
  return builder.create<nn::ConcatOp>(loc, type, ValueRange{shifted, ignored},
                                      builder.getI64IntegerAttr(1));
}

/// `perPosition` [B, T] (position t about token t + 1, the last column 0)
/// moved one column right: a 0 column first, the last column dropped.
static Value alignRight(OpBuilder &builder, Location loc, Value perPosition) {
  auto type = llvm::cast<RankedTensorType>(perPosition.getType());
  int64_t batch = type.getDimSize(0), length = type.getDimSize(1);
  auto zeroType = RankedTensorType::get({batch, 1}, type.getElementType());
  Value zero = builder.create<nn::ConstantOp>(
      loc, zeroType,
      DenseElementsAttr::get(zeroType,
                             builder.getFloatAttr(type.getElementType(), 0)));
  if (length == 1)
    return zero;
  auto keptType =
      RankedTensorType::get({batch, length - 1}, type.getElementType());
  Value kept = builder.create<nn::SliceOp>(
      loc, keptType, perPosition, builder.getDenseI64ArrayAttr({0, 0}),
      builder.getDenseI64ArrayAttr({1, 1}));
  return builder.create<nn::ConcatOp>(loc, type, ValueRange{zero, kept},
                                      builder.getI64IntegerAttr(1));
}

/// `logits` as f32 (the losses and the program outputs are f32).
static Value asF32(OpBuilder &builder, Location loc, Value logits) {
  auto type = llvm::cast<RankedTensorType>(logits.getType());
  if (type.getElementType().isF32())
    return logits;
  return builder.create<nn::CastOp>(
      loc, RankedTensorType::get(type.getShape(), builder.getF32Type()),
      logits);
}

Value zplan::autodiff::buildAlignedLogprobs(OpBuilder &builder, Location loc,
                                            Value logits, Value tokens) {
  logits = asF32(builder, loc, logits);
  auto tokensType = llvm::cast<RankedTensorType>(tokens.getType());
  Value logp = builder.create<nn::TokenLogprobsOp>(
      loc, RankedTensorType::get(tokensType.getShape(), builder.getF32Type()),
      logits, shiftedTargets(builder, loc, tokens),
      builder.getI64IntegerAttr(kIgnoreIndex));
  return alignRight(builder, loc, logp);
}

Value zplan::autodiff::buildAlignedEntropy(OpBuilder &builder, Location loc,
                                           Value logits) {
  logits = asF32(builder, loc, logits);
  auto type = llvm::cast<RankedTensorType>(logits.getType());
  Value entropy = builder.create<nn::TokenEntropyOp>(
      loc,
      RankedTensorType::get(type.getShape().drop_back(), builder.getF32Type()),
      logits);
  return alignRight(builder, loc, entropy);
}

namespace {

/// Builds one RL loss into @train_micro_step.
class RlLossBuilder {
public:
  RlLossBuilder(OpBuilder &builder, func::FuncOp train,
                const LossOptions &options)
      : builder(builder), train(train), options(options),
        loc(NameLoc::get(builder.getStringAttr("loss"))),
        b(builder, loc, [](Value) { return false; }) {}

  FailureOr<Value> build(ValueRange outputs);

private:
  /// The f32 input `name` of `shape`: the model's own when it has one (it
  /// must have that type), else a new argument of @train_micro_step.
  FailureOr<Value> input(StringRef name, ArrayRef<int64_t> shape);
  Value grpo(Value logp, Value mask, Value advantages, Value old, Value ref);
  Value dpo(Value logp, Value mask, Value ref, int64_t pairs);

  OpBuilder &builder;
  func::FuncOp train;
  const LossOptions &options;
  Location loc;
  GradientBuilder b;
};

} // namespace

FailureOr<Value> RlLossBuilder::input(StringRef name, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, builder.getF32Type());
  if (Value existing = argumentNamed(train, name)) {
    if (existing.getType() != type)
      return train.emitError()
             << "--loss " << options.loss << ": the model's input '" << name
             << "' is " << existing.getType() << ", expected " << type;
    return existing;
  }
  unsigned index = train.getNumArguments();
  train.insertArgument(index, type,
                       builder.getDictionaryAttr(builder.getNamedAttr(
                           "nn.name", builder.getStringAttr(name))),
                       loc);
  return train.getArgument(index);
}

FailureOr<Value> RlLossBuilder::build(ValueRange outputs) {
  std::string what = "--loss " + options.loss;
  FailureOr<Value> logits = findLogits(train, outputs, what);
  if (failed(logits))
    return failure();
  Value inputIds = argumentNamed(train, "input_ids");
  if (!inputIds)
    return train.emitError() << what
                             << " needs an input named 'input_ids': the "
                                "tokens whose log-probs it scores";
  auto idsType = llvm::cast<RankedTensorType>(inputIds.getType());
  ArrayRef<int64_t> tokens =
      llvm::cast<RankedTensorType>(logits->getType()).getShape().drop_back();
  if (idsType.getShape() != tokens ||
      !llvm::isa<IntegerType>(idsType.getElementType()))
    return train.emitError()
           << what << ": input_ids is " << idsType
           << ", expected integer tokens of the logits' batch and sequence "
           << formatShape(tokens);
  int64_t rows = tokens[0], length = tokens[1];

  FailureOr<Value> mask = input("completion_mask", tokens);
  if (failed(mask))
    return failure();
  // Column 0 has no log-prob: it never counts, whatever the mask says.
  auto columnsType = RankedTensorType::get({1, length}, builder.getF32Type());
  SmallVector<float> columns(length, 1.0f);
  columns[0] = 0.0f;
  Value counted =
      b.mul(*mask,
            builder.create<nn::ConstantOp>(
                loc, columnsType,
                DenseElementsAttr::get(columnsType, ArrayRef<float>(columns))));

  Value logp = buildAlignedLogprobs(builder, loc, *logits, inputIds);
  if (options.loss == "dpo") {
    if (rows % 2 != 0)
      return train.emitError()
             << what << ": input_ids has " << rows
             << " rows; DPO takes pairs, the chosen rows then the rejected "
                "ones (2 x pairs)";
    FailureOr<Value> ref = input("ref_logprobs", tokens);
    if (failed(ref))
      return failure();
    return dpo(logp, counted, *ref, rows / 2);
  }

  SmallVector<int64_t> advantageShape{rows};
  if (options.perTokenAdvantages)
    advantageShape.push_back(length);
  FailureOr<Value> advantages = input("advantages", advantageShape);
  if (failed(advantages))
    return failure();
  Value old, ref;
  if (options.oldLogprobs) {
    FailureOr<Value> given = input("old_logprobs", tokens);
    if (failed(given))
      return failure();
    old = *given;
  }
  if (options.beta.value_or(0.0) != 0.0) {
    FailureOr<Value> given = input("ref_logprobs", tokens);
    if (failed(given))
      return failure();
    ref = *given;
  }
  if (options.lossType == "dapo")
    train->setAttr(kTokenSumLossAttr, builder.getUnitAttr());
  return grpo(logp, counted, *advantages, old, ref);
}

Value RlLossBuilder::grpo(Value logp, Value mask, Value advantages, Value old,
                          Value ref) {
  Type f32 = builder.getF32Type();
  if (!old) {
    // logp.detach(): the ratio is 1 and its derivative is logp's.
    old = builder.create<nn::ReshapeOp>(loc, logp.getType(), logp);
    old.getDefiningOp()->setAttr(kStopGradientAttr, builder.getUnitAttr());
  }
  int64_t rows = shapeOf(logp)[0];
  if (shapeOf(advantages).size() == 1)
    advantages = b.reshape(advantages, {rows, 1});
  double epsilonHigh = options.epsilonHigh.value_or(options.epsilon);
  Value ratio = b.unary<nn::ExpOp>(b.sub(logp, old));
  Value clipped = builder.create<nn::MinOp>(
      loc, logp.getType(),
      builder.create<nn::MaxOp>(loc, logp.getType(), ratio,
                                b.scalar(f32, 1.0 - options.epsilon)),
      b.scalar(f32, 1.0 + epsilonHigh));
  Value unclippedTerm = b.mul(ratio, advantages);
  Value clippedTerm = b.mul(clipped, advantages);
  Value perToken = b.unary<nn::NegOp>(builder.create<nn::MinOp>(
      loc, logp.getType(), unclippedTerm, clippedTerm));
  if (ref) {
    // TRL's k3 estimator of KL(policy || reference).
    Value delta = b.sub(ref, logp);
    Value kl =
        b.sub(b.sub(b.unary<nn::ExpOp>(delta), delta), b.scalar(f32, 1.0));
    // TRL's use_bias_correction_kl: the estimate is importance-weighted by
    // the ratio (its value is 1 without old log-probs, its gradient not).
    if (options.biasCorrectionKl)
      kl = b.mul(kl, ratio);
    perToken = b.add(perToken, b.mul(kl, b.scalar(f32, *options.beta)));
  }
  Value masked = b.mul(perToken, mask);
  if (options.lossType == "dapo")
    return b.reduceSum(masked, {0, 1}, /*keepdims=*/false);
  // grpo: each sequence's mean over its own tokens, then the mean over the
  // sequences.
  Value perSequence =
      b.div(b.reduceSum(masked, {1}, false),
            builder.create<nn::MaxOp>(loc, RankedTensorType::get({rows}, f32),
                                      b.reduceSum(mask, {1}, false),
                                      b.scalar(f32, 1.0)));
  return builder.create<nn::ReduceMeanOp>(
      loc, RankedTensorType::get({}, f32), perSequence,
      builder.getDenseI64ArrayAttr({0}), builder.getBoolAttr(false));
}

Value RlLossBuilder::dpo(Value logp, Value mask, Value ref, int64_t pairs) {
  Type f32 = builder.getF32Type();
  Value policy = b.reduceSum(b.mul(logp, mask), {1}, false);
  Value reference = b.reduceSum(b.mul(ref, mask), {1}, false);
  auto half = [&](Value perRow, int64_t first) {
    return b.slice(perRow, {first}, {1}, {pairs});
  };
  Value margin = b.sub(b.sub(half(policy, 0), half(policy, pairs)),
                       b.sub(half(reference, 0), half(reference, pairs)));
  Value z = b.mul(margin, b.scalar(f32, options.beta.value_or(0.1)));
  // -logsigmoid(z) as -log(sigmoid(z)): its derivative at z = 0 (policy
  // equal to the reference, the first step) is -1/2 as torch's; a
  // softplus made of relu and |z| would give 0 there.
  Value losses =
      b.unary<nn::NegOp>(b.unary<nn::LogOp>(b.unary<nn::SigmoidOp>(z)));
  return builder.create<nn::ReduceMeanOp>(
      loc, RankedTensorType::get({}, f32), losses,
      builder.getDenseI64ArrayAttr({0}), builder.getBoolAttr(false));
}

FailureOr<Value> zplan::autodiff::buildRlLoss(OpBuilder &builder,
                                              func::FuncOp train,
                                              ValueRange outputs,
                                              const LossOptions &options) {
  return RlLossBuilder(builder, train, options).build(outputs);
}
