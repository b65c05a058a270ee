//===- Diagnostics.cpp - Diagnostics shared by the handlers ---------------===//
//
// The diagnostics every handler shares (axis out of range, shapes that do
// not broadcast, mismatched element types, overflowing shape arithmetic), so
// that each reads the same whichever op reports it.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <optional>

namespace zplan::onnx_import {

llvm::Error axisError(const NodeContext &ctx, int64_t axis, int64_t rank) {
  return ctx.error("axis " + std::to_string(axis) +
                   " is out of range for rank " + std::to_string(rank));
}

llvm::Expected<int64_t> readAxis(const NodeContext &ctx, int64_t rank,
                                 int64_t defaultAxis) {
  int64_t attribute = ctx.getInt("axis", defaultAxis);
  std::optional<int64_t> axis = normalizeAxis(attribute, rank);
  if (!axis)
    return axisError(ctx, attribute, rank);
  return *axis;
}

llvm::Error broadcastError(const NodeContext &ctx,
                           const std::vector<int64_t> &a,
                           const std::vector<int64_t> &b) {
  return ctx.error("cannot broadcast " + formatShape(a) + " with " +
                   formatShape(b));
}

llvm::Error typeMismatchError(const NodeContext &ctx, ElementType a,
                              ElementType b) {
  return ctx.error("element types " + typeName(a) + " and " + typeName(b) +
                   " differ");
}

/// Broadcasts the shapes of all `values` together, reporting the first pair
/// that does not broadcast.
llvm::Error broadcastAll(const NodeContext &ctx,
                         const std::vector<const ValueInfo *> &values,
                         std::vector<int64_t> &result) {
  result = values.front()->shape;
  for (size_t i = 1; i < values.size(); ++i) {
    std::optional<std::vector<int64_t>> shape =
        broadcastShapes(result, values[i]->shape);
    if (!shape)
      return broadcastError(ctx, result, values[i]->shape);
    result = *shape;
  }
  return llvm::Error::success();
}

/// Reads a constant scalar (or one-element) integer input.
llvm::Error getConstantScalar(const NodeContext &ctx, size_t index,
                              const std::string &what, int64_t &value) {
  const HostTensor *tensor;
  if (llvm::Error err = ctx.getConstantInput(index, what, tensor))
    return err;
  if (tensor->numElements() != 1)
    return ctx.error(what + " (input " + std::to_string(index) +
                     ") must have one element, got shape " +
                     formatShape(tensor->shape));
  value = tensor->getInt(0);
  return llvm::Error::success();
}

llvm::Error checkedAdd(const NodeContext &ctx, int64_t a, int64_t b,
                       const std::string &what, int64_t &result) {
  std::optional<int64_t> sum = llvm::checkedAdd(a, b);
  if (!sum)
    return ctx.error(what + " overflows int64 (" + std::to_string(a) + " + " +
                     std::to_string(b) + ")");
  result = *sum;
  return llvm::Error::success();
}

llvm::Error checkedMul(const NodeContext &ctx, int64_t a, int64_t b,
                       const std::string &what, int64_t &result) {
  std::optional<int64_t> product = llvm::checkedMul(a, b);
  if (!product)
    return ctx.error(what + " overflows int64 (" + std::to_string(a) + " * " +
                     std::to_string(b) + ")");
  result = *product;
  return llvm::Error::success();
}

} // namespace zplan::onnx_import
