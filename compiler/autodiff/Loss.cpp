//===- Loss.cpp - the training loss and the gradient of cross_entropy -----===//
//
// causal-lm: the model predicts token t+1 from tokens <= t, so position t of
// the logits is scored against labels[t+1]; the last position has no target
// and is ignored (Hugging Face's shift, -100 ignored):
//   targets = concat(labels[:, 1:], full([B, 1], -100), axis 1)
//   loss = nn.cross_entropy(logits, targets)   (mean over counted positions)
// labels are the `labels` input (the model's own, or the extra i64 [B, T]
// input asked for), otherwise input_ids.
// output:NAME: the forward's float output NAME of one element, reshaped to
// a scalar (and cast to f32).
// grpo, dpo: RlLosses.cpp.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/Loss.h"

#include "compiler/autodiff/GradientBuilder.h"
#include "dialects/ShapeFormatting.h"
#include "dialects/nn/NNDialect.h"

using namespace mlir;
using namespace zplan;
using namespace zplan::autodiff;

static constexpr int64_t kIgnoreIndex = -100;

/// The nn.name of result `index` of `func` ("" when unnamed).
static StringRef resultName(func::FuncOp func, unsigned index) {
  auto name = func.getResultAttrOfType<StringAttr>(index, "nn.name");
  return name ? name.getValue() : StringRef();
}

Value zplan::autodiff::argumentNamed(func::FuncOp func, StringRef name) {
  for (BlockArgument argument : func.getArguments()) {
    auto attr =
        func.getArgAttrOfType<StringAttr>(argument.getArgNumber(), "nn.name");
    if (attr && attr.getValue() == name)
      return argument;
  }
  return {};
}

/// "'a', 'b'" for messages.
static std::string listOutputs(func::FuncOp func, unsigned count) {
  std::string text;
  for (unsigned i = 0; i < count; ++i) {
    if (i)
      text += ", ";
    StringRef name = resultName(func, i);
    text += "'" + (name.empty() ? ("#" + std::to_string(i)) : name.str()) + "'";
  }
  return text;
}

FailureOr<Value> zplan::autodiff::findLogits(func::FuncOp func,
                                             ValueRange outputs,
                                             StringRef what) {
  Value logits;
  for (unsigned i = 0; i < outputs.size(); ++i)
    if (resultName(func, i) == "logits")
      logits = outputs[i];
  if (!logits && outputs.size() == 1)
    logits = outputs[0];
  if (!logits)
    return func.emitError() << what
                            << " needs an output named 'logits' (or a single "
                               "output); the model's outputs are "
                            << listOutputs(func, outputs.size());
  auto logitsType = llvm::cast<RankedTensorType>(logits.getType());
  if (logitsType.getRank() != 3 ||
      !llvm::isa<FloatType>(logitsType.getElementType()))
    return func.emitError()
           << what << " needs float logits [batch, sequence, vocab], got "
           << logitsType;
  return logits;
}

static FailureOr<Value> buildCausalLmLoss(OpBuilder &builder,
                                          func::FuncOp train,
                                          ValueRange outputs,
                                          const LossOptions &options) {
  Location loc = NameLoc::get(builder.getStringAttr("loss"));
  FailureOr<Value> found = findLogits(train, outputs, "--loss causal-lm");
  if (failed(found))
    return failure();
  Value logits = *found;
  auto logitsType = llvm::cast<RankedTensorType>(logits.getType());
  ArrayRef<int64_t> tokensShape = logitsType.getShape().drop_back();

  Value labels = argumentNamed(train, "labels");
  Value inputIds = argumentNamed(train, "input_ids");
  if (!labels && options.labelsInput) {
    // Hugging Face's labels: i64 [batch, sequence], whatever input_ids are.
    Type type = RankedTensorType::get(tokensShape, builder.getI64Type());
    unsigned index = train.getNumArguments();
    train.insertArgument(index, type,
                         builder.getDictionaryAttr(builder.getNamedAttr(
                             "nn.name", builder.getStringAttr("labels"))),
                         loc);
    labels = train.getArgument(index);
  }
  if (!labels)
    labels = inputIds;
  if (!labels)
    return train.emitError("--loss causal-lm needs an input named "
                           "'input_ids' or 'labels' for the targets");
  auto labelsType = llvm::cast<RankedTensorType>(labels.getType());
  if (!labelsType.getElementType().isInteger(64) &&
      !labelsType.getElementType().isInteger(32))
    return train.emitError()
           << "the labels must be i64 or i32 tokens, got " << labelsType;
  if (labelsType.getShape() != tokensShape)
    return train.emitError()
           << "the labels have shape " << formatShape(labelsType.getShape())
           << ", expected " << formatShape(tokensShape)
           << " (the logits' batch and sequence)";

  // targets[:, t] = labels[:, t + 1]; the last position is ignored.
  int64_t batch = tokensShape[0], length = tokensShape[1];
  auto ignoredType =
      RankedTensorType::get({batch, 1}, labelsType.getElementType());
  Value ignored = builder.create<nn::ConstantOp>(
      loc, ignoredType,
      DenseElementsAttr::get(
          ignoredType,
          builder.getIntegerAttr(labelsType.getElementType(), kIgnoreIndex)));
  Value targets = ignored;
  if (length > 1) {
    auto shiftedType =
        RankedTensorType::get({batch, length - 1}, labelsType.getElementType());
    Value shifted = builder.create<nn::SliceOp>(
        loc, shiftedType, labels, builder.getDenseI64ArrayAttr({0, 1}),
        builder.getDenseI64ArrayAttr({1, 1}));
    targets = builder.create<nn::ConcatOp>(loc, labelsType,
                                           ValueRange{shifted, ignored},
                                           builder.getI64IntegerAttr(1));
  }
  return builder
      .create<nn::CrossEntropyOp>(
          loc, RankedTensorType::get({}, builder.getF32Type()), logits, targets,
          builder.getI64IntegerAttr(kIgnoreIndex))
      .getResult();
}

static FailureOr<Value> buildOutputLoss(OpBuilder &builder, func::FuncOp train,
                                        ValueRange outputs, StringRef name) {
  Location loc = NameLoc::get(builder.getStringAttr("loss"));
  Value output;
  for (unsigned i = 0; i < outputs.size(); ++i)
    if (resultName(train, i) == name)
      output = outputs[i];
  if (!output)
    return train.emitError()
           << "--loss output:" << name << ": the model has no output named '"
           << name << "' (its outputs are "
           << listOutputs(train, outputs.size()) << ")";
  auto type = llvm::cast<RankedTensorType>(output.getType());
  if (!llvm::isa<FloatType>(type.getElementType()) ||
      type.getNumElements() != 1)
    return train.emitError()
           << "--loss output:" << name << ": output '" << name << "' has type "
           << type << ", expected a float scalar (one element)";
  Value loss = output;
  if (type.getRank() != 0)
    loss = builder.create<nn::ReshapeOp>(
        loc, RankedTensorType::get({}, type.getElementType()), loss);
  if (!type.getElementType().isF32())
    loss = builder.create<nn::CastOp>(
        loc, RankedTensorType::get({}, builder.getF32Type()), loss);
  return loss;
}

FailureOr<Value> zplan::autodiff::buildLoss(OpBuilder &builder,
                                            func::FuncOp train,
                                            ValueRange outputs,
                                            const LossOptions &options) {
  StringRef loss = options.loss;
  if (loss == "causal-lm")
    return buildCausalLmLoss(builder, train, outputs, options);
  if (loss == "grpo" || loss == "dpo")
    return buildRlLoss(builder, train, outputs, options);
  if (loss.consume_front("output:") && !loss.empty())
    return buildOutputLoss(builder, train, outputs, loss);
  return train.emitError()
         << "unknown loss '" << options.loss
         << "', expected 'causal-lm', 'output:NAME', 'grpo' or 'dpo'";
}

/// loss = cross_entropy(logits, targets): dlogits =
/// nn.cross_entropy_grad(logits, targets, dloss) = dloss (softmax(row) -
/// onehot(target)) / count on the counted rows, 0 on the ignored ones. The
/// targets are integers and get nothing.
static LogicalResult crossEntropyRule(GradientBuilder &b, Operation *op,
                                      ArrayRef<Value> resultGradients,
                                      MutableArrayRef<Value> operandGradients) {
  auto crossEntropy = llvm::cast<nn::CrossEntropyOp>(op);
  if (resultGradients[0] && b.needsGradient(crossEntropy.getLogits()))
    operandGradients[0] = b.getBuilder().create<nn::CrossEntropyGradOp>(
        b.getLoc(), crossEntropy.getLogits().getType(),
        crossEntropy.getLogits(), crossEntropy.getTargets(), resultGradients[0],
        crossEntropy.getIgnoreIndexAttr());
  return success();
}

/// logp = token_logprobs(logits, targets): dlogits =
/// nn.token_logprobs_grad(logits, targets, dlogp) = dlogp (onehot(target) -
/// softmax(row)), 0 on the ignored rows.
static LogicalResult
tokenLogprobsRule(GradientBuilder &b, Operation *op,
                  ArrayRef<Value> resultGradients,
                  MutableArrayRef<Value> operandGradients) {
  auto logprobs = llvm::cast<nn::TokenLogprobsOp>(op);
  if (resultGradients[0] && b.needsGradient(logprobs.getLogits()))
    operandGradients[0] = b.getBuilder().create<nn::TokenLogprobsGradOp>(
        b.getLoc(), logprobs.getLogits().getType(), logprobs.getLogits(),
        logprobs.getTargets(), resultGradients[0],
        logprobs.getIgnoreIndexAttr());
  return success();
}

void zplan::autodiff::registerLossRules(GradientRegistry &registry) {
  registry.add("nn.cross_entropy", crossEntropyRule);
  registry.add("nn.token_logprobs", tokenLogprobsRule);
}
