//===- MovementRules.cpp - gradients of the data-movement nn ops ----------===//
//
// Movement ops route each input element to zero or more outputs, so the
// cotangent routes back: a reshape reshapes back, a transpose applies the
// inverse permutation, a broadcast (expand) sums, a slice scatters into
// zeros (nn.slice_grad), a concat slices, and the index-driven ops
// (gather, embedding) scatter-add (nn.gather_grad, nn.embedding_grad).
// Indices are integers and get no gradient.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/GradientBuilder.h"

using namespace mlir;
using namespace zplan;
using namespace zplan::autodiff;

namespace {

/// Rule for a single-input op whose input cotangent is `f(builder, op, dy)`.
template <typename OpT>
GradientRule singleInputRule(
    std::function<Value(GradientBuilder &, OpT, Value)> derivative) {
  return [derivative](GradientBuilder &b, Operation *op,
                      ArrayRef<Value> resultGradients,
                      MutableArrayRef<Value> operandGradients) {
    if (b.needsGradient(op->getOperand(0)) && resultGradients[0])
      operandGradients[0] =
          derivative(b, llvm::cast<OpT>(op), resultGradients[0]);
    return success();
  };
}

} // namespace

void zplan::autodiff::registerMovementRules(GradientRegistry &registry) {
  // y = reshape(x): dx = reshape(dy, shape(x)).
  registry.add("nn.reshape",
               singleInputRule<nn::ReshapeOp>(
                   [](GradientBuilder &b, nn::ReshapeOp op, Value dy) {
                     return b.reshape(dy, shapeOf(op.getInput()));
                   }));
  // y = transpose(x, p), y[i] = x[p(i)]: dx = transpose(dy, p^-1).
  registry.add("nn.transpose",
               singleInputRule<nn::TransposeOp>(
                   [](GradientBuilder &b, nn::TransposeOp op, Value dy) {
                     ArrayRef<int64_t> perm = op.getPerm();
                     SmallVector<int64_t> inverse(perm.size());
                     for (auto [index, axis] : llvm::enumerate(perm))
                       inverse[axis] = index;
                     return b.transpose(dy, inverse);
                   }));
  // y = expand(x): every x element feeds the copies broadcasting made, so
  // dx = dy summed over the broadcast dimensions.
  registry.add("nn.expand",
               singleInputRule<nn::ExpandOp>(
                   [](GradientBuilder &b, nn::ExpandOp op, Value dy) {
                     return b.unbroadcast(dy, op.getInput().getType());
                   }));
  // y = x[starts + j * steps]: dx = dy at those positions, 0 elsewhere.
  registry.add(
      "nn.slice", singleInputRule<nn::SliceOp>([](GradientBuilder &b,
                                                  nn::SliceOp op, Value dy) {
        return b.getBuilder()
            .create<nn::SliceGradOp>(b.getLoc(), op.getInput().getType(), dy,
                                     op.getStartsAttr(), op.getStepsAttr())
            .getResult();
      }));
  // y = concat(x_0, ..., x_n, axis): dx_i = the slice of dy that x_i filled.
  registry.add("nn.concat", [](GradientBuilder &b, Operation *op,
                               ArrayRef<Value> resultGradients,
                               MutableArrayRef<Value> operandGradients) {
    auto concat = llvm::cast<nn::ConcatOp>(op);
    Value dy = resultGradients[0];
    if (!dy)
      return success();
    int64_t axis = concat.getAxisAttr().getInt();
    int64_t offset = 0;
    for (auto [index, input] : llvm::enumerate(concat.getInputs())) {
      ArrayRef<int64_t> shape = shapeOf(input);
      if (b.needsGradient(input)) {
        SmallVector<int64_t> starts(shape.size(), 0), steps(shape.size(), 1);
        starts[axis] = offset;
        operandGradients[index] = b.slice(dy, starts, steps, shape);
      }
      offset += shape[axis];
    }
    return success();
  });
  // y = gather(data, idx, axis): ddata = scatter-add of dy at idx.
  registry.add("nn.gather", [](GradientBuilder &b, Operation *op,
                               ArrayRef<Value> resultGradients,
                               MutableArrayRef<Value> operandGradients) {
    auto gather = llvm::cast<nn::GatherOp>(op);
    if (b.needsGradient(gather.getData()) && resultGradients[0])
      operandGradients[0] = b.getBuilder().create<nn::GatherGradOp>(
          b.getLoc(), gather.getData().getType(), resultGradients[0],
          gather.getIndices(), gather.getAxisAttr());
    return success();
  });
  // y[i..., :] = table[ids[i...], :]: dtable[r, :] = sum of dy[i..., :] over
  // the positions with ids[i...] == r.
  registry.add("nn.embedding", [](GradientBuilder &b, Operation *op,
                                  ArrayRef<Value> resultGradients,
                                  MutableArrayRef<Value> operandGradients) {
    auto embedding = llvm::cast<nn::EmbeddingOp>(op);
    if (b.needsGradient(embedding.getTable()) && resultGradients[0])
      operandGradients[0] = b.getBuilder().create<nn::EmbeddingGradOp>(
          b.getLoc(), embedding.getTable().getType(), resultGradients[0],
          embedding.getIds());
    return success();
  });
}
