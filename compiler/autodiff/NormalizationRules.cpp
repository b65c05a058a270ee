//===- NormalizationRules.cpp - gradients of the fused nn ops -------------===//
//
// layer_norm, rms_norm, softmax and attention have one backward op each
// (their math is in dialects/nn/NNOps.td), whose kernels recompute what they
// need from the forward's inputs (or, for softmax, its output). The norm
// gradients take a weight always: a forward without one passes a ones
// constant, so the kernels have one form. The attention mask, a constant of
// the model, gets no gradient.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/GradientBuilder.h"

using namespace mlir;
using namespace zplan;
using namespace zplan::autodiff;

/// The forward's weight, or ones of the normalised dimensions' shape.
static Value weightOrOnes(GradientBuilder &b, Value weight, Value input,
                          int64_t axis) {
  if (weight)
    return weight;
  auto inputType = llvm::cast<RankedTensorType>(input.getType());
  return b.constant(RankedTensorType::get(inputType.getShape().drop_front(axis),
                                          inputType.getElementType()),
                    1.0);
}

/// y = (x - mean) * rstd * w + bias over [axis, rank): nn.layer_norm_grad
/// gives dx = rstd (g - mean(g) - xhat mean(g xhat)) with g = dy w, dw =
/// sum(dy xhat), dbias = sum(dy) over the leading dimensions.
static LogicalResult layerNormRule(GradientBuilder &b, Operation *op,
                                   ArrayRef<Value> resultGradients,
                                   MutableArrayRef<Value> operandGradients) {
  auto norm = llvm::cast<nn::LayerNormOp>(op);
  Value dy = resultGradients[0];
  if (!dy)
    return success();
  int64_t axis = norm.getAxisAttr().getInt();
  Value weight = weightOrOnes(b, norm.getWeight(), norm.getInput(), axis);
  auto grad = b.getBuilder().create<nn::LayerNormGradOp>(
      b.getLoc(),
      TypeRange{norm.getInput().getType(), weight.getType(), weight.getType()},
      dy, norm.getInput(), weight, norm.getAxisAttr(), norm.getEpsilonAttr());
  // Operands in op order: input, then the optional weight and bias.
  unsigned next = 0;
  if (b.needsGradient(norm.getInput()))
    operandGradients[next] = grad.getDinput();
  ++next;
  if (norm.getWeight()) {
    if (b.needsGradient(norm.getWeight()))
      operandGradients[next] = grad.getDweight();
    ++next;
  }
  if (norm.getBias() && b.needsGradient(norm.getBias()))
    operandGradients[next] = grad.getDbias();
  return success();
}

/// y = x rstd w over the last dimension: nn.rms_norm_grad gives dx = rstd
/// (g - xhat mean(g xhat)) with g = dy w, dw = sum(dy xhat).
static LogicalResult rmsNormRule(GradientBuilder &b, Operation *op,
                                 ArrayRef<Value> resultGradients,
                                 MutableArrayRef<Value> operandGradients) {
  auto norm = llvm::cast<nn::RmsNormOp>(op);
  Value dy = resultGradients[0];
  if (!dy)
    return success();
  int64_t axis = shapeOf(norm.getInput()).size() - 1;
  Value weight = weightOrOnes(b, norm.getWeight(), norm.getInput(), axis);
  auto grad = b.getBuilder().create<nn::RmsNormGradOp>(
      b.getLoc(), TypeRange{norm.getInput().getType(), weight.getType()}, dy,
      norm.getInput(), weight, norm.getEpsilonAttr());
  if (b.needsGradient(norm.getInput()))
    operandGradients[0] = grad.getDinput();
  if (norm.getWeight() && b.needsGradient(norm.getWeight()))
    operandGradients[1] = grad.getDweight();
  return success();
}

/// y = softmax(x): dx = y (dy - sum(dy y, axis)), nn.softmax_grad.
static LogicalResult softmaxRule(GradientBuilder &b, Operation *op,
                                 ArrayRef<Value> resultGradients,
                                 MutableArrayRef<Value> operandGradients) {
  auto softmax = llvm::cast<nn::SoftmaxOp>(op);
  if (resultGradients[0] && b.needsGradient(softmax.getInput()))
    operandGradients[0] = b.getBuilder().create<nn::SoftmaxGradOp>(
        b.getLoc(), softmax.getType(), resultGradients[0], softmax.getResult(),
        softmax.getAxisAttr());
  return success();
}

/// o = softmax(mask(q k^T scale)) v: nn.attention_grad recomputes P and
/// gives dv = P^T do, dq = dS k scale, dk = dS^T q scale with dS = P (dP -
/// rowsum(dP P)), dP = do v^T.
static LogicalResult attentionRule(GradientBuilder &b, Operation *op,
                                   ArrayRef<Value> resultGradients,
                                   MutableArrayRef<Value> operandGradients) {
  auto attention = llvm::cast<nn::AttentionOp>(op);
  Value dout = resultGradients[0];
  if (!dout)
    return success();
  if (Value mask = attention.getMask(); mask && b.needsGradient(mask))
    return op->emitError() << "no gradient rule for an attention mask that "
                              "depends on a parameter at node '"
                           << nodeName(op) << "'";
  auto grad = b.getBuilder().create<nn::AttentionGradOp>(
      b.getLoc(),
      TypeRange{attention.getQuery().getType(), attention.getKey().getType(),
                attention.getValue().getType()},
      dout, attention.getQuery(), attention.getKey(), attention.getValue(),
      attention.getMask(), attention.getScaleAttr(),
      attention.getMaskKindAttr(), attention.getMaskedValueAttr());
  Value inputs[] = {attention.getQuery(), attention.getKey(),
                    attention.getValue()};
  for (unsigned i = 0; i < 3; ++i)
    if (b.needsGradient(inputs[i]))
      operandGradients[i] = grad->getResult(i);
  return success();
}

void zplan::autodiff::registerNormalizationRules(GradientRegistry &registry) {
  registry.add("nn.layer_norm", layerNormRule);
  registry.add("nn.rms_norm", rmsNormRule);
  registry.add("nn.softmax", softmaxRule);
  registry.add("nn.attention", attentionRule);
}
