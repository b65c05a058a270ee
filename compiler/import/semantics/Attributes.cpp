//===- Attributes.cpp - One typed reader for ONNX node attributes ---------===//
//
// ONNX stores an attribute's value in the field its `type` names (i, f,
// ints, t, ...); reading another field gives that field's default, so a
// Gemm whose transA is a STRING would silently compute A B instead of A' B.
// inferNode therefore checks the type of every attribute the importer reads
// before any handler runs, and refuses a mismatch as onnxruntime does; the
// readers below are the only way handlers (inference and the importer's)
// read attributes.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"

#include <unordered_map>

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

llvm::Error checkAttributeTypes(const onnx::NodeProto &node) {
  const auto &table = expectedTypes();
  for (const onnx::AttributeProto &attribute : node.attribute()) {
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
