//===- Movement.cpp - Concat, Split, Expand, Tile, Transpose, Where -------===//
//
// Data movement: ops whose outputs rearrange or replicate input elements.
// Sizes computed here (concat and split sums, tiled dims) are checked
// against int64 overflow.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"

#include <algorithm>
#include <numeric>

namespace zplan::onnx_import {

void appendElements(HostTensor &dest, const HostTensor &source, int64_t begin,
                    int64_t count) {
  if (elementTypeInfo(source.type).isFloat)
    dest.floats.insert(dest.floats.end(), source.floats.begin() + begin,
                       source.floats.begin() + begin + count);
  else
    dest.ints.insert(dest.ints.end(), source.ints.begin() + begin,
                     source.ints.begin() + begin + count);
}

llvm::Error inferConcat(NodeContext &ctx) {
  const ValueInfo &first = *ctx.input(0);
  int64_t rank = first.shape.size();
  if (rank == 0)
    return ctx.error("cannot concatenate scalars");
  if (!ctx.findAttribute("axis"))
    return ctx.error("the axis attribute is required");
  llvm::Expected<int64_t> axis = readAxis(ctx, rank, 0);
  if (!axis)
    return axis.takeError();

  std::vector<int64_t> shape = first.shape;
  shape[*axis] = 0;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    const ValueInfo &operand = *ctx.input(i);
    if (operand.type != first.type)
      return typeMismatchError(ctx, first.type, operand.type);
    bool compatible = static_cast<int64_t>(operand.shape.size()) == rank;
    for (int64_t d = 0; compatible && d < rank; ++d)
      compatible = d == *axis || operand.shape[d] == first.shape[d];
    if (!compatible)
      return ctx.error("cannot concatenate " + formatShape(first.shape) +
                       " with " + formatShape(operand.shape) + " on axis " +
                       std::to_string(*axis));
    if (llvm::Error err = checkedAdd(ctx, shape[*axis], operand.shape[*axis],
                                     "the concatenated axis", shape[*axis]))
      return err;
  }
  ctx.setOutput(0, first.type, shape);
  if (!ctx.allInputsConstant() || !ctx.canFold(shape, {}))
    return llvm::Error::success();

  HostTensor result;
  result.type = first.type;
  result.shape = shape;
  int64_t outer = extentsAround(shape, *axis).outer;
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t i = 0; i < ctx.numInputs(); ++i) {
      const ValueInfo &operand = *ctx.input(i);
      AxisExtents extents = extentsAround(operand.shape, *axis);
      int64_t chunk = extents.length * extents.inner;
      appendElements(result, *operand.value, o * chunk, chunk);
    }
  }
  ctx.setOutput(0, std::move(result));
  return llvm::Error::success();
}

llvm::Error inferSplit(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  llvm::Expected<int64_t> axis = readAxis(ctx, rank, 0);
  if (!axis)
    return axis.takeError();
  int64_t dim = data.shape[*axis];
  int64_t outputs = ctx.numOutputs();

  std::vector<int64_t> sizes;
  if (ctx.getOpset() >= 13 && ctx.input(1)) {
    const HostTensor *split;
    if (llvm::Error err = ctx.getConstantInput(1, "split", split))
      return err;
    sizes = toInts(*split);
  } else if (ctx.getOpset() < 13 && ctx.findAttribute("split")) {
    sizes = *ctx.getInts("split");
  } else if (ctx.getOpset() >= 18 && ctx.findAttribute("num_outputs")) {
    // Opset 18: chunks of ceil(dim / n), the last one smaller.
    int64_t parts = ctx.getInt("num_outputs", outputs);
    if (parts <= 0)
      return ctx.error("num_outputs must be positive");
    // Checked before sizing anything by it: num_outputs comes from the model.
    if (parts != outputs)
      return ctx.error("num_outputs " + std::to_string(parts) +
                       " does not match " + std::to_string(outputs) +
                       " outputs");
    int64_t chunk = dim / parts + (dim % parts != 0);
    sizes.assign(parts, chunk);
    sizes.back() = dim - chunk * (parts - 1);
  } else {
    if (dim % outputs != 0)
      return ctx.error("cannot split an axis of size " + std::to_string(dim) +
                       " into " + std::to_string(outputs) + " equal parts");
    sizes.assign(outputs, dim / outputs);
  }
  if (static_cast<int64_t>(sizes.size()) != outputs)
    return ctx.error("split sizes " + formatInts(sizes) + " do not match " +
                     std::to_string(outputs) + " outputs");
  int64_t total = 0;
  for (int64_t size : sizes) {
    if (size < 0)
      return ctx.error("split sizes " + formatInts(sizes) +
                       " contain a negative size");
    if (llvm::Error err =
            checkedAdd(ctx, total, size, "the sum of split sizes", total))
      return err;
  }
  if (total != dim)
    return ctx.error("split sizes " + formatInts(sizes) + " do not add up to " +
                     std::to_string(dim));

  std::vector<int64_t> strides = rowMajorStrides(data.shape);
  int64_t offset = 0;
  for (int64_t i = 0; i < outputs; ++i) {
    std::vector<int64_t> shape = data.shape;
    shape[*axis] = sizes[i];
    ctx.setOutput(i, data.type, shape);
    if (ctx.canFold(shape, {&data}))
      ctx.setOutput(i, pickElements(*data.value,
                                    stridedOffsets(shape, strides,
                                                   offset * strides[*axis]),
                                    shape));
    offset += sizes[i];
  }
  return llvm::Error::success();
}

llvm::Error inferExpand(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  const HostTensor *shapeTensor;
  if (llvm::Error err =
          ctx.getConstantInput(1, "the target shape", shapeTensor))
    return err;
  std::vector<int64_t> target = toInts(*shapeTensor);
  // Unlike Reshape, Expand gives -1 no meaning: every dim is a size.
  for (int64_t dim : target)
    if (dim < 0)
      return ctx.error("the target shape " + formatInts(target) +
                       " has negative dimension " + std::to_string(dim));
  std::optional<std::vector<int64_t>> shape =
      broadcastShapes(data.shape, target);
  if (!shape)
    return broadcastError(ctx, data.shape, target);
  ctx.setOutput(0, data.type, *shape);
  if (!ctx.canFold(*shape, {&data}))
    return llvm::Error::success();
  ctx.setOutput(0, pickElements(*data.value,
                                broadcastOffsets(data.shape, *shape), *shape));
  return llvm::Error::success();
}

llvm::Error inferTile(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  const HostTensor *repeatsTensor;
  if (llvm::Error err = ctx.getConstantInput(1, "repeats", repeatsTensor))
    return err;
  std::vector<int64_t> repeats = toInts(*repeatsTensor);
  if (repeats.size() != data.shape.size())
    return ctx.error("repeats " + formatInts(repeats) +
                     " do not match input rank " +
                     std::to_string(data.shape.size()));
  std::vector<int64_t> shape;
  for (size_t d = 0; d < repeats.size(); ++d) {
    if (repeats[d] < 0)
      return ctx.error("repeats " + formatInts(repeats) +
                       " contain a negative count");
    int64_t tiled;
    if (llvm::Error err =
            checkedMul(ctx, data.shape[d], repeats[d],
                       "tiled dimension " + std::to_string(d), tiled))
      return err;
    shape.push_back(tiled);
  }
  ctx.setOutput(0, data.type, shape);
  if (!ctx.canFold(shape, {&data}))
    return llvm::Error::success();
  // Output dim d is (repeat, position) in row-major order, so tiling is the
  // strided view of shape [r0, n0, r1, n1, ...] with strides [0, s0, 0, s1..].
  std::vector<int64_t> strides = rowMajorStrides(data.shape);
  std::vector<int64_t> viewShape, viewStrides;
  for (size_t d = 0; d < repeats.size(); ++d) {
    viewShape.insert(viewShape.end(), {repeats[d], data.shape[d]});
    viewStrides.insert(viewStrides.end(), {0, strides[d]});
  }
  ctx.setOutput(0, pickElements(*data.value,
                                stridedOffsets(viewShape, viewStrides), shape));
  return llvm::Error::success();
}

llvm::Error inferTranspose(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  std::vector<int64_t> permutation(rank);
  if (std::optional<std::vector<int64_t>> perm = ctx.getInts("perm"))
    permutation = *perm;
  else
    for (int64_t d = 0; d < rank; ++d)
      permutation[d] = rank - 1 - d;
  std::vector<int64_t> sorted = permutation;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(rank);
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity)
    return ctx.error("perm " + formatInts(permutation) +
                     " is not a permutation of rank " + std::to_string(rank));

  std::vector<int64_t> strides = rowMajorStrides(data.shape);
  std::vector<int64_t> shape(rank), viewStrides(rank);
  for (int64_t d = 0; d < rank; ++d) {
    shape[d] = data.shape[permutation[d]];
    viewStrides[d] = strides[permutation[d]];
  }
  ctx.setOutput(0, data.type, shape);
  if (!ctx.canFold(shape, {&data}))
    return llvm::Error::success();
  ctx.setOutput(
      0, pickElements(*data.value, stridedOffsets(shape, viewStrides), shape));
  return llvm::Error::success();
}

llvm::Error inferWhere(NodeContext &ctx) {
  const ValueInfo &condition = *ctx.input(0), &onTrue = *ctx.input(1),
                  &onFalse = *ctx.input(2);
  if (condition.type != ElementType::Bool)
    return ctx.error(std::string("condition must be i1, got ") +
                     typeName(condition.type));
  if (onTrue.type != onFalse.type)
    return typeMismatchError(ctx, onTrue.type, onFalse.type);
  std::vector<int64_t> shape;
  if (llvm::Error err =
          broadcastAll(ctx, {&condition, &onTrue, &onFalse}, shape))
    return err;
  ctx.setOutput(0, onTrue.type, shape);
  if (!ctx.canFold(shape, {&condition, &onTrue, &onFalse}))
    return llvm::Error::success();
  std::vector<int64_t> conditionAt = broadcastOffsets(condition.shape, shape);
  std::vector<int64_t> trueAt = broadcastOffsets(onTrue.shape, shape);
  std::vector<int64_t> falseAt = broadcastOffsets(onFalse.shape, shape);
  HostTensor result;
  result.type = onTrue.type;
  result.shape = shape;
  for (size_t i = 0; i < conditionAt.size(); ++i) {
    bool pick = condition.value->ints[conditionAt[i]] != 0;
    const HostTensor &source = pick ? *onTrue.value : *onFalse.value;
    appendElements(result, source, pick ? trueAt[i] : falseAt[i], 1);
  }
  ctx.setOutput(0, std::move(result));
  return llvm::Error::success();
}

} // namespace zplan::onnx_import
