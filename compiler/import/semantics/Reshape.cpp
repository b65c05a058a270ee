//===- Reshape.cpp - Reshape, Flatten, Unsqueeze, Squeeze -----------------===//
//
// Shape manipulation: the output holds the input's elements in the same
// order under a new shape, so only the shape needs inference.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"

#include <algorithm>

namespace zplan::onnx_import {

/// Output of a pure reshape: the same elements under a new shape.
void setReshaped(NodeContext &ctx, const ValueInfo &data,
                 std::vector<int64_t> shape) {
  ValueInfo info{data.type, shape, data.value};
  if (info.value)
    info.value->shape = std::move(shape);
  ctx.setOutput(0, std::move(info));
}

llvm::Error inferReshape(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  const HostTensor *shapeTensor;
  if (llvm::Error err =
          ctx.getConstantInput(1, "the target shape", shapeTensor))
    return err;
  std::vector<int64_t> requested = toInts(*shapeTensor);
  bool allowZero = ctx.getOpset() >= 14 && ctx.getInt("allowzero", 0) != 0;
  auto failure = [&] {
    return ctx.error("cannot reshape " + formatShape(data.shape) + " into " +
                     formatShape(requested));
  };

  std::vector<int64_t> shape = requested;
  std::optional<size_t> inferred;
  std::vector<int64_t> knownDims;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 && !allowZero) {
      if (d >= data.shape.size())
        return failure();
      shape[d] = data.shape[d];
    } else if (shape[d] == -1) {
      if (inferred)
        return failure();
      inferred = d;
      continue;
    } else if (shape[d] < 0) {
      return failure();
    }
    knownDims.push_back(shape[d]);
  }
  // The data's element count fits int64, so a target whose product does
  // not cannot match it.
  std::optional<int64_t> knownProduct = checkedNumElements(knownDims);
  if (!knownProduct)
    return failure();
  int64_t total = numElements(data.shape);
  if (inferred) {
    if (*knownProduct == 0 || total % *knownProduct != 0)
      return failure();
    shape[*inferred] = total / *knownProduct;
  } else if (*knownProduct != total) {
    return failure();
  }
  setReshaped(ctx, data, std::move(shape));
  return llvm::Error::success();
}

llvm::Error inferFlatten(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  int64_t axisAttribute = ctx.getInt("axis", 1);
  // Unlike most ops, axis == rank is valid (everything goes to the rows).
  int64_t axis = axisAttribute < 0 ? axisAttribute + rank : axisAttribute;
  if (axis < 0 || axis > rank)
    return axisError(ctx, axisAttribute, rank);
  int64_t rows = 1, columns = 1;
  for (int64_t d = 0; d < rank; ++d)
    (d < axis ? rows : columns) *= data.shape[d];
  setReshaped(ctx, data, {rows, columns});
  return llvm::Error::success();
}

/// Axes of Unsqueeze / Squeeze: an attribute before opset 13, an input from
/// 13 on. `present` is false when neither gives any.
llvm::Error getSqueezeAxes(NodeContext &ctx, std::vector<int64_t> &axes,
                           bool &present) {
  present = false;
  if (ctx.getOpset() < 13) {
    if (std::optional<std::vector<int64_t>> attribute = ctx.getInts("axes")) {
      axes = *attribute;
      present = true;
    }
    return llvm::Error::success();
  }
  if (!ctx.input(1))
    return llvm::Error::success();
  const HostTensor *tensor;
  if (llvm::Error err = ctx.getConstantInput(1, "axes", tensor))
    return err;
  axes = toInts(*tensor);
  present = true;
  return llvm::Error::success();
}

llvm::Error inferUnsqueeze(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  std::vector<int64_t> axes;
  bool present;
  if (llvm::Error err = getSqueezeAxes(ctx, axes, present))
    return err;
  if (!present)
    return ctx.getOpset() < 13 ? ctx.error("the axes attribute is required")
                               : ctx.error("axes (input 1) is missing");
  // Axes index the output, whose rank counts the inserted dimensions.
  int64_t rank = data.shape.size() + axes.size();
  std::vector<bool> inserted(rank, false);
  for (int64_t axis : axes) {
    std::optional<int64_t> normalized = normalizeAxis(axis, rank);
    if (!normalized)
      return axisError(ctx, axis, rank);
    if (inserted[*normalized])
      return ctx.error("axis " + std::to_string(axis) + " is repeated");
    inserted[*normalized] = true;
  }
  std::vector<int64_t> shape;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d)
    shape.push_back(inserted[d] ? 1 : data.shape[next++]);
  setReshaped(ctx, data, std::move(shape));
  return llvm::Error::success();
}

llvm::Error inferSqueeze(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  std::vector<int64_t> axes;
  bool present;
  if (llvm::Error err = getSqueezeAxes(ctx, axes, present))
    return err;
  std::vector<bool> removed(rank, false);
  if (!present) {
    for (int64_t d = 0; d < rank; ++d)
      removed[d] = data.shape[d] == 1;
  }
  for (int64_t axis : axes) {
    std::optional<int64_t> normalized = normalizeAxis(axis, rank);
    if (!normalized)
      return axisError(ctx, axis, rank);
    if (data.shape[*normalized] != 1)
      return ctx.error("cannot squeeze axis " + std::to_string(axis) +
                       " of size " + std::to_string(data.shape[*normalized]));
    removed[*normalized] = true;
  }
  std::vector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d)
    if (!removed[d])
      shape.push_back(data.shape[d]);
  setReshaped(ctx, data, std::move(shape));
  return llvm::Error::success();
}

} // namespace zplan::onnx_import
