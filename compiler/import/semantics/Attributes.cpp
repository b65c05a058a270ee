//===- Attributes.cpp - One typed reader for ONNX node attributes ---------===//
//
// ONNX stores an attribute's value in the field its `type` names (i, f,
// ints, t, ...); reading another field gives that field's default, so a
// Gemm whose transA is a STRING would silently compute A B instead of A' B.
// inferNode therefore checks every attribute before any handler runs: its
// name must be one the op has, and its type the one ONNX gives it; like
// onnxruntime, the importer refuses anything else. The readers below are the
// only way handlers (inference and the importer's) read attributes.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace zplan::onnx_import {

namespace {

using AttributeType = onnx::AttributeProto::AttributeType;

/// The type ONNX gives each attribute name the supported ops read. Names are
/// unambiguous across those ops (every `axis` is an INT, every `axes` INTS).
const std::unordered_map<std::string, AttributeType> &expectedTypes() {
  static const std::unordered_map<std::string, AttributeType> table = {
      {"allowzero", onnx::AttributeProto::INT},
      {"axis", onnx::AttributeProto::INT},
      {"detect_negative", onnx::AttributeProto::INT},
      {"detect_positive", onnx::AttributeProto::INT},
      {"end", onnx::AttributeProto::INT},
      {"exclusive", onnx::AttributeProto::INT},
      {"fmod", onnx::AttributeProto::INT},
      {"keepdims", onnx::AttributeProto::INT},
      {"noop_with_empty_axes", onnx::AttributeProto::INT},
      {"num_outputs", onnx::AttributeProto::INT},
      {"reverse", onnx::AttributeProto::INT},
      {"saturate", onnx::AttributeProto::INT},
      {"seed", onnx::AttributeProto::INT},
      {"select_last_index", onnx::AttributeProto::INT},
      {"start", onnx::AttributeProto::INT},
      {"stash_type", onnx::AttributeProto::INT},
      {"to", onnx::AttributeProto::INT},
      {"transA", onnx::AttributeProto::INT},
      {"transB", onnx::AttributeProto::INT},
      {"upper", onnx::AttributeProto::INT},
      {"value_int", onnx::AttributeProto::INT},
      {"alpha", onnx::AttributeProto::FLOAT},
      {"beta", onnx::AttributeProto::FLOAT},
      {"epsilon", onnx::AttributeProto::FLOAT},
      {"ratio", onnx::AttributeProto::FLOAT},
      {"value_float", onnx::AttributeProto::FLOAT},
      {"axes", onnx::AttributeProto::INTS},
      {"ends", onnx::AttributeProto::INTS},
      {"perm", onnx::AttributeProto::INTS},
      {"split", onnx::AttributeProto::INTS},
      {"starts", onnx::AttributeProto::INTS},
      {"value_ints", onnx::AttributeProto::INTS},
      {"value_floats", onnx::AttributeProto::FLOATS},
      {"value", onnx::AttributeProto::TENSOR},
      {"reduction", onnx::AttributeProto::STRING},
      {"batch_dims", onnx::AttributeProto::INT},
      {"approximate", onnx::AttributeProto::STRING},
  };
  return table;
}

/// The attributes each op has (at any opset the importer reads). ONNX
/// rejects a node with any other: a misspelt or foreign attribute is an
/// invalid model, and reading on without it would compute something else.
const std::unordered_map<std::string, std::vector<std::string>> &
attributesByOp() {
  static const std::unordered_map<std::string, std::vector<std::string>> table =
      {
          {"Constant",
           {"value", "value_float", "value_floats", "value_int", "value_ints",
            "value_string", "value_strings", "sparse_value"}},
          {"Shape", {"start", "end"}},
          // Before opset 10 Slice took these as attributes.
          {"Slice", {"starts", "ends", "axes"}},
          {"ConstantOfShape", {"value"}},
          {"Gather", {"axis"}},
          {"GatherElements", {"axis"}},
          {"Trilu", {"upper"}},
          {"ScatterND", {"reduction"}},
          {"GatherND", {"batch_dims"}},
          {"Gelu", {"approximate"}},
          {"Concat", {"axis"}},
          {"Split", {"axis", "split", "num_outputs"}},
          {"Transpose", {"perm"}},
          {"Reshape", {"allowzero"}},
          {"Flatten", {"axis"}},
          {"Unsqueeze", {"axes"}},
          {"Squeeze", {"axes"}},
          {"Mod", {"fmod"}},
          {"IsInf", {"detect_negative", "detect_positive"}},
          {"Cast", {"to", "saturate"}},
          {"CastLike", {"saturate"}},
          {"Gemm", {"alpha", "beta", "transA", "transB"}},
          {"ReduceMean", {"axes", "keepdims", "noop_with_empty_axes"}},
          {"ReduceSum", {"axes", "keepdims", "noop_with_empty_axes"}},
          {"ReduceMax", {"axes", "keepdims", "noop_with_empty_axes"}},
          {"ReduceMin", {"axes", "keepdims", "noop_with_empty_axes"}},
          {"ArgMax", {"axis", "keepdims", "select_last_index"}},
          {"ArgMin", {"axis", "keepdims", "select_last_index"}},
          {"Softmax", {"axis"}},
          {"LogSoftmax", {"axis"}},
          {"LayerNormalization", {"axis", "epsilon", "stash_type"}},
          {"CumSum", {"exclusive", "reverse"}},
          {"Dropout", {"ratio", "seed"}},
      };
  return table;
}

std::string typeSpelling(int type) {
  if (!onnx::AttributeProto::AttributeType_IsValid(type))
    return "type " + std::to_string(type);
  const std::string &name = onnx::AttributeProto::AttributeType_Name(
      static_cast<AttributeType>(type));
  return name;
}

const onnx::AttributeProto *findTyped(const onnx::NodeProto &node,
                                      const std::string &name,
                                      AttributeType type) {
  const onnx::AttributeProto *attribute = findAttribute(node, name);
  return attribute && attribute->type() == type ? attribute : nullptr;
}

} // namespace

llvm::Error checkAttributes(const onnx::NodeProto &node) {
  const auto &table = expectedTypes();
  static const std::vector<std::string> none;
  auto known = attributesByOp().find(node.op_type());
  const std::vector<std::string> &allowed =
      known == attributesByOp().end() ? none : known->second;
  for (const onnx::AttributeProto &attribute : node.attribute()) {
    if (std::find(allowed.begin(), allowed.end(), attribute.name()) ==
        allowed.end())
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     node.op_type() + ": unknown attribute '" +
                                         attribute.name() + "'");
    auto expected = table.find(attribute.name());
    if (expected == table.end() || attribute.type() == expected->second)
      continue;
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        node.op_type() + ": attribute '" + attribute.name() + "' must be " +
            typeSpelling(expected->second) + ", got " +
            typeSpelling(attribute.type()));
  }
  return llvm::Error::success();
}

const onnx::AttributeProto *findAttribute(const onnx::NodeProto &node,
                                          const std::string &name) {
  for (const onnx::AttributeProto &attribute : node.attribute())
    if (attribute.name() == name)
      return &attribute;
  return nullptr;
}

int64_t getIntAttribute(const onnx::NodeProto &node, const std::string &name,
                        int64_t defaultValue) {
  const onnx::AttributeProto *attribute =
      findTyped(node, name, onnx::AttributeProto::INT);
  return attribute ? attribute->i() : defaultValue;
}

double getFloatAttribute(const onnx::NodeProto &node, const std::string &name,
                         double defaultValue) {
  const onnx::AttributeProto *attribute =
      findTyped(node, name, onnx::AttributeProto::FLOAT);
  return attribute ? attribute->f() : defaultValue;
}

std::optional<std::vector<int64_t>>
getIntsAttribute(const onnx::NodeProto &node, const std::string &name) {
  const onnx::AttributeProto *attribute =
      findTyped(node, name, onnx::AttributeProto::INTS);
  if (!attribute)
    return std::nullopt;
  return std::vector<int64_t>(attribute->ints().begin(),
                              attribute->ints().end());
}

} // namespace zplan::onnx_import
