//===- Core.cpp - HostTensor, shape helpers, inferNode dispatch -----------===//
//
// The core of ONNX shape inference and constant folding: value rounding to
// element types (folding computes in double and rounds every result to the
// element type's precision; integers wrap to the type's width, so a folded
// value equals what a runtime computing that op in the element type would
// produce), HostTensor, the checked shape arithmetic every size goes
// through, strided views, and the dispatch table that maps each op type to
// its handler in one of the op-family files beside this one.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace zplan::onnx_import {

//===----------------------------------------------------------------------===//
// Checked sizes.
//===----------------------------------------------------------------------===//

std::optional<int64_t> checkedNumElements(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  bool empty = false;
  for (int64_t dim : shape) {
    if (dim < 0)
      return std::nullopt;
    empty |= dim == 0;
  }
  // A zero dimension makes the tensor empty whatever the other dimensions
  // are, but each must still be a real size; the product of the others is
  // checked too, so 0x(2^62)x(2^62) is refused like (2^62)x(2^62).
  for (int64_t dim : shape) {
    if (dim == 0)
      continue;
    std::optional<int64_t> product = llvm::checkedMul(count, dim);
    if (!product)
      return std::nullopt;
    count = *product;
  }
  return empty ? 0 : count;
}

int64_t numElements(const std::vector<int64_t> &shape) {
  return checkedNumElements(shape).value_or(
      std::numeric_limits<int64_t>::max());
}

llvm::Error checkTensorSize(const std::vector<int64_t> &shape,
                            ElementType type) {
  for (int64_t dim : shape)
    if (dim < 0)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "shape " + formatShape(shape) +
                                         " has negative dimension " +
                                         std::to_string(dim));
  std::optional<int64_t> count = checkedNumElements(shape);
  std::optional<int64_t> bytes =
      count ? llvm::checkedMul<int64_t>(*count, elementTypeInfo(type).bytes)
            : std::nullopt;
  if (!bytes)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "shape " + formatShape(shape) + " of " + typeName(type) +
            " holds more than 2^63-1 " + (count ? "bytes" : "elements"));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Element types and value rounding.
//===----------------------------------------------------------------------===//

namespace {

/// Rounds `value` to the nearest (ties to even) number of a binary format with
/// `precision` significant bits whose smallest normal number is 2^minExponent;
/// magnitudes beyond `maxFinite` after rounding become infinities. Rounding
/// straight from double avoids the double rounding of going through float.
double roundToBinaryFormat(double value, int precision, int minExponent,
                           double maxFinite) {
  if (!std::isfinite(value) || value == 0)
    return value;
  int exponent;
  std::frexp(value, &exponent);
  // frexp puts the leading bit at 2^(exponent-1); subnormals share the
  // quantum of the smallest normal binade.
  int leadingBit = std::max(exponent - 1, minExponent);
  double quantum = std::ldexp(1.0, leadingBit - (precision - 1));
  double rounded = std::nearbyint(value / quantum) * quantum;
  if (std::fabs(rounded) > maxFinite)
    return std::copysign(std::numeric_limits<double>::infinity(), value);
  return rounded;
}

} // namespace

/// Rounds a computed value to what storing it in `type` keeps.
double roundToElementType(double value, ElementType type) {
  switch (type) {
  case ElementType::F32:
    // IEEE conversion (C Annex F): nearest-even, overflow to infinity.
    return static_cast<float>(value);
  case ElementType::F16:
    return roundToBinaryFormat(value, 11, -14, 65504.0);
  case ElementType::BF16:
    return roundToBinaryFormat(value, 8, -126, 3.3895313892515355e38);
  default:
    return value;
  }
}

/// Wraps an integer to the width of `type`, as a runtime storing it would.
int64_t wrapToElementType(int64_t value, ElementType type) {
  switch (type) {
  case ElementType::I32:
    return static_cast<int32_t>(static_cast<uint32_t>(value));
  case ElementType::I8:
    return static_cast<int8_t>(static_cast<uint8_t>(value));
  case ElementType::U8:
    return static_cast<uint8_t>(value);
  case ElementType::Bool:
    return value != 0;
  default:
    return value;
  }
}

/// Float-to-integer conversion: truncation toward zero, like a C cast. NaN
/// and out-of-range values, undefined in C, saturate so folding never
/// invokes undefined behaviour.
int64_t floatToElementType(double value, ElementType type) {
  if (type == ElementType::Bool)
    return value != 0;
  if (std::isnan(value))
    return 0;
  double truncated = std::trunc(value);
  int64_t result;
  if (truncated >= 9223372036854775807.0)
    result = std::numeric_limits<int64_t>::max();
  else if (truncated <= -9223372036854775808.0)
    result = std::numeric_limits<int64_t>::min();
  else
    result = static_cast<int64_t>(truncated);
  return wrapToElementType(result, type);
}

/// Wrapping int64 arithmetic: signed overflow is undefined in C++, while a
/// runtime simply wraps.
int64_t wrappingAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) +
                              static_cast<uint64_t>(b));
}
int64_t wrappingSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) -
                              static_cast<uint64_t>(b));
}
int64_t wrappingMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) *
                              static_cast<uint64_t>(b));
}

//===----------------------------------------------------------------------===//
// HostTensor.
//===----------------------------------------------------------------------===//

double HostTensor::getDouble(int64_t i) const {
  return elementTypeInfo(type).isFloat ? floats[i]
                                       : static_cast<double>(ints[i]);
}

int64_t HostTensor::getInt(int64_t i) const {
  return elementTypeInfo(type).isFloat
             ? floatToElementType(floats[i], ElementType::I64)
             : ints[i];
}

// The factories convert and round to `type`, so every HostTensor keeps the
// invariant that its contents are representable in its element type.
HostTensor HostTensor::fromInts(ElementType type, std::vector<int64_t> shape,
                                std::vector<int64_t> values) {
  HostTensor tensor;
  tensor.type = type;
  tensor.shape = std::move(shape);
  if (elementTypeInfo(type).isFloat) {
    tensor.floats.reserve(values.size());
    for (int64_t value : values)
      tensor.floats.push_back(
          roundToElementType(static_cast<double>(value), type));
  } else {
    for (int64_t &value : values)
      value = wrapToElementType(value, type);
    tensor.ints = std::move(values);
  }
  return tensor;
}

HostTensor HostTensor::fromFloats(ElementType type, std::vector<int64_t> shape,
                                  std::vector<double> values) {
  HostTensor tensor;
  tensor.type = type;
  tensor.shape = std::move(shape);
  if (elementTypeInfo(type).isFloat) {
    for (double &value : values)
      value = roundToElementType(value, type);
    tensor.floats = std::move(values);
  } else {
    tensor.ints.reserve(values.size());
    for (double value : values)
      tensor.ints.push_back(floatToElementType(value, type));
  }
  return tensor;
}

//===----------------------------------------------------------------------===//
// Shape helpers.
//===----------------------------------------------------------------------===//

std::optional<std::vector<int64_t>>
broadcastShapes(const std::vector<int64_t> &a, const std::vector<int64_t> &b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> result(rank);
  for (size_t i = 0; i < rank; ++i) {
    // Align trailing dimensions; missing leading ones act as 1.
    int64_t dimA = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t dimB = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (dimA == dimB || dimB == 1)
      result[i] = dimA;
    else if (dimA == 1)
      result[i] = dimB;
    else
      return std::nullopt;
  }
  return result;
}

std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank)
    return std::nullopt;
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// Source offsets read by a strided view of shape `viewShape`: view element
/// with multi-index i reads `base + sum(i[d] * strides[d])`. Broadcasting
/// (stride 0), transposition (permuted strides), slicing (scaled strides and
/// a base) and tiling (interleaved zero strides) are all such views.
std::vector<int64_t> stridedOffsets(const std::vector<int64_t> &viewShape,
                                    const std::vector<int64_t> &strides,
                                    int64_t base) {
  int64_t count = numElements(viewShape);
  std::vector<int64_t> offsets(count);
  std::vector<int64_t> counter(viewShape.size(), 0);
  int64_t offset = base;
  for (int64_t i = 0; i < count; ++i) {
    offsets[i] = offset;
    for (int64_t d = static_cast<int64_t>(viewShape.size()) - 1; d >= 0; --d) {
      offset += strides[d];
      if (++counter[d] < viewShape[d])
        break;
      offset -= strides[d] * viewShape[d];
      counter[d] = 0;
    }
  }
  return offsets;
}

/// Offsets into a tensor of `shape` read when broadcasting it to `target`;
/// `shape` must broadcast to `target`.
std::vector<int64_t> broadcastOffsets(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &target) {
  std::vector<int64_t> sourceStrides = rowMajorStrides(shape);
  std::vector<int64_t> strides(target.size(), 0);
  size_t shift = target.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1)
      strides[d + shift] = sourceStrides[d];
  return stridedOffsets(target, strides);
}

/// The tensor of `shape` whose element i is element offsets[i] of `source`.
HostTensor pickElements(const HostTensor &source,
                        const std::vector<int64_t> &offsets,
                        std::vector<int64_t> shape) {
  HostTensor result;
  result.type = source.type;
  result.shape = std::move(shape);
  if (elementTypeInfo(source.type).isFloat) {
    result.floats.reserve(offsets.size());
    for (int64_t offset : offsets)
      result.floats.push_back(source.floats[offset]);
  } else {
    result.ints.reserve(offsets.size());
    for (int64_t offset : offsets)
      result.ints.push_back(source.ints[offset]);
  }
  return result;
}

AxisExtents extentsAround(const std::vector<int64_t> &shape, int64_t axis) {
  AxisExtents extents;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis)
      extents.outer *= shape[d];
    else if (d == axis)
      extents.length = shape[d];
    else
      extents.inner *= shape[d];
  }
  return extents;
}

std::vector<int64_t> toInts(const HostTensor &tensor) {
  std::vector<int64_t> values(tensor.numElements());
  for (int64_t i = 0; i < tensor.numElements(); ++i)
    values[i] = tensor.getInt(i);
  return values;
}

std::string formatInts(const std::vector<int64_t> &values) {
  std::string text = "[";
  for (size_t i = 0; i < values.size(); ++i)
    text += (i ? ", " : "") + std::to_string(values[i]);
  return text + "]";
}

//===----------------------------------------------------------------------===//
// Dispatch.
//===----------------------------------------------------------------------===//

namespace {

using OpHandler = llvm::Error (*)(NodeContext &);

/// How to infer one op type. Inputs below `requiredInputs` must be present;
/// a variadic op requires every input it is given.
struct OpEntry {
  OpHandler handler;
  size_t requiredInputs;
  size_t maxInputs;
  bool variadic = false;
  /// The first default-domain opset with the op.
  int64_t sinceOpset = 0;
};

const std::unordered_map<std::string, OpEntry> &getOpTable() {
  constexpr size_t kAny = std::numeric_limits<size_t>::max();
  static const std::unordered_map<std::string, OpEntry> table = {
      {"Constant", {inferConstant, 0, 0}},
      {"Identity", {inferIdentity, 1, 1}},
      {"Shape", {inferShape, 1, 1}},
      {"Size", {inferSize, 1, 1}},
      {"ConstantOfShape", {inferConstantOfShape, 1, 1}},
      {"Range", {inferRange, 3, 3}},
      {"Gather", {inferGather, 2, 2}},
      {"GatherElements", {inferGatherElements, 2, 2}},
      {"Slice", {inferSlice, 1, 5}},
      {"Trilu", {inferTrilu, 1, 2, false, 14}},
      {"ScatterND", {inferScatterND, 3, 3, false, 11}},
      {"GatherND", {inferGatherND, 2, 2, false, 11}},
      {"Concat", {inferConcat, 1, kAny, true}},
      {"Split", {inferSplit, 1, 2}},
      {"Expand", {inferExpand, 2, 2}},
      {"Tile", {inferTile, 2, 2}},
      {"Transpose", {inferTranspose, 1, 1}},
      {"Where", {inferWhere, 3, 3}},
      {"Reshape", {inferReshape, 2, 2}},
      {"Flatten", {inferFlatten, 1, 1}},
      {"Unsqueeze", {inferUnsqueeze, 1, 2}},
      {"Squeeze", {inferSqueeze, 1, 2}},
      {"Add", {inferBinaryArithmetic, 2, 2}},
      {"Sub", {inferBinaryArithmetic, 2, 2}},
      {"Mul", {inferBinaryArithmetic, 2, 2}},
      {"Div", {inferBinaryArithmetic, 2, 2}},
      {"Mod", {inferBinaryArithmetic, 2, 2}},
      {"Pow", {inferBinaryArithmetic, 2, 2}},
      {"Min", {inferVariadicMinMaxSum, 1, kAny, true}},
      {"Max", {inferVariadicMinMaxSum, 1, kAny, true}},
      {"Sum", {inferVariadicMinMaxSum, 1, kAny, true}},
      {"Equal", {inferComparison, 2, 2}},
      {"Less", {inferComparison, 2, 2}},
      {"LessOrEqual", {inferComparison, 2, 2}},
      {"Greater", {inferComparison, 2, 2}},
      {"GreaterOrEqual", {inferComparison, 2, 2}},
      {"Not", {inferLogical, 1, 1}},
      {"And", {inferLogical, 2, 2}},
      {"Or", {inferLogical, 2, 2}},
      {"Xor", {inferLogical, 2, 2}},
      {"Neg", {inferUnaryMath, 1, 1}},
      {"Abs", {inferUnaryMath, 1, 1}},
      {"Sqrt", {inferUnaryMath, 1, 1}},
      {"Reciprocal", {inferUnaryMath, 1, 1}},
      {"Exp", {inferUnaryMath, 1, 1}},
      {"Log", {inferUnaryMath, 1, 1}},
      {"Floor", {inferUnaryMath, 1, 1}},
      {"Ceil", {inferUnaryMath, 1, 1}},
      {"Erf", {inferUnaryMath, 1, 1}},
      {"Tanh", {inferUnaryMath, 1, 1}},
      {"Sigmoid", {inferUnaryMath, 1, 1}},
      {"Relu", {inferUnaryMath, 1, 1}},
      {"Cos", {inferUnaryMath, 1, 1}},
      {"Sin", {inferUnaryMath, 1, 1}},
      {"Sign", {inferUnaryMath, 1, 1}},
      {"IsNaN", {inferFloatClassification, 1, 1}},
      {"IsInf", {inferFloatClassification, 1, 1}},
      {"Gelu", {inferGelu, 1, 1, false, 20}},
      {"Cast", {inferCast, 1, 1}},
      {"CastLike", {inferCast, 2, 2, false, 15}},
      {"MatMul", {inferMatMul, 2, 2}},
      {"Gemm", {inferGemm, 2, 3}},
      {"ReduceMean", {inferReduce, 1, 2}},
      {"ReduceSum", {inferReduce, 1, 2}},
      {"ReduceMax", {inferReduce, 1, 2}},
      {"ReduceMin", {inferReduce, 1, 2}},
      {"ArgMax", {inferArgMinMax, 1, 1}},
      {"ArgMin", {inferArgMinMax, 1, 1}},
      {"Softmax", {inferSoftmax, 1, 1}},
      {"LogSoftmax", {inferSoftmax, 1, 1}},
      {"LayerNormalization", {inferLayerNormalization, 2, 3, false, 17}},
      {"CumSum", {inferCumSum, 2, 2}},
      {"Dropout", {inferDropout, 1, 3}},
  };
  return table;
}

llvm::Error opError(const std::string &opType, const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 opType + ": " + message);
}

/// Inputs an op reads only at some opsets (Unsqueeze's axes, Slice's starts
/// and ends, CumSum's axis, ...) are checked where they are read; this checks
/// what holds at every opset.
llvm::Error checkInputs(const std::string &opType, const OpEntry &entry,
                        const std::vector<const ValueInfo *> &inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool required = i < entry.requiredInputs || entry.variadic;
    if (!inputs[i] && required)
      return opError(opType,
                     "required input " + std::to_string(i) + " is missing");
    if (inputs[i] && i >= entry.maxInputs)
      return opError(opType,
                     "expects at most " + std::to_string(entry.maxInputs) +
                         " inputs, got " + std::to_string(inputs.size()));
  }
  if (inputs.size() < entry.requiredInputs)
    return opError(opType, "expects at least " +
                               std::to_string(entry.requiredInputs) +
                               " inputs, got " + std::to_string(inputs.size()));
  return llvm::Error::success();
}

} // namespace

llvm::Error inferNode(const onnx::NodeProto &node, int64_t opset,
                      const std::vector<const ValueInfo *> &inputs,
                      std::vector<ValueInfo> &outputs) {
  const std::string &opType = node.op_type();
  outputs.clear();
  outputs.resize(node.output_size());
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return opError(opType, "unsupported domain '" + node.domain() + "'");
  const auto &table = getOpTable();
  auto found = table.find(opType);
  if (found == table.end())
    return opError(opType, "unsupported operator (opset " +
                               std::to_string(opset) + ")");
  if (outputs.empty())
    return opError(opType, "the node has no outputs");
  // Ops younger than the oldest opset read: before their first version the
  // name belongs to no ONNX op, and onnxruntime refuses the node.
  if (opset < found->second.sinceOpset)
    return opError(opType, "is an operator of opset " +
                               std::to_string(found->second.sinceOpset) +
                               " and later; the model is opset " +
                               std::to_string(opset));
  if (llvm::Error err = checkAttributes(node))
    return err;
  if (llvm::Error err = checkInputs(opType, found->second, inputs))
    return err;
  NodeContext ctx(node, opset, inputs, outputs);
  if (llvm::Error err = found->second.handler(ctx))
    return err;
  // Handlers check the arithmetic they do; this is the backstop that keeps a
  // size no int64 can hold from reaching the importer, the planner or the
  // runtime, whichever handler computed it.
  for (size_t i = 0; i < outputs.size(); ++i) {
    ValueInfo &output = outputs[i];
    if (llvm::Error err = checkTensorSize(output.shape, output.type))
      return opError(opType, "output " + std::to_string(i) + ": " +
                                 llvm::toString(std::move(err)));
    // An empty tensor's contents are known: there are none. Folding it
    // keeps zero-sized values out of the IR, where ops such as nn.concat
    // (which needs an operand) have no form for them.
    if (!output.value && numElements(output.shape) == 0)
      output.value = HostTensor::fromInts(output.type, output.shape, {});
  }
  return llvm::Error::success();
}

bool isKnownOp(const std::string &opType) {
  return getOpTable().count(opType) != 0;
}

const std::vector<std::string> &knownOps() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> result;
    for (const auto &entry : getOpTable())
      result.push_back(entry.first);
    std::sort(result.begin(), result.end());
    return result;
  }();
  return names;
}

} // namespace zplan::onnx_import
