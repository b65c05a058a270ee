//===- TensorDecoding.cpp - TensorProto -> HostTensor ---------------------===//
//
// Decodes an ONNX TensorProto's contents (raw little-endian bytes, the typed
// repeated fields, or external bytes read by the caller) into a HostTensor,
// after checking that the data holds exactly the elements the dims declare.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

namespace zplan::onnx_import {

namespace {

llvm::Error decodeError(const std::string &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

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
  int64_t size = elementTypeInfo(out.type).bytes;
  const auto *data = reinterpret_cast<const unsigned char *>(bytes.data());
  for (int64_t i = 0; i < count; ++i) {
    uint64_t word = readLittleEndian(data + i * size, size);
    switch (out.type) {
    case ElementType::F32: {
      uint32_t bits = static_cast<uint32_t>(word);
      float value;
      std::memcpy(&value, &bits, sizeof(value));
      out.floats.push_back(value);
      break;
    }
    case ElementType::F64: {
      double value;
      std::memcpy(&value, &word, sizeof(value));
      out.floats.push_back(value);
      break;
    }
    case ElementType::F16:
      out.floats.push_back(halfBitsToDouble(static_cast<uint16_t>(word)));
      break;
    case ElementType::BF16:
      out.floats.push_back(bfloat16BitsToDouble(static_cast<uint16_t>(word)));
      break;
    case ElementType::I64:
      out.ints.push_back(static_cast<int64_t>(word));
      break;
    case ElementType::I32:
      out.ints.push_back(static_cast<int32_t>(static_cast<uint32_t>(word)));
      break;
    case ElementType::I8:
      out.ints.push_back(static_cast<int8_t>(static_cast<uint8_t>(word)));
      break;
    case ElementType::U8:
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
llvm::Error decodeTypedFields(const onnx::TensorProto &proto,
                              const std::string &description, HostTensor &out) {
  int64_t count = out.numElements();
  int64_t present = 0;
  switch (out.type) {
  case ElementType::F32:
    present = proto.float_data_size();
    break;
  case ElementType::F64:
    present = proto.double_data_size();
    break;
  case ElementType::I64:
    present = proto.int64_data_size();
    break;
  default:
    present = proto.int32_data_size();
    break;
  }
  if (present != count)
    return decodeError(description + " holds " + std::to_string(present) +
                       " elements, expected " + std::to_string(count));
  for (int64_t i = 0; i < count; ++i) {
    switch (out.type) {
    case ElementType::F32:
      out.floats.push_back(proto.float_data(i));
      break;
    case ElementType::F64:
      out.floats.push_back(proto.double_data(i));
      break;
    case ElementType::F16:
      out.floats.push_back(
          halfBitsToDouble(static_cast<uint16_t>(proto.int32_data(i))));
      break;
    case ElementType::BF16:
      out.floats.push_back(
          bfloat16BitsToDouble(static_cast<uint16_t>(proto.int32_data(i))));
      break;
    case ElementType::I64:
      out.ints.push_back(proto.int64_data(i));
      break;
    default:
      out.ints.push_back(wrapToElementType(proto.int32_data(i), out.type));
      break;
    }
  }
  return llvm::Error::success();
}

} // namespace

std::string onnxDataTypeName(int32_t type) {
  // TensorProto.DataType of onnx.proto at IR version 14, by number.
  static constexpr const char *kNames[] = {
      "UNDEFINED",      "FLOAT",        "UINT8",          "INT8",
      "UINT16",         "INT16",        "INT32",          "INT64",
      "STRING",         "BOOL",         "FLOAT16",        "DOUBLE",
      "UINT32",         "UINT64",       "COMPLEX64",      "COMPLEX128",
      "BFLOAT16",       "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
      "FLOAT8E5M2FNUZ", "UINT4",        "INT4",           "FLOAT4E2M1",
      "FLOAT8E8M0",     "UINT2",        "INT2",           "FLOAT6E2M3",
      "FLOAT6E3M2"};
  std::string number = std::to_string(type);
  if (type < 0 || type >= int32_t(std::size(kNames)))
    return number + " (unknown)";
  return std::string(kNames[type]) + " (" + number + ")";
}

llvm::Error decodeTensor(const onnx::TensorProto &proto, HostTensor &out,
                         const std::string *externalBytes) {
  std::string description = "tensor '" + proto.name() + "'";
  std::optional<ElementType> type = elementTypeFromOnnx(proto.data_type());
  if (!type)
    return decodeError(description + " has ONNX data type " +
                       onnxDataTypeName(proto.data_type()) +
                       ", which zplan does not support");
  out = HostTensor();
  out.type = *type;
  for (int64_t dim : proto.dims()) {
    if (dim < 0)
      return decodeError(description + " has negative dimension " +
                         std::to_string(dim));
    out.shape.push_back(dim);
  }
  // Bounds count * bytes below; the data sizes are compared with it before
  // anything is reserved.
  if (llvm::Error err = checkTensorSize(out.shape, out.type))
    return decodeError(description + ": " + llvm::toString(std::move(err)));
  int64_t count = out.numElements();
  if (count > kMaxDecodedElements)
    return decodeError(description + " has " + std::to_string(count) +
                       " elements; constants are decoded up to " +
                       std::to_string(kMaxDecodedElements) +
                       " (only floating-point initializers become parameters)");

  const std::string *bytes = nullptr;
  if (proto.data_location() == onnx::TensorProto::EXTERNAL) {
    if (!externalBytes)
      return decodeError(description +
                         " stores its data externally and no bytes were "
                         "given");
    bytes = externalBytes;
  } else if (!proto.raw_data().empty()) {
    bytes = &proto.raw_data();
  }
  if (!bytes)
    return decodeTypedFields(proto, description, out);

  int64_t expectedBytes = count * int64_t(elementTypeInfo(out.type).bytes);
  if (static_cast<int64_t>(bytes->size()) != expectedBytes)
    return decodeError(description + " of shape " + formatShape(out.shape) +
                       " has " + std::to_string(bytes->size()) +
                       " data bytes, expected " +
                       std::to_string(expectedBytes));
  if (elementTypeInfo(out.type).isFloat)
    out.floats.reserve(count);
  else
    out.ints.reserve(count);
  decodeRawBytes(*bytes, out);
  return llvm::Error::success();
}

} // namespace zplan::onnx_import
