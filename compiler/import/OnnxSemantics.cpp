//===- OnnxSemantics.cpp - ONNX shape inference and constant folding ------===//
//
// The ONNX operator semantics the importer needs to specialise a graph to
// static shapes. Each op family has one `infer*` function: it first derives
// the output element types and shapes from the input shapes (and from the
// inputs that must be constant for the shape to be known, such as Reshape's
// target shape), then, when every input it reads is constant and the result
// is small enough, computes the output contents. Folding computes in double
// and rounds every result to the element type's precision (integers wrap to
// the type's width), so a folded value equals what a runtime computing that
// op in the element type would produce. Ops are found through one dispatch
// table keyed by op type; see `getOpTable`.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/OnnxSemantics.h"

#include "onnx/onnx.pb.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_map>

namespace zplan::onnx_import {

//===----------------------------------------------------------------------===//
// Element types and value rounding.
//===----------------------------------------------------------------------===//

std::optional<ElementType> elementTypeFromOnnx(int32_t onnxDataType) {
  switch (onnxDataType) {
  case onnx::TensorProto::FLOAT:
    return ElementType::Float32;
  case onnx::TensorProto::FLOAT16:
    return ElementType::Float16;
  case onnx::TensorProto::BFLOAT16:
    return ElementType::BFloat16;
  case onnx::TensorProto::DOUBLE:
    return ElementType::Float64;
  case onnx::TensorProto::INT64:
    return ElementType::Int64;
  case onnx::TensorProto::INT32:
    return ElementType::Int32;
  case onnx::TensorProto::INT8:
    return ElementType::Int8;
  case onnx::TensorProto::UINT8:
    return ElementType::UInt8;
  case onnx::TensorProto::BOOL:
    return ElementType::Bool;
  default:
    return std::nullopt;
  }
}

int32_t elementTypeToOnnx(ElementType type) {
  switch (type) {
  case ElementType::Float32:
    return onnx::TensorProto::FLOAT;
  case ElementType::Float16:
    return onnx::TensorProto::FLOAT16;
  case ElementType::BFloat16:
    return onnx::TensorProto::BFLOAT16;
  case ElementType::Float64:
    return onnx::TensorProto::DOUBLE;
  case ElementType::Int64:
    return onnx::TensorProto::INT64;
  case ElementType::Int32:
    return onnx::TensorProto::INT32;
  case ElementType::Int8:
    return onnx::TensorProto::INT8;
  case ElementType::UInt8:
    return onnx::TensorProto::UINT8;
  case ElementType::Bool:
    return onnx::TensorProto::BOOL;
  }
  return onnx::TensorProto::UNDEFINED;
}

const char *elementTypeName(ElementType type) {
  switch (type) {
  case ElementType::Float32:
    return "f32";
  case ElementType::Float16:
    return "f16";
  case ElementType::BFloat16:
    return "bf16";
  case ElementType::Float64:
    return "f64";
  case ElementType::Int64:
    return "i64";
  case ElementType::Int32:
    return "i32";
  case ElementType::Int8:
    return "i8";
  case ElementType::UInt8:
    return "ui8";
  case ElementType::Bool:
    return "i1";
  }
  return "?";
}

bool isFloatType(ElementType type) {
  return type == ElementType::Float32 || type == ElementType::Float16 ||
         type == ElementType::BFloat16 || type == ElementType::Float64;
}

int64_t elementByteSize(ElementType type) {
  switch (type) {
  case ElementType::Float64:
  case ElementType::Int64:
    return 8;
  case ElementType::Float32:
  case ElementType::Int32:
    return 4;
  case ElementType::Float16:
  case ElementType::BFloat16:
    return 2;
  case ElementType::Int8:
  case ElementType::UInt8:
  case ElementType::Bool:
    return 1;
  }
  return 0;
}

int64_t numElements(const std::vector<int64_t> &shape) {
  int64_t count = 1;
  for (int64_t dim : shape)
    count *= dim;
  return count;
}

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

/// Rounds a computed value to what storing it in `type` keeps.
double roundToElementType(double value, ElementType type) {
  switch (type) {
  case ElementType::Float32:
    // IEEE conversion (C Annex F): nearest-even, overflow to infinity.
    return static_cast<float>(value);
  case ElementType::Float16:
    return roundToBinaryFormat(value, 11, -14, 65504.0);
  case ElementType::BFloat16:
    return roundToBinaryFormat(value, 8, -126, 3.3895313892515355e38);
  default:
    return value;
  }
}

/// Wraps an integer to the width of `type`, as a runtime storing it would.
int64_t wrapToElementType(int64_t value, ElementType type) {
  switch (type) {
  case ElementType::Int32:
    return static_cast<int32_t>(static_cast<uint32_t>(value));
  case ElementType::Int8:
    return static_cast<int8_t>(static_cast<uint8_t>(value));
  case ElementType::UInt8:
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

} // namespace

//===----------------------------------------------------------------------===//
// HostTensor.
//===----------------------------------------------------------------------===//

double HostTensor::getDouble(int64_t i) const {
  return isFloatType(type) ? floats[i] : static_cast<double>(ints[i]);
}

int64_t HostTensor::getInt(int64_t i) const {
  return isFloatType(type) ? floatToElementType(floats[i], ElementType::Int64)
                           : ints[i];
}

// The factories convert and round to `type`, so every HostTensor keeps the
// invariant that its contents are representable in its element type.
HostTensor HostTensor::fromInts(ElementType type, std::vector<int64_t> shape,
                                std::vector<int64_t> values) {
  HostTensor tensor;
  tensor.type = type;
  tensor.shape = std::move(shape);
  if (isFloatType(type)) {
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
  if (isFloatType(type)) {
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
// TensorProto decoding.
//===----------------------------------------------------------------------===//

namespace {

double halfBitsToDouble(uint16_t bits) {
  int exponent = (bits >> 10) & 0x1f;
  int mantissa = bits & 0x3ff;
  double magnitude;
  if (exponent == 0)
    magnitude = std::ldexp(mantissa, -24);
  else if (exponent == 31)
    magnitude = mantissa ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  else
    magnitude = std::ldexp(mantissa + 1024, exponent - 25);
  return (bits & 0x8000) ? -magnitude : magnitude;
}

double bfloat16BitsToDouble(uint16_t bits) {
  // bfloat16 is the upper half of a float32.
  uint32_t floatBits = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &floatBits, sizeof(value));
  return value;
}

/// Reads `byteCount` bytes as a little-endian unsigned integer, whatever the
/// host's byte order (ONNX raw data is always little-endian).
uint64_t readLittleEndian(const unsigned char *bytes, int64_t byteCount) {
  uint64_t value = 0;
  for (int64_t i = byteCount - 1; i >= 0; --i)
    value = (value << 8) | bytes[i];
  return value;
}

void decodeRawBytes(const std::string &bytes, HostTensor &out) {
  int64_t count = out.numElements();
  int64_t size = elementByteSize(out.type);
  const auto *data = reinterpret_cast<const unsigned char *>(bytes.data());
  for (int64_t i = 0; i < count; ++i) {
    uint64_t word = readLittleEndian(data + i * size, size);
    switch (out.type) {
    case ElementType::Float32: {
      uint32_t bits = static_cast<uint32_t>(word);
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      out.floats.push_back(value);
      break;
    }
    case ElementType::Float64: {
      double value;
      std::memcpy(&value, &word, sizeof(value));
      out.floats.push_back(value);
      break;
    }
    case ElementType::Float16:
      out.floats.push_back(halfBitsToDouble(static_cast<uint16_t>(word)));
      break;
    case ElementType::BFloat16:
      out.floats.push_back(bfloat16BitsToDouble(static_cast<uint16_t>(word)));
      break;
    case ElementType::Int64:
      out.ints.push_back(static_cast<int64_t>(word));
      break;
    case ElementType::Int32:
      out.ints.push_back(static_cast<int32_t>(static_cast<uint32_t>(word)));
      break;
    case ElementType::Int8:
      out.ints.push_back(static_cast<int8_t>(static_cast<uint8_t>(word)));
      break;
    case ElementType::UInt8:
      out.ints.push_back(static_cast<uint8_t>(word));
      break;
    case ElementType::Bool:
      out.ints.push_back(word != 0);
      break;
    }
  }
}

/// Decodes the typed repeated fields. Per the ONNX spec, int32_data also
/// carries bool, int8, uint8 and the bit patterns of float16/bfloat16.
std::string decodeTypedFields(const onnx::TensorProto &proto,
                              const std::string &description, HostTensor &out) {
  int64_t count = out.numElements();
  int64_t present = 0;
  switch (out.type) {
  case ElementType::Float32:
    present = proto.float_data_size();
    break;
  case ElementType::Float64:
    present = proto.double_data_size();
    break;
  case ElementType::Int64:
    present = proto.int64_data_size();
    break;
  default:
    present = proto.int32_data_size();
    break;
  }
  if (present != count)
    return description + " holds " + std::to_string(present) +
           " elements, expected " + std::to_string(count);
  for (int64_t i = 0; i < count; ++i) {
    switch (out.type) {
    case ElementType::Float32:
      out.floats.push_back(proto.float_data(i));
      break;
    case ElementType::Float64:
      out.floats.push_back(proto.double_data(i));
      break;
    case ElementType::Float16:
      out.floats.push_back(
          halfBitsToDouble(static_cast<uint16_t>(proto.int32_data(i))));
      break;
    case ElementType::BFloat16:
      out.floats.push_back(
          bfloat16BitsToDouble(static_cast<uint16_t>(proto.int32_data(i))));
      break;
    case ElementType::Int64:
      out.ints.push_back(proto.int64_data(i));
      break;
    default:
      out.ints.push_back(wrapToElementType(proto.int32_data(i), out.type));
      break;
    }
  }
  return "";
}

} // namespace

std::string decodeTensor(const onnx::TensorProto &proto, HostTensor &out,
                         const std::string *externalBytes) {
  std::string description = "tensor '" + proto.name() + "'";
  std::optional<ElementType> type = elementTypeFromOnnx(proto.data_type());
  if (!type)
    return description + " has unsupported element type " +
           std::to_string(proto.data_type());
  out = HostTensor();
  out.type = *type;
  for (int64_t dim : proto.dims()) {
    if (dim < 0)
      return description + " has negative dimension " + std::to_string(dim);
    out.shape.push_back(dim);
  }
  int64_t count = out.numElements();

  const std::string *bytes = nullptr;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    if (!externalBytes)
      return description + " stores its data externally and no bytes were "
                           "given";
    bytes = externalBytes;
  } else if (!proto.raw_data().empty()) {
    bytes = &proto.raw_data();
  }
  if (!bytes)
    return decodeTypedFields(proto, description, out);

  int64_t expectedBytes = count * elementByteSize(out.type);
  if (static_cast<int64_t>(bytes->size()) != expectedBytes)
    return description + " of shape " + formatShape(out.shape) + " has " +
           std::to_string(bytes->size()) + " data bytes, expected " +
           std::to_string(expectedBytes);
  if (isFloatType(out.type))
    out.floats.reserve(count);
  else
    out.ints.reserve(count);
  decodeRawBytes(*bytes, out);
  return "";
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

std::string formatShape(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string text;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += "x";
    text += std::to_string(shape[i]);
  }
  return text;
}

namespace {

/// Upper bound on multiply-adds spent folding one MatMul or Gemm, so that
/// folding a product of two large constants cannot stall the compiler.
constexpr int64_t kMaxFoldedMultiplyAdds = int64_t(1) << 28;

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
                                    int64_t base = 0) {
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
  if (isFloatType(source.type)) {
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

/// A shape seen as (outer, length, inner) around one axis: the element at
/// (o, l, i) is at flat offset (o * length + l) * inner + i.
struct AxisExtents {
  int64_t outer = 1;
  int64_t length = 1;
  int64_t inner = 1;
};

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
// Node context shared by the op handlers.
//===----------------------------------------------------------------------===//

/// What a handler sees of one node: its attributes, its inputs and the outputs
/// it fills. Every diagnostic goes through `error`, so each message starts
/// with the op type.
class NodeContext {
public:
  NodeContext(const onnx::NodeProto &node, int64_t opset,
              const std::vector<const ValueInfo *> &inputs,
              std::vector<ValueInfo> &outputs)
      : node(node), opset(opset), inputs(inputs), outputs(outputs) {}

  const std::string &opType() const { return node.op_type(); }
  int64_t getOpset() const { return opset; }
  size_t numInputs() const { return inputs.size(); }
  size_t numOutputs() const { return outputs.size(); }

  /// Input `index`, or null when it is omitted.
  const ValueInfo *input(size_t index) const {
    return index < inputs.size() ? inputs[index] : nullptr;
  }

  std::string error(const std::string &message) const {
    return opType() + ": " + message;
  }

  const onnx::AttributeProto *findAttribute(const std::string &name) const {
    for (const onnx::AttributeProto &attribute : node.attribute())
      if (attribute.name() == name)
        return &attribute;
    return nullptr;
  }
  int64_t getInt(const std::string &name, int64_t defaultValue) const {
    const onnx::AttributeProto *attribute = findAttribute(name);
    return attribute ? attribute->i() : defaultValue;
  }
  double getFloat(const std::string &name, double defaultValue) const {
    const onnx::AttributeProto *attribute = findAttribute(name);
    return attribute ? attribute->f() : defaultValue;
  }
  std::optional<std::vector<int64_t>> getInts(const std::string &name) const {
    const onnx::AttributeProto *attribute = findAttribute(name);
    if (!attribute)
      return std::nullopt;
    return std::vector<int64_t>(attribute->ints().begin(),
                                attribute->ints().end());
  }

  /// Input `index` when the op cannot know its output shape without its
  /// contents; `what` names the input in the error otherwise.
  std::string getConstantInput(size_t index, const std::string &what,
                               const HostTensor *&value) const {
    const ValueInfo *info = input(index);
    std::string where = what + " (input " + std::to_string(index) + ")";
    if (!info)
      return error(where + " is missing");
    if (!info->value)
      return error(where + " is not a compile-time constant");
    value = &*info->value;
    return "";
  }

  /// True when every given input (null ones are omitted and skipped) is
  /// constant and a result of `resultShape` is small enough to fold.
  bool canFold(const std::vector<int64_t> &resultShape,
               std::initializer_list<const ValueInfo *> used) const {
    for (const ValueInfo *info : used)
      if (info && !info->value)
        return false;
    return numElements(resultShape) <= kMaxFoldedElements;
  }
  bool allInputsConstant() const {
    for (const ValueInfo *info : inputs)
      if (info && !info->value)
        return false;
    return true;
  }

  /// Records output `index` as a runtime value. Outputs the node does not
  /// name are ignored, so handlers need not check optional outputs.
  void setOutput(size_t index, ElementType type, std::vector<int64_t> shape) {
    if (index >= outputs.size())
      return;
    outputs[index] = ValueInfo{type, std::move(shape), std::nullopt};
  }
  /// Records output `index` with known contents, dropping the contents when
  /// they exceed kMaxFoldedElements.
  void setOutput(size_t index, HostTensor value) {
    if (index >= outputs.size())
      return;
    ValueInfo info{value.type, value.shape, std::nullopt};
    if (value.numElements() <= kMaxFoldedElements)
      info.value = std::move(value);
    outputs[index] = std::move(info);
  }
  void setOutput(size_t index, ValueInfo info) {
    if (index < outputs.size())
      outputs[index] = std::move(info);
  }

private:
  const onnx::NodeProto &node;
  int64_t opset;
  const std::vector<const ValueInfo *> &inputs;
  std::vector<ValueInfo> &outputs;
};

std::string axisError(const NodeContext &ctx, int64_t axis, int64_t rank) {
  return ctx.error("axis " + std::to_string(axis) +
                   " is out of range for rank " + std::to_string(rank));
}

std::string broadcastError(const NodeContext &ctx,
                           const std::vector<int64_t> &a,
                           const std::vector<int64_t> &b) {
  return ctx.error("cannot broadcast " + formatShape(a) + " with " +
                   formatShape(b));
}

std::string typeMismatchError(const NodeContext &ctx, ElementType a,
                              ElementType b) {
  return ctx.error(std::string("element types ") + elementTypeName(a) +
                   " and " + elementTypeName(b) + " differ");
}

/// Broadcasts the shapes of all `values` together, reporting the first pair
/// that does not broadcast.
std::string broadcastAll(const NodeContext &ctx,
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
  return "";
}

/// Reads a constant scalar (or one-element) integer input.
std::string getConstantScalar(const NodeContext &ctx, size_t index,
                              const std::string &what, int64_t &value) {
  const HostTensor *tensor;
  if (std::string err = ctx.getConstantInput(index, what, tensor); !err.empty())
    return err;
  if (tensor->numElements() != 1)
    return ctx.error(what + " (input " + std::to_string(index) +
                     ") must have one element, got shape " +
                     formatShape(tensor->shape));
  value = tensor->getInt(0);
  return "";
}

//===----------------------------------------------------------------------===//
// Constants and shape queries.
//===----------------------------------------------------------------------===//

std::string inferConstant(NodeContext &ctx) {
  HostTensor value;
  if (const onnx::AttributeProto *attribute = ctx.findAttribute("value")) {
    if (std::string err = decodeTensor(attribute->t(), value); !err.empty())
      return ctx.error(err);
  } else if (const auto *attribute = ctx.findAttribute("value_float")) {
    value = HostTensor::fromFloats(ElementType::Float32, {}, {attribute->f()});
  } else if (const auto *attribute = ctx.findAttribute("value_floats")) {
    std::vector<double> values(attribute->floats().begin(),
                               attribute->floats().end());
    int64_t count = values.size();
    value = HostTensor::fromFloats(ElementType::Float32, {count},
                                   std::move(values));
  } else if (const auto *attribute = ctx.findAttribute("value_int")) {
    value = HostTensor::fromInts(ElementType::Int64, {}, {attribute->i()});
  } else if (const auto *attribute = ctx.findAttribute("value_ints")) {
    std::vector<int64_t> values(attribute->ints().begin(),
                                attribute->ints().end());
    int64_t count = values.size();
    value =
        HostTensor::fromInts(ElementType::Int64, {count}, std::move(values));
  } else {
    return ctx.error("only the value, value_float(s) and value_int(s) "
                     "attributes are supported");
  }
  // A Constant's contents are model data rather than a folding result, so
  // they are kept whatever their size: dropping them would lose the data.
  ValueInfo info{value.type, value.shape, std::nullopt};
  info.value = std::move(value);
  ctx.setOutput(0, std::move(info));
  return "";
}

std::string inferIdentity(NodeContext &ctx) {
  ctx.setOutput(0, *ctx.input(0));
  return "";
}

std::string inferShape(NodeContext &ctx) {
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
  ctx.setOutput(0, HostTensor::fromInts(ElementType::Int64, {count}, dims));
  return "";
}

std::string inferSize(NodeContext &ctx) {
  ctx.setOutput(0, HostTensor::fromInts(ElementType::Int64, {},
                                        {numElements(ctx.input(0)->shape)}));
  return "";
}

std::string inferConstantOfShape(NodeContext &ctx) {
  const HostTensor *shapeTensor;
  if (std::string err = ctx.getConstantInput(0, "the shape", shapeTensor);
      !err.empty())
    return err;
  std::vector<int64_t> shape = toInts(*shapeTensor);
  for (int64_t dim : shape)
    if (dim < 0)
      return ctx.error("dimension " + std::to_string(dim) +
                       " of the shape is negative");

  HostTensor fill = HostTensor::fromFloats(ElementType::Float32, {}, {0.0});
  if (const onnx::AttributeProto *attribute = ctx.findAttribute("value")) {
    if (std::string err = decodeTensor(attribute->t(), fill); !err.empty())
      return ctx.error(err);
    if (fill.numElements() != 1)
      return ctx.error("the value attribute must have one element, got " +
                       formatShape(fill.shape));
  }
  ctx.setOutput(0, fill.type, shape);
  if (!ctx.canFold(shape, {}))
    return "";
  ctx.setOutput(
      0, pickElements(fill, std::vector<int64_t>(numElements(shape)), shape));
  return "";
}

std::string inferRange(NodeContext &ctx) {
  const HostTensor *operands[3];
  const char *names[3] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    if (std::string err = ctx.getConstantInput(i, names[i], operands[i]);
        !err.empty())
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
  if (isFloatType(type)) {
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
      return "";
    // onnxruntime accumulates in the element type (value += delta), which
    // differs from start + i * delta once rounding kicks in; mirror it.
    std::vector<double> values(count);
    double value = start;
    for (int64_t i = 0; i < count; ++i) {
      values[i] = value;
      value = roundToElementType(value + delta, type);
    }
    ctx.setOutput(0, HostTensor::fromFloats(type, {count}, std::move(values)));
    return "";
  }

  int64_t start = operands[0]->getInt(0), limit = operands[1]->getInt(0),
          delta = operands[2]->getInt(0);
  if (delta == 0)
    return ctx.error("delta is zero");
  if (delta > 0)
    count = limit > start ? (limit - start - 1) / delta + 1 : 0;
  else
    count = limit < start ? (limit - start + 1) / delta + 1 : 0;
  ctx.setOutput(0, type, {count});
  if (count > kMaxFoldedElements)
    return "";
  std::vector<int64_t> values(count);
  for (int64_t i = 0; i < count; ++i)
    values[i] = wrappingAdd(start, wrappingMul(i, delta));
  ctx.setOutput(0, HostTensor::fromInts(type, {count}, std::move(values)));
  return "";
}

//===----------------------------------------------------------------------===//
// Indexing: Gather, GatherElements, Slice, Trilu.
//===----------------------------------------------------------------------===//

std::string checkIndexType(const NodeContext &ctx, const ValueInfo &indices) {
  if (indices.type != ElementType::Int64 && indices.type != ElementType::Int32)
    return ctx.error(std::string("indices must be i32 or i64, got ") +
                     elementTypeName(indices.type));
  return "";
}

/// Normalises constant indices against an axis of `size` (negative ones count
/// from the end).
std::string normalizeIndices(const NodeContext &ctx, const HostTensor &indices,
                             int64_t size, std::vector<int64_t> &result) {
  result = toInts(indices);
  for (int64_t &index : result) {
    if (index < -size || index >= size)
      return ctx.error("index " + std::to_string(index) +
                       " out of range for axis of size " +
                       std::to_string(size));
    if (index < 0)
      index += size;
  }
  return "";
}

std::string inferGather(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0), &indices = *ctx.input(1);
  if (std::string err = checkIndexType(ctx, indices); !err.empty())
    return err;
  int64_t rank = data.shape.size();
  int64_t axisAttribute = ctx.getInt("axis", 0);
  std::optional<int64_t> axis = normalizeAxis(axisAttribute, rank);
  if (!axis)
    return axisError(ctx, axisAttribute, rank);

  // data[:axis] + indices + data[axis+1:]: a scalar index drops the axis.
  std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + *axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.shape.begin() + *axis + 1, data.shape.end());
  ctx.setOutput(0, data.type, shape);

  std::vector<int64_t> positions;
  if (indices.value)
    if (std::string err =
            normalizeIndices(ctx, *indices.value, data.shape[*axis], positions);
        !err.empty())
      return err;
  if (!ctx.canFold(shape, {&data, &indices}))
    return "";
  AxisExtents extents = extentsAround(data.shape, *axis);
  std::vector<int64_t> offsets;
  offsets.reserve(numElements(shape));
  for (int64_t outer = 0; outer < extents.outer; ++outer)
    for (int64_t position : positions)
      for (int64_t inner = 0; inner < extents.inner; ++inner)
        offsets.push_back((outer * extents.length + position) * extents.inner +
                          inner);
  ctx.setOutput(0, pickElements(*data.value, offsets, shape));
  return "";
}

std::string inferGatherElements(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0), &indices = *ctx.input(1);
  if (std::string err = checkIndexType(ctx, indices); !err.empty())
    return err;
  int64_t rank = data.shape.size();
  if (static_cast<int64_t>(indices.shape.size()) != rank || rank == 0)
    return ctx.error("data " + formatShape(data.shape) + " and indices " +
                     formatShape(indices.shape) +
                     " must have the same nonzero rank");
  int64_t axisAttribute = ctx.getInt("axis", 0);
  std::optional<int64_t> axis = normalizeAxis(axisAttribute, rank);
  if (!axis)
    return axisError(ctx, axisAttribute, rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis && indices.shape[d] > data.shape[d])
      return ctx.error("indices " + formatShape(indices.shape) +
                       " exceed data " + formatShape(data.shape) +
                       " outside the gather axis");
  ctx.setOutput(0, data.type, indices.shape);

  std::vector<int64_t> positions;
  if (indices.value)
    if (std::string err =
            normalizeIndices(ctx, *indices.value, data.shape[*axis], positions);
        !err.empty())
      return err;
  if (!ctx.canFold(indices.shape, {&data, &indices}))
    return "";
  // Walk the indices' shape with the data's strides, with the gather axis
  // zeroed out, then add each index along that axis.
  std::vector<int64_t> strides = rowMajorStrides(data.shape);
  int64_t axisStride = strides[*axis];
  strides[*axis] = 0;
  std::vector<int64_t> offsets = stridedOffsets(indices.shape, strides);
  for (size_t i = 0; i < offsets.size(); ++i)
    offsets[i] += positions[i] * axisStride;
  ctx.setOutput(0, pickElements(*data.value, offsets, indices.shape));
  return "";
}

std::string inferSlice(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.getOpset() < 10) {
    starts = ctx.getInts("starts").value_or(std::vector<int64_t>());
    ends = ctx.getInts("ends").value_or(std::vector<int64_t>());
    axes = ctx.getInts("axes").value_or(std::vector<int64_t>());
  } else {
    const char *names[4] = {"starts", "ends", "axes", "steps"};
    std::vector<int64_t> *lists[4] = {&starts, &ends, &axes, &steps};
    for (size_t i = 0; i < 4; ++i) {
      if (i >= 2 && !ctx.input(i + 1))
        continue;
      const HostTensor *tensor;
      if (std::string err = ctx.getConstantInput(i + 1, names[i], tensor);
          !err.empty())
        return err;
      *lists[i] = toInts(*tensor);
    }
  }
  if (axes.empty())
    for (int64_t i = 0; i < static_cast<int64_t>(starts.size()); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return ctx.error("starts, ends, axes and steps have different lengths");

  std::vector<int64_t> shape = data.shape;
  std::vector<int64_t> dataStrides = rowMajorStrides(data.shape);
  std::vector<int64_t> viewStrides = dataStrides;
  std::vector<bool> seen(rank, false);
  int64_t base = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    std::optional<int64_t> axis = normalizeAxis(axes[i], rank);
    if (!axis)
      return axisError(ctx, axes[i], rank);
    if (seen[*axis])
      return ctx.error("axis " + std::to_string(axes[i]) + " is repeated");
    seen[*axis] = true;
    int64_t step = steps[i];
    if (step == 0)
      return ctx.error("step for axis " + std::to_string(axes[i]) + " is 0");
    int64_t dim = data.shape[*axis];
    int64_t start = starts[i], end = ends[i];
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    // Clamp as the spec does: [0, dim] going forward, [-1, dim-1] backward,
    // which makes INT64_MAX / INT64_MIN mean "to the end".
    int64_t count = 0;
    if (dim == 0) {
      count = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      count = start > end ? (end - start + 1) / step + 1 : 0;
    }
    shape[*axis] = count;
    // With at most one element the step never applies; skipping it avoids
    // overflowing step * stride for huge steps.
    viewStrides[*axis] = count > 1 ? step * dataStrides[*axis] : 0;
    if (count > 0)
      base += start * dataStrides[*axis];
  }
  ctx.setOutput(0, data.type, shape);
  if (!ctx.canFold(shape, {&data}))
    return "";
  ctx.setOutput(0,
                pickElements(*data.value,
                             stridedOffsets(shape, viewStrides, base), shape));
  return "";
}

std::string inferTrilu(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  if (rank < 2)
    return ctx.error("input must have rank >= 2, got " +
                     formatShape(data.shape));
  int64_t diagonal = 0;
  if (ctx.input(1))
    if (std::string err = getConstantScalar(ctx, 1, "k", diagonal);
        !err.empty())
      return err;
  bool upper = ctx.getInt("upper", 1) != 0;
  ctx.setOutput(0, data.type, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return "";
  int64_t rows = data.shape[rank - 2], columns = data.shape[rank - 1];
  HostTensor result = *data.value;
  for (int64_t i = 0; i < result.numElements(); ++i) {
    int64_t row = (i / columns) % rows, column = i % columns;
    bool keep = upper ? column - row >= diagonal : column - row <= diagonal;
    if (keep)
      continue;
    if (isFloatType(result.type))
      result.floats[i] = 0;
    else
      result.ints[i] = 0;
  }
  ctx.setOutput(0, std::move(result));
  return "";
}

//===----------------------------------------------------------------------===//
// Data movement: Concat, Split, Expand, Tile, Transpose, Where.
//===----------------------------------------------------------------------===//

void appendElements(HostTensor &dest, const HostTensor &source, int64_t begin,
                    int64_t count) {
  if (isFloatType(source.type))
    dest.floats.insert(dest.floats.end(), source.floats.begin() + begin,
                       source.floats.begin() + begin + count);
  else
    dest.ints.insert(dest.ints.end(), source.ints.begin() + begin,
                     source.ints.begin() + begin + count);
}

std::string inferConcat(NodeContext &ctx) {
  const ValueInfo &first = *ctx.input(0);
  int64_t rank = first.shape.size();
  if (rank == 0)
    return ctx.error("cannot concatenate scalars");
  if (!ctx.findAttribute("axis"))
    return ctx.error("the axis attribute is required");
  int64_t axisAttribute = ctx.getInt("axis", 0);
  std::optional<int64_t> axis = normalizeAxis(axisAttribute, rank);
  if (!axis)
    return axisError(ctx, axisAttribute, rank);

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
    shape[*axis] += operand.shape[*axis];
  }
  ctx.setOutput(0, first.type, shape);
  if (!ctx.allInputsConstant() || !ctx.canFold(shape, {}))
    return "";

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
  return "";
}

std::string inferSplit(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  int64_t axisAttribute = ctx.getInt("axis", 0);
  std::optional<int64_t> axis = normalizeAxis(axisAttribute, rank);
  if (!axis)
    return axisError(ctx, axisAttribute, rank);
  int64_t dim = data.shape[*axis];
  int64_t outputs = ctx.numOutputs();

  std::vector<int64_t> sizes;
  if (ctx.getOpset() >= 13 && ctx.input(1)) {
    const HostTensor *split;
    if (std::string err = ctx.getConstantInput(1, "split", split); !err.empty())
      return err;
    sizes = toInts(*split);
  } else if (ctx.getOpset() < 13 && ctx.findAttribute("split")) {
    sizes = *ctx.getInts("split");
  } else if (ctx.getOpset() >= 18 && ctx.findAttribute("num_outputs")) {
    // Opset 18: chunks of ceil(dim / n), the last one smaller.
    int64_t parts = ctx.getInt("num_outputs", outputs);
    if (parts <= 0)
      return ctx.error("num_outputs must be positive");
    int64_t chunk = (dim + parts - 1) / parts;
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
    total += size;
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
  return "";
}

std::string inferExpand(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  const HostTensor *shapeTensor;
  if (std::string err =
          ctx.getConstantInput(1, "the target shape", shapeTensor);
      !err.empty())
    return err;
  std::vector<int64_t> target = toInts(*shapeTensor);
  std::optional<std::vector<int64_t>> shape =
      broadcastShapes(data.shape, target);
  if (!shape)
    return broadcastError(ctx, data.shape, target);
  ctx.setOutput(0, data.type, *shape);
  if (!ctx.canFold(*shape, {&data}))
    return "";
  ctx.setOutput(0, pickElements(*data.value,
                                broadcastOffsets(data.shape, *shape), *shape));
  return "";
}

std::string inferTile(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  const HostTensor *repeatsTensor;
  if (std::string err = ctx.getConstantInput(1, "repeats", repeatsTensor);
      !err.empty())
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
    shape.push_back(data.shape[d] * repeats[d]);
  }
  ctx.setOutput(0, data.type, shape);
  if (!ctx.canFold(shape, {&data}))
    return "";
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
  return "";
}

std::string inferTranspose(NodeContext &ctx) {
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
    return "";
  ctx.setOutput(
      0, pickElements(*data.value, stridedOffsets(shape, viewStrides), shape));
  return "";
}

std::string inferWhere(NodeContext &ctx) {
  const ValueInfo &condition = *ctx.input(0), &onTrue = *ctx.input(1),
                  &onFalse = *ctx.input(2);
  if (condition.type != ElementType::Bool)
    return ctx.error(std::string("condition must be i1, got ") +
                     elementTypeName(condition.type));
  if (onTrue.type != onFalse.type)
    return typeMismatchError(ctx, onTrue.type, onFalse.type);
  std::vector<int64_t> shape;
  if (std::string err =
          broadcastAll(ctx, {&condition, &onTrue, &onFalse}, shape);
      !err.empty())
    return err;
  ctx.setOutput(0, onTrue.type, shape);
  if (!ctx.canFold(shape, {&condition, &onTrue, &onFalse}))
    return "";
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
  return "";
}

//===----------------------------------------------------------------------===//
// Shape manipulation: Reshape, Flatten, Unsqueeze, Squeeze.
//===----------------------------------------------------------------------===//

/// Output of a pure reshape: the same elements under a new shape.
void setReshaped(NodeContext &ctx, const ValueInfo &data,
                 std::vector<int64_t> shape) {
  ValueInfo info{data.type, shape, data.value};
  if (info.value)
    info.value->shape = std::move(shape);
  ctx.setOutput(0, std::move(info));
}

std::string inferReshape(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  const HostTensor *shapeTensor;
  if (std::string err =
          ctx.getConstantInput(1, "the target shape", shapeTensor);
      !err.empty())
    return err;
  std::vector<int64_t> requested = toInts(*shapeTensor);
  bool allowZero = ctx.getOpset() >= 14 && ctx.getInt("allowzero", 0) != 0;
  std::string failure = ctx.error("cannot reshape " + formatShape(data.shape) +
                                  " into " + formatShape(requested));

  std::vector<int64_t> shape = requested;
  std::optional<size_t> inferred;
  int64_t knownProduct = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0 && !allowZero) {
      if (d >= data.shape.size())
        return failure;
      shape[d] = data.shape[d];
    } else if (shape[d] == -1) {
      if (inferred)
        return failure;
      inferred = d;
      continue;
    } else if (shape[d] < 0) {
      return failure;
    }
    knownProduct *= shape[d];
  }
  int64_t total = numElements(data.shape);
  if (inferred) {
    if (knownProduct == 0 || total % knownProduct != 0)
      return failure;
    shape[*inferred] = total / knownProduct;
  } else if (knownProduct != total) {
    return failure;
  }
  setReshaped(ctx, data, std::move(shape));
  return "";
}

std::string inferFlatten(NodeContext &ctx) {
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
  return "";
}

/// Axes of Unsqueeze / Squeeze: an attribute before opset 13, an input from
/// 13 on. `present` is false when neither gives any.
std::string getSqueezeAxes(NodeContext &ctx, std::vector<int64_t> &axes,
                           bool &present) {
  present = false;
  if (ctx.getOpset() < 13) {
    if (std::optional<std::vector<int64_t>> attribute = ctx.getInts("axes")) {
      axes = *attribute;
      present = true;
    }
    return "";
  }
  if (!ctx.input(1))
    return "";
  const HostTensor *tensor;
  if (std::string err = ctx.getConstantInput(1, "axes", tensor); !err.empty())
    return err;
  axes = toInts(*tensor);
  present = true;
  return "";
}

std::string inferUnsqueeze(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  std::vector<int64_t> axes;
  bool present;
  if (std::string err = getSqueezeAxes(ctx, axes, present); !err.empty())
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
  return "";
}

std::string inferSqueeze(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  std::vector<int64_t> axes;
  bool present;
  if (std::string err = getSqueezeAxes(ctx, axes, present); !err.empty())
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
  return "";
}

//===----------------------------------------------------------------------===//
// Element-wise ops.
//===----------------------------------------------------------------------===//

/// Python-style remainder (sign of the divisor), ONNX Mod with fmod = 0.
template <typename T> T flooredRemainder(T remainder, T divisor) {
  if (remainder != 0 && ((remainder < 0) != (divisor < 0)))
    remainder += divisor;
  return remainder;
}

int64_t integerPower(int64_t base, int64_t exponent) {
  if (exponent < 0)
    // Only |base| == 1 keeps a nonzero integer part.
    return base == 1 ? 1 : base == -1 ? (exponent % 2 ? -1 : 1) : 0;
  int64_t result = 1;
  while (exponent) {
    if (exponent & 1)
      result = wrappingMul(result, base);
    base = wrappingMul(base, base);
    exponent >>= 1;
  }
  return result;
}

std::string inferBinaryArithmetic(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  const ValueInfo &lhs = *ctx.input(0), &rhs = *ctx.input(1);
  // Pow alone allows the exponent a different type; the result has the
  // base's type.
  if (op != "Pow" && lhs.type != rhs.type)
    return typeMismatchError(ctx, lhs.type, rhs.type);
  std::optional<std::vector<int64_t>> shape =
      broadcastShapes(lhs.shape, rhs.shape);
  if (!shape)
    return broadcastError(ctx, lhs.shape, rhs.shape);
  ElementType type = lhs.type;
  ctx.setOutput(0, type, *shape);
  if (!ctx.canFold(*shape, {&lhs, &rhs}))
    return "";

  std::vector<int64_t> lhsAt = broadcastOffsets(lhs.shape, *shape);
  std::vector<int64_t> rhsAt = broadcastOffsets(rhs.shape, *shape);
  int64_t count = lhsAt.size();
  const HostTensor &a = *lhs.value, &b = *rhs.value;
  bool fmod = ctx.getInt("fmod", 0) != 0;

  bool integerResult =
      !isFloatType(type) && (op != "Pow" || !isFloatType(rhs.type));
  if (integerResult) {
    std::vector<int64_t> values(count);
    for (int64_t i = 0; i < count; ++i) {
      int64_t x = a.getInt(lhsAt[i]), y = b.getInt(rhsAt[i]);
      int64_t &r = values[i];
      if (op == "Add") {
        r = wrappingAdd(x, y);
      } else if (op == "Sub") {
        r = wrappingSub(x, y);
      } else if (op == "Mul") {
        r = wrappingMul(x, y);
      } else if (op == "Pow") {
        r = integerPower(x, y);
      } else {
        // Div and Mod: truncating division, like onnxruntime's C++ kernels.
        if (y == 0)
          return ctx.error("integer division by zero");
        bool overflows = x == std::numeric_limits<int64_t>::min() && y == -1;
        if (op == "Div")
          r = overflows ? x : x / y;
        else
          r = overflows ? 0 : fmod ? x % y : flooredRemainder(x % y, y);
      }
    }
    ctx.setOutput(0, HostTensor::fromInts(type, *shape, std::move(values)));
    return "";
  }

  std::vector<double> values(count);
  for (int64_t i = 0; i < count; ++i) {
    double x = a.getDouble(lhsAt[i]), y = b.getDouble(rhsAt[i]);
    double &r = values[i];
    if (op == "Add")
      r = x + y;
    else if (op == "Sub")
      r = x - y;
    else if (op == "Mul")
      r = x * y;
    else if (op == "Div")
      r = x / y;
    else if (op == "Pow")
      r = std::pow(x, y);
    else
      r = fmod ? std::fmod(x, y) : flooredRemainder(std::fmod(x, y), y);
  }
  // fromFloats rounds to the element type (or truncates, for an integer base
  // raised to a float exponent).
  ctx.setOutput(0, HostTensor::fromFloats(type, *shape, std::move(values)));
  return "";
}

std::string inferVariadicMinMaxSum(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  std::vector<const ValueInfo *> operands;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    operands.push_back(ctx.input(i));
    if (operands.back()->type != operands.front()->type)
      return typeMismatchError(ctx, operands.front()->type,
                               operands.back()->type);
  }
  std::vector<int64_t> shape;
  if (std::string err = broadcastAll(ctx, operands, shape); !err.empty())
    return err;
  ElementType type = operands.front()->type;
  ctx.setOutput(0, type, shape);
  if (!ctx.allInputsConstant() || !ctx.canFold(shape, {}))
    return "";

  int64_t count = numElements(shape);
  bool floating = isFloatType(type);
  std::vector<double> floats;
  std::vector<int64_t> ints;
  for (size_t k = 0; k < operands.size(); ++k) {
    std::vector<int64_t> at = broadcastOffsets(operands[k]->shape, shape);
    const HostTensor &value = *operands[k]->value;
    if (floating) {
      if (k == 0) {
        for (int64_t offset : at)
          floats.push_back(value.floats[offset]);
        continue;
      }
      for (int64_t i = 0; i < count; ++i) {
        double x = value.floats[at[i]];
        // NaN propagates, as in onnxruntime's Min/Max.
        if (op == "Sum")
          floats[i] = roundToElementType(floats[i] + x, type);
        else if (std::isnan(x))
          floats[i] = x;
        else if (op == "Min")
          floats[i] =
              std::isnan(floats[i]) ? floats[i] : std::min(floats[i], x);
        else
          floats[i] =
              std::isnan(floats[i]) ? floats[i] : std::max(floats[i], x);
      }
    } else {
      if (k == 0) {
        for (int64_t offset : at)
          ints.push_back(value.ints[offset]);
        continue;
      }
      for (int64_t i = 0; i < count; ++i) {
        int64_t x = value.ints[at[i]];
        ints[i] = op == "Sum"   ? wrappingAdd(ints[i], x)
                  : op == "Min" ? std::min(ints[i], x)
                                : std::max(ints[i], x);
      }
    }
  }
  ctx.setOutput(0, floating
                       ? HostTensor::fromFloats(type, shape, std::move(floats))
                       : HostTensor::fromInts(type, shape, std::move(ints)));
  return "";
}

std::string inferComparison(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  const ValueInfo &lhs = *ctx.input(0), &rhs = *ctx.input(1);
  if (lhs.type != rhs.type)
    return typeMismatchError(ctx, lhs.type, rhs.type);
  std::optional<std::vector<int64_t>> shape =
      broadcastShapes(lhs.shape, rhs.shape);
  if (!shape)
    return broadcastError(ctx, lhs.shape, rhs.shape);
  ctx.setOutput(0, ElementType::Bool, *shape);
  if (!ctx.canFold(*shape, {&lhs, &rhs}))
    return "";
  std::vector<int64_t> lhsAt = broadcastOffsets(lhs.shape, *shape);
  std::vector<int64_t> rhsAt = broadcastOffsets(rhs.shape, *shape);
  bool floating = isFloatType(lhs.type);
  std::vector<int64_t> values(lhsAt.size());
  for (size_t i = 0; i < values.size(); ++i) {
    // Compare in the storage's own domain: int64 values beyond 2^53 would
    // collide as doubles.
    int order;
    bool unordered = false;
    if (floating) {
      double x = lhs.value->floats[lhsAt[i]], y = rhs.value->floats[rhsAt[i]];
      unordered = std::isnan(x) || std::isnan(y);
      order = x < y ? -1 : x > y ? 1 : 0;
    } else {
      int64_t x = lhs.value->ints[lhsAt[i]], y = rhs.value->ints[rhsAt[i]];
      order = x < y ? -1 : x > y ? 1 : 0;
    }
    if (unordered)
      values[i] = 0;
    else if (op == "Equal")
      values[i] = order == 0;
    else if (op == "Less")
      values[i] = order < 0;
    else if (op == "LessOrEqual")
      values[i] = order <= 0;
    else if (op == "Greater")
      values[i] = order > 0;
    else
      values[i] = order >= 0;
  }
  ctx.setOutput(
      0, HostTensor::fromInts(ElementType::Bool, *shape, std::move(values)));
  return "";
}

std::string inferLogical(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  const ValueInfo &lhs = *ctx.input(0);
  if (lhs.type != ElementType::Bool)
    return ctx.error(std::string("inputs must be i1, got ") +
                     elementTypeName(lhs.type));
  if (op == "Not") {
    ctx.setOutput(0, ElementType::Bool, lhs.shape);
    if (!ctx.canFold(lhs.shape, {&lhs}))
      return "";
    std::vector<int64_t> values = lhs.value->ints;
    for (int64_t &value : values)
      value = !value;
    ctx.setOutput(0, HostTensor::fromInts(ElementType::Bool, lhs.shape,
                                          std::move(values)));
    return "";
  }
  const ValueInfo &rhs = *ctx.input(1);
  if (rhs.type != ElementType::Bool)
    return ctx.error(std::string("inputs must be i1, got ") +
                     elementTypeName(rhs.type));
  std::optional<std::vector<int64_t>> shape =
      broadcastShapes(lhs.shape, rhs.shape);
  if (!shape)
    return broadcastError(ctx, lhs.shape, rhs.shape);
  ctx.setOutput(0, ElementType::Bool, *shape);
  if (!ctx.canFold(*shape, {&lhs, &rhs}))
    return "";
  std::vector<int64_t> lhsAt = broadcastOffsets(lhs.shape, *shape);
  std::vector<int64_t> rhsAt = broadcastOffsets(rhs.shape, *shape);
  std::vector<int64_t> values(lhsAt.size());
  for (size_t i = 0; i < values.size(); ++i) {
    bool x = lhs.value->ints[lhsAt[i]], y = rhs.value->ints[rhsAt[i]];
    values[i] = op == "And" ? x && y : op == "Or" ? x || y : x != y;
  }
  ctx.setOutput(
      0, HostTensor::fromInts(ElementType::Bool, *shape, std::move(values)));
  return "";
}

std::string inferUnaryMath(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  const ValueInfo &data = *ctx.input(0);
  bool integerCapable =
      op == "Neg" || op == "Abs" || op == "Sign" || op == "Relu";
  if (!isFloatType(data.type) && !integerCapable)
    return ctx.error(std::string("integer input ") +
                     elementTypeName(data.type) + " is not supported");
  ctx.setOutput(0, data.type, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return "";

  if (!isFloatType(data.type)) {
    std::vector<int64_t> values = data.value->ints;
    for (int64_t &x : values) {
      if (op == "Neg")
        x = wrappingSub(0, x);
      else if (op == "Abs")
        x = x < 0 ? wrappingSub(0, x) : x;
      else if (op == "Sign")
        x = (x > 0) - (x < 0);
      else
        x = std::max<int64_t>(x, 0);
    }
    ctx.setOutput(
        0, HostTensor::fromInts(data.type, data.shape, std::move(values)));
    return "";
  }

  static const std::unordered_map<std::string, double (*)(double)> functions = {
      {"Neg", [](double x) { return -x; }},
      {"Abs", [](double x) { return std::fabs(x); }},
      {"Sqrt", [](double x) { return std::sqrt(x); }},
      {"Reciprocal", [](double x) { return 1.0 / x; }},
      {"Exp", [](double x) { return std::exp(x); }},
      {"Log", [](double x) { return std::log(x); }},
      {"Floor", [](double x) { return std::floor(x); }},
      {"Ceil", [](double x) { return std::ceil(x); }},
      {"Erf", [](double x) { return std::erf(x); }},
      {"Tanh", [](double x) { return std::tanh(x); }},
      {"Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
      {"Relu", [](double x) { return x > 0 ? x : 0.0; }},
      {"Cos", [](double x) { return std::cos(x); }},
      {"Sin", [](double x) { return std::sin(x); }},
      {"Sign",
       [](double x) { return std::isnan(x) ? x : double((x > 0) - (x < 0)); }},
  };
  double (*function)(double) = functions.at(op);
  std::vector<double> values = data.value->floats;
  for (double &x : values)
    x = function(x);
  ctx.setOutput(
      0, HostTensor::fromFloats(data.type, data.shape, std::move(values)));
  return "";
}

std::string inferFloatClassification(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  ctx.setOutput(0, ElementType::Bool, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return "";
  bool isNaN = ctx.opType() == "IsNaN";
  bool detectPositive = ctx.getInt("detect_positive", 1) != 0;
  bool detectNegative = ctx.getInt("detect_negative", 1) != 0;
  std::vector<int64_t> values(data.value->numElements(), 0);
  if (isFloatType(data.type)) {
    for (size_t i = 0; i < values.size(); ++i) {
      double x = data.value->floats[i];
      values[i] =
          isNaN ? std::isnan(x)
                : std::isinf(x) && (x > 0 ? detectPositive : detectNegative);
    }
  }
  ctx.setOutput(0, HostTensor::fromInts(ElementType::Bool, data.shape,
                                        std::move(values)));
  return "";
}

std::string inferCast(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  ElementType target;
  if (ctx.opType() == "CastLike") {
    target = ctx.input(1)->type;
  } else {
    const onnx::AttributeProto *to = ctx.findAttribute("to");
    if (!to)
      return ctx.error("the to attribute is required");
    std::optional<ElementType> type =
        elementTypeFromOnnx(static_cast<int32_t>(to->i()));
    if (!type)
      return ctx.error("unsupported target type " + std::to_string(to->i()));
    target = *type;
  }
  ctx.setOutput(0, target, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return "";
  // The factories implement the conversions: rounding to narrower floats,
  // truncation toward zero from float to integer, wrapping between integers.
  const HostTensor &value = *data.value;
  ctx.setOutput(0,
                isFloatType(value.type)
                    ? HostTensor::fromFloats(target, data.shape, value.floats)
                    : HostTensor::fromInts(target, data.shape, value.ints));
  return "";
}

//===----------------------------------------------------------------------===//
// Linear algebra: MatMul, Gemm.
//===----------------------------------------------------------------------===//

std::string inferMatMul(NodeContext &ctx) {
  const ValueInfo &lhs = *ctx.input(0), &rhs = *ctx.input(1);
  if (lhs.type != rhs.type)
    return typeMismatchError(ctx, lhs.type, rhs.type);
  if (lhs.shape.empty() || rhs.shape.empty())
    return ctx.error("operands must not be scalars, got " +
                     formatShape(lhs.shape) + " and " + formatShape(rhs.shape));
  // numpy rules: a 1-D lhs is a row vector and a 1-D rhs a column vector,
  // and the added dimension is dropped from the result.
  std::vector<int64_t> a = lhs.shape, b = rhs.shape;
  bool lhsVector = a.size() == 1, rhsVector = b.size() == 1;
  if (lhsVector)
    a.insert(a.begin(), 1);
  if (rhsVector)
    b.push_back(1);
  int64_t rows = a[a.size() - 2], depth = a.back();
  int64_t columns = b.back();
  if (b[b.size() - 2] != depth)
    return ctx.error("inner dimensions differ: " + formatShape(lhs.shape) +
                     " times " + formatShape(rhs.shape));
  std::vector<int64_t> batchA(a.begin(), a.end() - 2);
  std::vector<int64_t> batchB(b.begin(), b.end() - 2);
  std::optional<std::vector<int64_t>> batch = broadcastShapes(batchA, batchB);
  if (!batch)
    return ctx.error("cannot broadcast batch dimensions " +
                     formatShape(batchA) + " with " + formatShape(batchB));
  std::vector<int64_t> shape = *batch;
  if (!lhsVector)
    shape.push_back(rows);
  if (!rhsVector)
    shape.push_back(columns);
  ctx.setOutput(0, lhs.type, shape);
  int64_t batchCount = numElements(*batch);
  if (!ctx.canFold(shape, {&lhs, &rhs}) ||
      batchCount * rows * columns * depth > kMaxFoldedMultiplyAdds)
    return "";

  std::vector<int64_t> batchAt = broadcastOffsets(batchA, *batch);
  std::vector<int64_t> batchBt = broadcastOffsets(batchB, *batch);
  const HostTensor &x = *lhs.value, &y = *rhs.value;
  bool floating = isFloatType(lhs.type);
  int64_t count = batchCount * rows * columns;
  std::vector<double> floats(floating ? count : 0);
  std::vector<int64_t> ints(floating ? 0 : count);
  for (int64_t n = 0; n < batchCount; ++n) {
    int64_t aBase = batchAt[n] * rows * depth;
    int64_t bBase = batchBt[n] * depth * columns;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < columns; ++j) {
        int64_t out = (n * rows + i) * columns + j;
        // Accumulate in double (or wrapping int64) and round once: the
        // runtime's summation order is unknown, so this is the closest
        // deterministic answer.
        for (int64_t k = 0; k < depth; ++k) {
          int64_t xAt = aBase + i * depth + k, yAt = bBase + k * columns + j;
          if (floating)
            floats[out] += x.floats[xAt] * y.floats[yAt];
          else
            ints[out] =
                wrappingAdd(ints[out], wrappingMul(x.ints[xAt], y.ints[yAt]));
        }
      }
    }
  }
  ctx.setOutput(
      0, floating ? HostTensor::fromFloats(lhs.type, shape, std::move(floats))
                  : HostTensor::fromInts(lhs.type, shape, std::move(ints)));
  return "";
}

std::string inferGemm(NodeContext &ctx) {
  const ValueInfo &lhs = *ctx.input(0), &rhs = *ctx.input(1);
  const ValueInfo *bias = ctx.input(2);
  if (lhs.type != rhs.type)
    return typeMismatchError(ctx, lhs.type, rhs.type);
  if (lhs.shape.size() != 2 || rhs.shape.size() != 2)
    return ctx.error("operands must be matrices, got " +
                     formatShape(lhs.shape) + " and " + formatShape(rhs.shape));
  bool transA = ctx.getInt("transA", 0) != 0;
  bool transB = ctx.getInt("transB", 0) != 0;
  int64_t rows = lhs.shape[transA ? 1 : 0], depth = lhs.shape[transA ? 0 : 1];
  int64_t rhsDepth = rhs.shape[transB ? 1 : 0];
  int64_t columns = rhs.shape[transB ? 0 : 1];
  if (rhsDepth != depth)
    return ctx.error("inner dimensions differ: " + formatShape(lhs.shape) +
                     (transA ? " (transposed)" : "") + " times " +
                     formatShape(rhs.shape) + (transB ? " (transposed)" : ""));
  std::vector<int64_t> shape = {rows, columns};
  if (bias) {
    // C broadcasts one way only: to the result, never the result to C.
    std::optional<std::vector<int64_t>> withBias =
        broadcastShapes(bias->shape, shape);
    if (!withBias || *withBias != shape)
      return broadcastError(ctx, bias->shape, shape);
  }
  ctx.setOutput(0, lhs.type, shape);
  if (!ctx.canFold(shape, {&lhs, &rhs, bias}) ||
      rows * columns * depth > kMaxFoldedMultiplyAdds)
    return "";

  double alpha = ctx.getFloat("alpha", 1.0), beta = ctx.getFloat("beta", 1.0);
  std::vector<int64_t> biasAt;
  if (bias)
    biasAt = broadcastOffsets(bias->shape, shape);
  std::vector<double> values(rows * columns, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < columns; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < depth; ++k) {
        double x = lhs.value->getDouble(transA ? k * rows + i : i * depth + k);
        double y =
            rhs.value->getDouble(transB ? j * depth + k : k * columns + j);
        sum += x * y;
      }
      double result = alpha * sum;
      if (bias)
        result += beta * bias->value->getDouble(biasAt[i * columns + j]);
      values[i * columns + j] = result;
    }
  }
  ctx.setOutput(0, HostTensor::fromFloats(lhs.type, shape, std::move(values)));
  return "";
}

//===----------------------------------------------------------------------===//
// Reductions and normalisations: Reduce*, ArgMax/ArgMin, Softmax,
// LogSoftmax, LayerNormalization, CumSum.
//===----------------------------------------------------------------------===//

std::string inferReduce(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  // ReduceSum took axes as an input from opset 13, the others from 18.
  int64_t inputSince = op == "ReduceSum" ? 13 : 18;
  bool axesAsInput = ctx.getOpset() >= inputSince;
  // A node in the other opset's form is invalid; reading it as "no axes"
  // would reduce over every axis.
  if (axesAsInput && ctx.findAttribute("axes"))
    return ctx.error("axes is input 1 from opset " +
                     std::to_string(inputSince) +
                     ", not an attribute (the model is opset " +
                     std::to_string(ctx.getOpset()) + ")");
  if (!axesAsInput && ctx.input(1))
    return ctx.error("axes is an attribute before opset " +
                     std::to_string(inputSince) +
                     ", not an input (the model is opset " +
                     std::to_string(ctx.getOpset()) + ")");
  std::vector<int64_t> axes;
  if (axesAsInput) {
    if (ctx.input(1)) {
      const HostTensor *tensor;
      if (std::string err = ctx.getConstantInput(1, "axes", tensor);
          !err.empty())
        return err;
      axes = toInts(*tensor);
    }
    if (axes.empty() && ctx.getInt("noop_with_empty_axes", 0) != 0) {
      ctx.setOutput(0, data);
      return "";
    }
  } else {
    axes = ctx.getInts("axes").value_or(std::vector<int64_t>());
  }

  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t axis : axes) {
    std::optional<int64_t> normalized = normalizeAxis(axis, rank);
    if (!normalized)
      return axisError(ctx, axis, rank);
    reduced[*normalized] = true;
  }
  bool keepDims = ctx.getInt("keepdims", 1) != 0;
  std::vector<int64_t> keptShape, shape;
  for (int64_t d = 0; d < rank; ++d) {
    keptShape.push_back(reduced[d] ? 1 : data.shape[d]);
    if (!reduced[d] || keepDims)
      shape.push_back(keptShape.back());
  }
  ctx.setOutput(0, data.type, shape);
  // Max, Min and Mean of nothing have no value worth folding.
  if (!ctx.canFold(shape, {&data}) ||
      (op != "ReduceSum" && numElements(data.shape) == 0))
    return "";
  int64_t groupSize = numElements(data.shape) / numElements(keptShape);

  // Each input element lands on the output element it broadcasts from.
  std::vector<int64_t> target = broadcastOffsets(keptShape, data.shape);
  int64_t count = numElements(keptShape);
  const HostTensor &value = *data.value;
  if (isFloatType(data.type)) {
    double initial =
        op == "ReduceMax"   ? -std::numeric_limits<double>::infinity()
        : op == "ReduceMin" ? std::numeric_limits<double>::infinity()
                            : 0.0;
    std::vector<double> results(count, initial);
    for (size_t i = 0; i < target.size(); ++i) {
      double x = value.floats[i];
      double &r = results[target[i]];
      if (op == "ReduceMax")
        r = std::isnan(x) || x > r ? x : r;
      else if (op == "ReduceMin")
        r = std::isnan(x) || x < r ? x : r;
      else
        r += x;
    }
    if (op == "ReduceMean")
      for (double &r : results)
        r /= groupSize;
    ctx.setOutput(0,
                  HostTensor::fromFloats(data.type, shape, std::move(results)));
    return "";
  }
  int64_t initial = op == "ReduceMax"   ? std::numeric_limits<int64_t>::min()
                    : op == "ReduceMin" ? std::numeric_limits<int64_t>::max()
                                        : 0;
  std::vector<int64_t> results(count, initial);
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t x = value.ints[i];
    int64_t &r = results[target[i]];
    if (op == "ReduceMax")
      r = std::max(r, x);
    else if (op == "ReduceMin")
      r = std::min(r, x);
    else
      r = wrappingAdd(r, x);
  }
  if (op == "ReduceMean")
    for (int64_t &r : results)
      r /= groupSize;
  ctx.setOutput(0, HostTensor::fromInts(data.type, shape, std::move(results)));
  return "";
}

std::string inferArgMinMax(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  int64_t axisAttribute = ctx.getInt("axis", 0);
  std::optional<int64_t> axis = normalizeAxis(axisAttribute, rank);
  if (!axis)
    return axisError(ctx, axisAttribute, rank);
  if (data.shape[*axis] == 0)
    return ctx.error("cannot reduce the empty axis " +
                     std::to_string(axisAttribute));
  bool keepDims = ctx.getInt("keepdims", 1) != 0;
  bool selectLast = ctx.getInt("select_last_index", 0) != 0;
  bool isMax = ctx.opType() == "ArgMax";
  std::vector<int64_t> shape = data.shape;
  if (keepDims)
    shape[*axis] = 1;
  else
    shape.erase(shape.begin() + *axis);
  ctx.setOutput(0, ElementType::Int64, shape);
  if (!ctx.canFold(shape, {&data}))
    return "";

  AxisExtents extents = extentsAround(data.shape, *axis);
  std::vector<int64_t> results;
  results.reserve(extents.outer * extents.inner);
  for (int64_t outer = 0; outer < extents.outer; ++outer) {
    for (int64_t inner = 0; inner < extents.inner; ++inner) {
      auto at = [&](int64_t l) {
        return data.value->getDouble(
            (outer * extents.length + l) * extents.inner + inner);
      };
      int64_t best = 0;
      for (int64_t l = 1; l < extents.length; ++l) {
        double x = at(l), current = at(best);
        bool better = isMax ? x > current : x < current;
        if (better || (selectLast && x == current))
          best = l;
      }
      results.push_back(best);
    }
  }
  ctx.setOutput(
      0, HostTensor::fromInts(ElementType::Int64, shape, std::move(results)));
  return "";
}

std::string inferSoftmax(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  bool legacy = ctx.getOpset() < 13;
  int64_t axisAttribute = ctx.getInt("axis", legacy ? 1 : -1);
  std::optional<int64_t> axis = normalizeAxis(axisAttribute, rank);
  if (!axis)
    return axisError(ctx, axisAttribute, rank);
  if (!isFloatType(data.type))
    return ctx.error(std::string("input must be floating-point, got ") +
                     elementTypeName(data.type));
  ctx.setOutput(0, data.type, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return "";

  // Before opset 13 the input is coerced to 2-D at `axis`: the softmax runs
  // over all trailing dimensions at once.
  AxisExtents extents = extentsAround(data.shape, *axis);
  if (legacy) {
    extents.length *= extents.inner;
    extents.inner = 1;
  }
  bool logarithmic = ctx.opType() == "LogSoftmax";
  std::vector<double> values = data.value->floats;
  for (int64_t outer = 0; outer < extents.outer; ++outer) {
    for (int64_t inner = 0; inner < extents.inner; ++inner) {
      auto at = [&](int64_t l) -> double & {
        return values[(outer * extents.length + l) * extents.inner + inner];
      };
      double maximum = -std::numeric_limits<double>::infinity();
      for (int64_t l = 0; l < extents.length; ++l)
        maximum = std::max(maximum, at(l));
      double sum = 0;
      for (int64_t l = 0; l < extents.length; ++l)
        sum += std::exp(at(l) - maximum);
      for (int64_t l = 0; l < extents.length; ++l)
        at(l) = logarithmic ? at(l) - maximum - std::log(sum)
                            : std::exp(at(l) - maximum) / sum;
    }
  }
  ctx.setOutput(
      0, HostTensor::fromFloats(data.type, data.shape, std::move(values)));
  return "";
}

std::string inferLayerNormalization(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0), &scale = *ctx.input(1);
  const ValueInfo *bias = ctx.input(2);
  int64_t rank = data.shape.size();
  int64_t axisAttribute = ctx.getInt("axis", -1);
  std::optional<int64_t> axis = normalizeAxis(axisAttribute, rank);
  if (!axis)
    return axisError(ctx, axisAttribute, rank);
  if (!isFloatType(data.type))
    return ctx.error(std::string("input must be floating-point, got ") +
                     elementTypeName(data.type));
  std::vector<int64_t> normalizedShape(data.shape.begin() + *axis,
                                       data.shape.end());
  for (const ValueInfo *parameter : {&scale, bias}) {
    if (!parameter)
      continue;
    std::optional<std::vector<int64_t>> shape =
        broadcastShapes(parameter->shape, normalizedShape);
    if (!shape || *shape != normalizedShape)
      return broadcastError(ctx, parameter->shape, normalizedShape);
  }
  std::optional<ElementType> statisticsType =
      elementTypeFromOnnx(static_cast<int32_t>(ctx.getInt("stash_type", 1)));
  if (!statisticsType || !isFloatType(*statisticsType))
    return ctx.error("unsupported stash_type " +
                     std::to_string(ctx.getInt("stash_type", 1)));
  // Mean and InvStdDev keep the normalised dimensions as 1s.
  std::vector<int64_t> statisticsShape = data.shape;
  for (int64_t d = *axis; d < rank; ++d)
    statisticsShape[d] = 1;
  ctx.setOutput(0, data.type, data.shape);
  ctx.setOutput(1, *statisticsType, statisticsShape);
  ctx.setOutput(2, *statisticsType, statisticsShape);
  if (!ctx.canFold(data.shape, {&data, &scale, bias}))
    return "";

  double epsilon = ctx.getFloat("epsilon", 1e-5);
  AxisExtents extents = extentsAround(data.shape, *axis);
  int64_t length = numElements(normalizedShape);
  std::vector<int64_t> scaleAt = broadcastOffsets(scale.shape, normalizedShape);
  std::vector<int64_t> biasAt;
  if (bias)
    biasAt = broadcastOffsets(bias->shape, normalizedShape);
  std::vector<double> values(data.value->floats.size());
  std::vector<double> means, inverseDeviations;
  for (int64_t row = 0; row < extents.outer; ++row) {
    const double *x = data.value->floats.data() + row * length;
    double mean = 0, variance = 0;
    for (int64_t i = 0; i < length; ++i)
      mean += x[i];
    mean /= length;
    for (int64_t i = 0; i < length; ++i)
      variance += (x[i] - mean) * (x[i] - mean);
    variance /= length;
    double inverseDeviation = 1.0 / std::sqrt(variance + epsilon);
    for (int64_t i = 0; i < length; ++i) {
      double y =
          (x[i] - mean) * inverseDeviation * scale.value->getDouble(scaleAt[i]);
      if (bias)
        y += bias->value->getDouble(biasAt[i]);
      values[row * length + i] = y;
    }
    means.push_back(mean);
    inverseDeviations.push_back(inverseDeviation);
  }
  ctx.setOutput(
      0, HostTensor::fromFloats(data.type, data.shape, std::move(values)));
  ctx.setOutput(1, HostTensor::fromFloats(*statisticsType, statisticsShape,
                                          std::move(means)));
  ctx.setOutput(2, HostTensor::fromFloats(*statisticsType, statisticsShape,
                                          std::move(inverseDeviations)));
  return "";
}

std::string inferCumSum(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  int64_t axisValue;
  if (std::string err = getConstantScalar(ctx, 1, "axis", axisValue);
      !err.empty())
    return err;
  std::optional<int64_t> axis = normalizeAxis(axisValue, rank);
  if (!axis)
    return axisError(ctx, axisValue, rank);
  ctx.setOutput(0, data.type, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return "";

  bool exclusive = ctx.getInt("exclusive", 0) != 0;
  bool reverse = ctx.getInt("reverse", 0) != 0;
  bool floating = isFloatType(data.type);
  AxisExtents extents = extentsAround(data.shape, *axis);
  HostTensor result = *data.value;
  for (int64_t outer = 0; outer < extents.outer; ++outer) {
    for (int64_t inner = 0; inner < extents.inner; ++inner) {
      // The runtime accumulates in the element type, one element at a time,
      // so the running sum is rounded after every addition.
      double floatSum = 0;
      int64_t intSum = 0;
      for (int64_t step = 0; step < extents.length; ++step) {
        int64_t l = reverse ? extents.length - 1 - step : step;
        int64_t at = (outer * extents.length + l) * extents.inner + inner;
        if (floating) {
          double x = data.value->floats[at];
          if (!exclusive)
            floatSum = roundToElementType(floatSum + x, data.type);
          result.floats[at] = floatSum;
          if (exclusive)
            floatSum = roundToElementType(floatSum + x, data.type);
        } else {
          int64_t x = data.value->ints[at];
          if (!exclusive)
            intSum = wrappingAdd(intSum, x);
          result.ints[at] = wrapToElementType(intSum, data.type);
          if (exclusive)
            intSum = wrappingAdd(intSum, x);
        }
      }
    }
  }
  ctx.setOutput(0, std::move(result));
  return "";
}

std::string inferDropout(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  // Inference only: the op is the identity and every mask element is true.
  if (ctx.getOpset() >= 12 && ctx.input(2)) {
    int64_t training;
    if (std::string err = getConstantScalar(ctx, 2, "training_mode", training);
        !err.empty())
      return err;
    if (training)
      return ctx.error("training mode is not supported");
  }
  ctx.setOutput(0, data);
  ctx.setOutput(1, ElementType::Bool, data.shape);
  if (ctx.numOutputs() > 1 && ctx.canFold(data.shape, {}))
    ctx.setOutput(1, HostTensor::fromInts(
                         ElementType::Bool, data.shape,
                         std::vector<int64_t>(numElements(data.shape), 1)));
  return "";
}

//===----------------------------------------------------------------------===//
// Dispatch.
//===----------------------------------------------------------------------===//

using OpHandler = std::string (*)(NodeContext &);

/// How to infer one op type. Inputs below `requiredInputs` must be present;
/// a variadic op requires every input it is given.
struct OpEntry {
  OpHandler handler;
  size_t requiredInputs;
  size_t maxInputs;
  bool variadic = false;
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
      {"Trilu", {inferTrilu, 1, 2}},
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
      {"Cast", {inferCast, 1, 1}},
      {"CastLike", {inferCast, 2, 2}},
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
      {"LayerNormalization", {inferLayerNormalization, 2, 3}},
      {"CumSum", {inferCumSum, 2, 2}},
      {"Dropout", {inferDropout, 1, 3}},
  };
  return table;
}

/// Inputs an op reads only at some opsets (Unsqueeze's axes, Slice's starts
/// and ends, CumSum's axis, ...) are checked where they are read; this checks
/// what holds at every opset.
std::string checkInputs(const std::string &opType, const OpEntry &entry,
                        const std::vector<const ValueInfo *> &inputs) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool required = i < entry.requiredInputs || entry.variadic;
    if (!inputs[i] && required)
      return opType + ": required input " + std::to_string(i) + " is missing";
    if (inputs[i] && i >= entry.maxInputs)
      return opType + ": expects at most " + std::to_string(entry.maxInputs) +
             " inputs, got " + std::to_string(inputs.size());
  }
  if (inputs.size() < entry.requiredInputs)
    return opType + ": expects at least " +
           std::to_string(entry.requiredInputs) + " inputs, got " +
           std::to_string(inputs.size());
  return "";
}

} // namespace

std::string inferNode(const onnx::NodeProto &node, int64_t opset,
                      const std::vector<const ValueInfo *> &inputs,
                      std::vector<ValueInfo> &outputs) {
  const std::string &opType = node.op_type();
  outputs.clear();
  outputs.resize(node.output_size());
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return opType + ": unsupported domain '" + node.domain() + "'";
  const auto &table = getOpTable();
  auto found = table.find(opType);
  if (found == table.end())
    return opType + ": unsupported operator (opset " + std::to_string(opset) +
           ")";
  if (outputs.empty())
    return opType + ": the node has no outputs";
  if (std::string err = checkInputs(opType, found->second, inputs);
      !err.empty())
    return err;
  NodeContext ctx(node, opset, inputs, outputs);
  return found->second.handler(ctx);
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
