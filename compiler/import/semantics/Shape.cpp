//===- Shape.cpp - Constants and shape queries ----------------------------===//
//---===//
//
// Constants and shape queries: the ops exporters emit to compute shapes,
// whose results are nearly always known at compile time.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace zplan::onnx_import {

llvm::Error inferConstant(NodeContext &ctx) {
  HostTensor value;
  if (const onnx::AttributeProto *attribute = ctx.findAttribute("value")) {
    if (llvm::Error err = decodeTensor(attribute->t(), value))
      return ctx.error(llvm::toString(std::move(err)));
  } else if (const auto *attribute = ctx.findAttribute("value_float")) {
    value = HostTensor::fromFloats(ElementType::F32, {}, {attribute->f()});
  } else if (const auto *attribute = ctx.findAttribute("value_floats")) {
    std::vector<double> values(attribute->floats().begin(),
                               attribute->floats().end());
    int64_t count = values.size();
    value =
        HostTensor::fromFloats(ElementType::F32, {count}, std::move(values));
  } else if (const auto *attribute = ctx.findAttribute("value_int")) {
    value = HostTensor::fromInts(ElementType::I64, {}, {attribute->i()});
  } else if (const auto *attribute = ctx.findAttribute("value_ints")) {
    std::vector<int64_t> values(attribute->ints().begin(),
                                attribute->ints().end());
    int64_t count = values.size();
    value = HostTensor::fromInts(ElementType::I64, {count}, std::move(values));
  } else {
    return ctx.error("only the value, value_float(s) and value_int(s) "
                     "attributes are supported");
  }
  // A Constant's contents are model data rather than a folding result, so
  // they are kept whatever their size: dropping them would lose the data.
  ValueInfo info{value.type, value.shape, std::nullopt};
  info.value = std::move(value);
  ctx.setOutput(0, std::move(info));
  return llvm::Error::success();
}

llvm::Error inferIdentity(NodeContext &ctx) {
  ctx.setOutput(0, *ctx.input(0));
  return llvm::Error::success();
}

llvm::Error inferShape(NodeContext &ctx) {
  const std::vector<int64_t> &shape = ctx.input(0)->shape;
  int64_t rank = shape.size();
  int64_t start = 0, end = rank;
  if (ctx.getOpset() >= 15) {
    start = ctx.getInt("start", 0);
    end = ctx.getInt("end", rank);
  }
  auto clampToRank = [rank](int64_t index) {
    return std::clamp<int64_t>(index < 0 ? index + rank : index, 0, rank);
  };
  start = clampToRank(start);
  end = std::max(start, clampToRank(end));
  std::vector<int64_t> dims(shape.begin() + start, shape.begin() + end);
  int64_t count = dims.size();
  ctx.setOutput(0, HostTensor::fromInts(ElementType::I64, {count}, dims));
  return llvm::Error::success();
}

llvm::Error inferSize(NodeContext &ctx) {
  ctx.setOutput(0, HostTensor::fromInts(ElementType::I64, {},
                                        {numElements(ctx.input(0)->shape)}));
  return llvm::Error::success();
}

llvm::Error inferConstantOfShape(NodeContext &ctx) {
  const HostTensor *shapeTensor;
  if (llvm::Error err = ctx.getConstantInput(0, "the shape", shapeTensor))
    return err;
  std::vector<int64_t> shape = toInts(*shapeTensor);
  for (int64_t dim : shape)
    if (dim < 0)
      return ctx.error("dimension " + std::to_string(dim) +
                       " of the shape is negative");

  HostTensor fill = HostTensor::fromFloats(ElementType::F32, {}, {0.0});
  if (const onnx::AttributeProto *attribute = ctx.findAttribute("value")) {
    if (llvm::Error err = decodeTensor(attribute->t(), fill))
      return ctx.error(llvm::toString(std::move(err)));
    if (fill.numElements() != 1)
      return ctx.error("the value attribute must have one element, got " +
                       formatShape(fill.shape));
  }
  ctx.setOutput(0, fill.type, shape);
  if (!ctx.canFold(shape, {}))
    return llvm::Error::success();
  ctx.setOutput(
      0, pickElements(fill, std::vector<int64_t>(numElements(shape)), shape));
  return llvm::Error::success();
}

llvm::Error inferRange(NodeContext &ctx) {
  const HostTensor *operands[3];
  const char *names[3] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    if (llvm::Error err = ctx.getConstantInput(i, names[i], operands[i]))
      return err;
    if (operands[i]->numElements() != 1)
      return ctx.error(std::string(names[i]) + " must be a scalar, got " +
                       formatShape(operands[i]->shape));
  }
  ElementType type = operands[0]->type;
  for (const HostTensor *operand : operands)
    if (operand->type != type)
      return typeMismatchError(ctx, type, operand->type);

  int64_t count;
  if (elementTypeInfo(type).isFloat) {
    double start = operands[0]->getDouble(0), limit = operands[1]->getDouble(0),
           delta = operands[2]->getDouble(0);
    if (delta == 0)
      return ctx.error("delta is zero");
    double exactCount = std::max(0.0, std::ceil((limit - start) / delta));
    if (!(exactCount <= double(int64_t(1) << 62)))
      return ctx.error("the range has too many elements");
    count = static_cast<int64_t>(exactCount);
    ctx.setOutput(0, type, {count});
    if (count > kMaxFoldedElements)
      return llvm::Error::success();
    // onnxruntime accumulates in the element type (value += delta), which
    // differs from start + i * delta once rounding kicks in; mirror it.
    std::vector<double> values(count);
    double value = start;
    for (int64_t i = 0; i < count; ++i) {
      values[i] = value;
      value = roundToElementType(value + delta, type);
    }
    ctx.setOutput(0, HostTensor::fromFloats(type, {count}, std::move(values)));
    return llvm::Error::success();
  }

  int64_t start = operands[0]->getInt(0), limit = operands[1]->getInt(0),
          delta = operands[2]->getInt(0);
  if (delta == 0)
    return ctx.error("delta is zero");
  // The distance between start and limit can exceed INT64_MAX; in uint64 it
  // cannot, and neither can the count it gives.
  uint64_t distance = 0, step = 0;
  if (delta > 0 && limit > start) {
    distance = static_cast<uint64_t>(limit) - static_cast<uint64_t>(start);
    step = static_cast<uint64_t>(delta);
  } else if (delta < 0 && limit < start) {
    distance = static_cast<uint64_t>(start) - static_cast<uint64_t>(limit);
    step = uint64_t(0) - static_cast<uint64_t>(delta);
  }
  uint64_t exactCount = step ? (distance - 1) / step + 1 : 0;
  if (exactCount > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return ctx.error("the range has more than 2^63-1 elements");
  count = static_cast<int64_t>(exactCount);
  ctx.setOutput(0, type, {count});
  if (count > kMaxFoldedElements)
    return llvm::Error::success();
  std::vector<int64_t> values(count);
  for (int64_t i = 0; i < count; ++i)
    values[i] = wrappingAdd(start, wrappingMul(i, delta));
  ctx.setOutput(0, HostTensor::fromInts(type, {count}, std::move(values)));
  return llvm::Error::success();
}

} // namespace zplan::onnx_import
