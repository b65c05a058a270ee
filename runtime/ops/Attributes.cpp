//===- Attributes.cpp - an instruction's attributes, read by name ---------===//
//
// A linear search by name: an instruction has a handful of attributes, and
// a backend reads them once per call, before any element.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/Attributes.h"

namespace zplan::ops {

const plan::Attribute *findAttribute(const KernelCall &call,
                                     std::string_view name) {
  for (const plan::Attribute &attribute : call.instruction.attributes())
    if (attribute.name() == name)
      return &attribute;
  return nullptr;
}

Status intAttribute(const KernelCall &call, std::string_view name,
                    int64_t &value) {
  const plan::Attribute *attribute = findAttribute(call, name);
  if (!attribute)
    return call.error("missing attribute '" + std::string(name) + "'");
  if (attribute->ints_size() != 1)
    return call.error("attribute '" + std::string(name) +
                      "' should hold one integer, holds " +
                      std::to_string(attribute->ints_size()));
  value = attribute->ints(0);
  return Status::success();
}

int64_t intAttributeOr(const KernelCall &call, std::string_view name,
                       int64_t fallback) {
  const plan::Attribute *attribute = findAttribute(call, name);
  return attribute && attribute->ints_size() == 1 ? attribute->ints(0)
                                                  : fallback;
}

Status intsAttribute(const KernelCall &call, std::string_view name,
                     std::vector<int64_t> &values) {
  const plan::Attribute *attribute = findAttribute(call, name);
  if (!attribute)
    return call.error("missing attribute '" + std::string(name) + "'");
  values.assign(attribute->ints().begin(), attribute->ints().end());
  return Status::success();
}

Status floatAttribute(const KernelCall &call, std::string_view name,
                      double &value) {
  const plan::Attribute *attribute = findAttribute(call, name);
  if (!attribute)
    return call.error("missing attribute '" + std::string(name) + "'");
  if (attribute->floats_size() != 1)
    return call.error("attribute '" + std::string(name) +
                      "' should hold one float, holds " +
                      std::to_string(attribute->floats_size()));
  value = attribute->floats(0);
  return Status::success();
}

std::string textAttributeOr(const KernelCall &call, std::string_view name,
                            const std::string &fallback) {
  const plan::Attribute *attribute = findAttribute(call, name);
  return attribute ? attribute->text() : fallback;
}

} // namespace zplan::ops
