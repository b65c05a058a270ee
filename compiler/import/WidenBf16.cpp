//===- WidenBf16.cpp - a bf16 ONNX export read as float -------------------===//
//
// See WidenBf16.h. Tests: test/import/bf16-export.test.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/WidenBf16.h"

#include "compiler/Errors.h"
#include "compiler/import/OnnxImporter.h"
#include "runtime/support/Bfloat16.h"

#include <cstring>

using namespace zplan;

namespace {

constexpr int32_t kBf16 = onnx::TensorProto::BFLOAT16;
constexpr int32_t kFloat = onnx::TensorProto::FLOAT;

bool isBf16Tensor(const onnx::ValueInfoProto &value) {
  return value.type().has_tensor_type() &&
         value.type().tensor_type().elem_type() == kBf16;
}

/// The attributes that name an element type or hold a tensor value.
bool namesBf16(const onnx::AttributeProto &attribute) {
  if (attribute.type() == onnx::AttributeProto::INT)
    return (attribute.name() == "to" || attribute.name() == "dtype") &&
           attribute.i() == kBf16;
  return attribute.type() == onnx::AttributeProto::TENSOR &&
         attribute.t().data_type() == kBf16;
}

/// `tensor` (BFLOAT16) rewritten as FLOAT with the same values.
llvm::Error widenTensor(onnx::TensorProto &tensor, llvm::StringRef modelDir,
                        llvm::StringRef what) {
  std::string bytes;
  if (!tensor.raw_data().empty() ||
      tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    if (llvm::Error error = readInitializerBytes(tensor, modelDir, bytes))
      return error;
  } else {
    // The typed field of a bf16 tensor is int32_data, one value's 16 bits
    // in each int32 (onnx.proto).
    for (int32_t bits : tensor.int32_data()) {
      uint16_t value = static_cast<uint16_t>(bits);
      bytes.append(reinterpret_cast<const char *>(&value), sizeof value);
    }
  }
  int64_t elements = 1;
  for (int64_t dim : tensor.dims())
    elements *= dim;
  if (static_cast<int64_t>(bytes.size()) != 2 * elements)
    return makeError(
        what + " '" + tensor.name() + "': " + llvm::Twine(bytes.size()) +
        " bytes of bfloat16 data, " + "expected " + llvm::Twine(2 * elements));
  std::string name = tensor.name();
  std::vector<int64_t> dims(tensor.dims().begin(), tensor.dims().end());
  tensor.Clear();
  tensor.set_name(name);
  for (int64_t dim : dims)
    tensor.add_dims(dim);
  tensor.set_data_type(kFloat);
  tensor.set_raw_data(widenBf16Bytes(bytes));
  return llvm::Error::success();
}

} // namespace

std::string zplan::widenBf16Bytes(llvm::StringRef bytes) {
  std::string wide(bytes.size() * 2, '\0');
  for (size_t i = 0; i < bytes.size() / 2; ++i) {
    uint16_t half;
    std::memcpy(&half, bytes.data() + 2 * i, 2);
    float value = bf16ToFloat(half);
    std::memcpy(wide.data() + 4 * i, &value, 4);
  }
  return wide;
}

std::optional<std::string> zplan::findBf16(const onnx::ModelProto &model) {
  const onnx::GraphProto &graph = model.graph();
  for (const onnx::TensorProto &tensor : graph.initializer())
    if (tensor.data_type() == kBf16)
      return "initializer '" + tensor.name() + "' is bfloat16";
  for (const auto *values : {&graph.input(), &graph.output()})
    for (const onnx::ValueInfoProto &value : *values)
      if (isBf16Tensor(value))
        return "graph input or output '" + value.name() + "' is bfloat16";
  for (const onnx::NodeProto &node : graph.node())
    for (const onnx::AttributeProto &attribute : node.attribute())
      if (namesBf16(attribute))
        return node.op_type() + " node '" + node.name() + "' names bfloat16";
  return std::nullopt;
}

/// --no-weights: an external bf16 parameter becomes a float one of the same
/// shape, its data (never read) twice as long.
static void retypeExternal(onnx::TensorProto &tensor) {
  tensor.set_data_type(kFloat);
  for (onnx::StringStringEntryProto &entry : *tensor.mutable_external_data())
    if (entry.key() == "length") {
      int64_t length = 0;
      if (!llvm::StringRef(entry.value()).getAsInteger(10, length))
        entry.set_value(std::to_string(2 * length));
    }
}

llvm::Error zplan::widenBf16(onnx::ModelProto &model, llvm::StringRef modelDir,
                             bool readWeights) {
  onnx::GraphProto &graph = *model.mutable_graph();
  for (onnx::TensorProto &tensor : *graph.mutable_initializer()) {
    if (tensor.data_type() != kBf16)
      continue;
    int64_t elements = 1;
    for (int64_t dim : tensor.dims())
      elements *= dim;
    // Constants are read even so: the graph computes with them.
    if (!readWeights && elements > kMaxConstantInitializerElements &&
        tensor.data_location() == onnx::TensorProto::EXTERNAL) {
      retypeExternal(tensor);
      continue;
    }
    if (llvm::Error error = widenTensor(tensor, modelDir, "initializer"))
      return error;
  }
  for (auto *values : {graph.mutable_input(), graph.mutable_output(),
                       graph.mutable_value_info()})
    for (onnx::ValueInfoProto &value : *values)
      if (isBf16Tensor(value))
        value.mutable_type()->mutable_tensor_type()->set_elem_type(kFloat);
  for (onnx::NodeProto &node : *graph.mutable_node())
    for (onnx::AttributeProto &attribute : *node.mutable_attribute()) {
      if (!namesBf16(attribute))
        continue;
      if (attribute.type() == onnx::AttributeProto::INT)
        attribute.set_i(kFloat);
      else if (llvm::Error error =
                   widenTensor(*attribute.mutable_t(), modelDir,
                               "the value of " + node.op_type() + " node '" +
                                   node.name() + "', tensor"))
        return error;
    }
  return llvm::Error::success();
}
