//===- GradientBuilder.cpp - emitting backward ops with derived types -----===//
//
// Result types follow the nn ops' verifiers: numpy broadcasting for the
// elementwise ops, reduce_sum's keepdims rule, matmul's batch broadcast. The
// registry constructor gathers the rule families of the other files.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/GradientBuilder.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/SmallVector.h"

using namespace mlir;
using namespace zplan;
using namespace zplan::autodiff;

Location zplan::autodiff::gradientLocation(Operation *forward) {
  MLIRContext *context = forward->getContext();
  std::string name = nodeName(forward);
  if (name == "<unnamed>")
    name = forward->getName().getStringRef().str();
  return NameLoc::get(StringAttr::get(context, name + "/grad"));
}

std::string zplan::autodiff::nodeName(Operation *op) {
  if (std::optional<StringRef> name = nn::onnxNodeName(op->getLoc()))
    return name->str();
  return "<unnamed>";
}

/// numpy broadcast of two static shapes (the operands are known to agree:
/// they come from verified forward ops).
static SmallVector<int64_t> broadcastShapes(ArrayRef<int64_t> a,
                                            ArrayRef<int64_t> b) {
  return *nn::broadcastShapes(a, b);
}

static Type elementTypeOf(Value value) { return getElementTypeOrSelf(value); }

Value GradientBuilder::constant(RankedTensorType type, double value) {
  Type element = type.getElementType();
  Attribute scalarAttr;
  if (llvm::isa<FloatType>(element))
    scalarAttr = builder.getFloatAttr(element, value);
  else
    scalarAttr = builder.getIntegerAttr(element, static_cast<int64_t>(value));
  auto attr = DenseElementsAttr::get(type, scalarAttr);
  return builder.create<nn::ConstantOp>(loc, type, attr);
}

Value GradientBuilder::scalar(Type elementType, double value) {
  return constant(RankedTensorType::get({}, elementType), value);
}

Value GradientBuilder::scalarLike(Value like, double value) {
  return scalar(elementTypeOf(like), value);
}

template <typename OpT>
Value GradientBuilder::broadcastBinary(Value lhs, Value rhs, Type elementType) {
  auto type = RankedTensorType::get(broadcastShapes(shapeOf(lhs), shapeOf(rhs)),
                                    elementType);
  return builder.create<OpT>(loc, type, lhs, rhs);
}

Value GradientBuilder::add(Value lhs, Value rhs) {
  return broadcastBinary<nn::AddOp>(lhs, rhs, elementTypeOf(lhs));
}
Value GradientBuilder::sub(Value lhs, Value rhs) {
  return broadcastBinary<nn::SubOp>(lhs, rhs, elementTypeOf(lhs));
}
Value GradientBuilder::mul(Value lhs, Value rhs) {
  return broadcastBinary<nn::MulOp>(lhs, rhs, elementTypeOf(lhs));
}
Value GradientBuilder::div(Value lhs, Value rhs) {
  return broadcastBinary<nn::DivOp>(lhs, rhs, elementTypeOf(lhs));
}
Value GradientBuilder::pow(Value lhs, Value rhs) {
  return broadcastBinary<nn::PowOp>(lhs, rhs, elementTypeOf(lhs));
}
Value GradientBuilder::greater(Value lhs, Value rhs) {
  return broadcastBinary<nn::GreaterOp>(lhs, rhs, builder.getI1Type());
}
Value GradientBuilder::less(Value lhs, Value rhs) {
  return broadcastBinary<nn::LessOp>(lhs, rhs, builder.getI1Type());
}
Value GradientBuilder::equal(Value lhs, Value rhs) {
  return broadcastBinary<nn::EqualOp>(lhs, rhs, builder.getI1Type());
}

Value GradientBuilder::where(Value condition, Value onTrue, Value onFalse) {
  SmallVector<int64_t> shape = broadcastShapes(
      broadcastShapes(shapeOf(condition), shapeOf(onTrue)), shapeOf(onFalse));
  auto type = RankedTensorType::get(shape, elementTypeOf(onTrue));
  return builder.create<nn::WhereOp>(loc, type, condition, onTrue, onFalse);
}

Value GradientBuilder::cast(Value value, Type elementType) {
  if (elementTypeOf(value) == elementType)
    return value;
  auto type = RankedTensorType::get(shapeOf(value), elementType);
  return builder.create<nn::CastOp>(loc, type, value);
}

Value GradientBuilder::reshape(Value value, ArrayRef<int64_t> shape) {
  if (shapeOf(value) == shape)
    return value;
  auto type = RankedTensorType::get(shape, elementTypeOf(value));
  return builder.create<nn::ReshapeOp>(loc, type, value);
}

Value GradientBuilder::transpose(Value value, ArrayRef<int64_t> perm) {
  ArrayRef<int64_t> input = shapeOf(value);
  SmallVector<int64_t> shape;
  bool identity = true;
  for (auto [index, axis] : llvm::enumerate(perm)) {
    shape.push_back(input[axis]);
    identity &= static_cast<int64_t>(index) == axis;
  }
  if (identity)
    return value;
  auto type = RankedTensorType::get(shape, elementTypeOf(value));
  return builder.create<nn::TransposeOp>(loc, type, value,
                                         builder.getDenseI64ArrayAttr(perm));
}

Value GradientBuilder::transposeLastTwo(Value value) {
  int64_t rank = shapeOf(value).size();
  SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  std::swap(perm[rank - 1], perm[rank - 2]);
  return transpose(value, perm);
}

Value GradientBuilder::expand(Value value, ArrayRef<int64_t> shape) {
  if (shapeOf(value) == shape)
    return value;
  auto type = RankedTensorType::get(shape, elementTypeOf(value));
  return builder.create<nn::ExpandOp>(loc, type, value);
}

Value GradientBuilder::reduceSum(Value value, ArrayRef<int64_t> axes,
                                 bool keepdims) {
  ArrayRef<int64_t> input = shapeOf(value);
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < static_cast<int64_t>(input.size()); ++d) {
    if (!llvm::is_contained(axes, d))
      shape.push_back(input[d]);
    else if (keepdims)
      shape.push_back(1);
  }
  auto type = RankedTensorType::get(shape, elementTypeOf(value));
  return builder.create<nn::ReduceSumOp>(loc, type, value,
                                         builder.getDenseI64ArrayAttr(axes),
                                         builder.getBoolAttr(keepdims));
}

Value GradientBuilder::slice(Value value, ArrayRef<int64_t> starts,
                             ArrayRef<int64_t> steps, ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, elementTypeOf(value));
  return builder.create<nn::SliceOp>(loc, type, value,
                                     builder.getDenseI64ArrayAttr(starts),
                                     builder.getDenseI64ArrayAttr(steps));
}

Value GradientBuilder::matmul(Value lhs, Value rhs, bool transposeRhs) {
  ArrayRef<int64_t> a = shapeOf(lhs), b = shapeOf(rhs);
  SmallVector<int64_t> shape = broadcastShapes(a.drop_back(2), b.drop_back(2));
  shape.push_back(a[a.size() - 2]);
  shape.push_back(transposeRhs ? b[b.size() - 2] : b.back());
  auto type = RankedTensorType::get(shape, elementTypeOf(lhs));
  return builder.create<nn::MatmulOp>(loc, type, lhs, rhs, /*bias=*/Value(),
                                      builder.getBoolAttr(transposeRhs));
}

Value GradientBuilder::unbroadcast(Value gradient, Type target) {
  ArrayRef<int64_t> targetShape =
      llvm::cast<RankedTensorType>(target).getShape();
  ArrayRef<int64_t> shape = shapeOf(gradient);
  if (shape == targetShape)
    return gradient;
  // Dimensions numpy prepended, and dimensions of extent 1 it stretched.
  size_t added = shape.size() - targetShape.size();
  SmallVector<int64_t> axes;
  for (size_t d = 0; d < shape.size(); ++d)
    if (d < added || (targetShape[d - added] == 1 && shape[d] != 1))
      axes.push_back(d);
  if (axes.empty())
    return reshape(gradient, targetShape);
  // Only prepended dimensions (a bias under a batch of rows): drop them in
  // the reduction itself.
  bool onlyPrepended = axes.back() < static_cast<int64_t>(added);
  return reshape(reduceSum(gradient, axes, /*keepdims=*/!onlyPrepended),
                 targetShape);
}

GradientRegistry::GradientRegistry() {
  registerElementwiseRules(*this);
  registerLinalgRules(*this);
  registerMovementRules(*this);
  registerReductionRules(*this);
  registerNormalizationRules(*this);
  registerLossRules(*this);
}
