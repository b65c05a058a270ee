//===- ReductionRules.cpp - gradients of the reduce ops -------------------===//
//
// A reduction maps each input element to one output element; the cotangent
// goes back through that map. dy is first reshaped to the keepdims shape so
// it broadcasts against the input.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/GradientBuilder.h"

using namespace mlir;
using namespace zplan;
using namespace zplan::autodiff;

/// `value` (a reduction's result or its cotangent) with the reduced axes
/// kept as extent 1.
static Value withKeptDims(GradientBuilder &b, Value value, Value input,
                          ArrayRef<int64_t> axes) {
  SmallVector<int64_t> shape(shapeOf(input));
  for (int64_t axis : axes)
    shape[axis] = 1;
  return b.reshape(value, shape);
}

/// The number of input elements each output element summarises.
static int64_t reducedCount(Value input, ArrayRef<int64_t> axes) {
  int64_t count = 1;
  for (int64_t axis : axes)
    count *= shapeOf(input)[axis];
  return count;
}

template <typename OpT>
static LogicalResult reduceRule(GradientBuilder &b, Operation *op,
                                ArrayRef<Value> resultGradients,
                                MutableArrayRef<Value> operandGradients) {
  auto reduce = llvm::cast<OpT>(op);
  Value x = reduce.getInput(), dy = resultGradients[0];
  if (!dy || !b.needsGradient(x))
    return success();
  ArrayRef<int64_t> axes = reduce.getAxes();
  Value dyKept = withKeptDims(b, dy, x, axes);
  if constexpr (std::is_same_v<OpT, nn::ReduceSumOp>) {
    // y = sum(x): dx = dy broadcast over the reduced axes.
    operandGradients[0] = b.expand(dyKept, shapeOf(x));
  } else if constexpr (std::is_same_v<OpT, nn::ReduceMeanOp>) {
    // y = sum(x) / n: dx = dy / n broadcast.
    Value scaled = b.mul(
        dyKept,
        b.scalarLike(dy, 1.0 / static_cast<double>(reducedCount(x, axes))));
    operandGradients[0] = b.expand(scaled, shapeOf(x));
  } else {
    // y = max(x): dx = dy at the maxima, shared evenly among ties (as
    // torch.amax), 0 elsewhere: dx = dy * [x == y] / sum([x == y]).
    Value yKept = withKeptDims(b, reduce.getResult(), x, axes);
    Value isMax = b.cast(b.equal(x, yKept), getElementTypeOrSelf(x));
    Value ties = b.reduceSum(isMax, axes, /*keepdims=*/true);
    operandGradients[0] = b.mul(isMax, b.div(dyKept, ties));
  }
  return success();
}

void zplan::autodiff::registerReductionRules(GradientRegistry &registry) {
  registry.add("nn.reduce_sum", reduceRule<nn::ReduceSumOp>);
  registry.add("nn.reduce_mean", reduceRule<nn::ReduceMeanOp>);
  registry.add("nn.reduce_max", reduceRule<nn::ReduceMaxOp>);
}
