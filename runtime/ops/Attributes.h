//===- Attributes.h - an instruction's attributes, read by name -----------===//
//
// Shared validation for every backend to call: the attributes of a compute
// instruction are the nn dialect's (dialects/nn/NNOps.td), written by the
// plan emitter by name (plan::Attribute: ints for integers, bools and i64
// arrays; floats; text for strings). Every backend reads them through these
// functions, with the defaults the dialect declares, so a missing or
// malformed attribute is the same error on every backend.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_ATTRIBUTES_H
#define ZPLAN_RUNTIME_OPS_ATTRIBUTES_H

#include "runtime/ops/KernelCall.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zplan::ops {

/// The attribute called `name`, or nullptr.
const plan::Attribute *findAttribute(const KernelCall &call,
                                     std::string_view name);
/// A required scalar integer (or bool) attribute.
Status intAttribute(const KernelCall &call, std::string_view name,
                    int64_t &value);
/// A scalar integer (or bool) attribute, `fallback` when absent.
int64_t intAttributeOr(const KernelCall &call, std::string_view name,
                       int64_t fallback);
/// A required integer-array attribute (may hold no entries).
Status intsAttribute(const KernelCall &call, std::string_view name,
                     std::vector<int64_t> &values);
/// A required scalar float attribute.
Status floatAttribute(const KernelCall &call, std::string_view name,
                      double &value);
/// A string attribute, `fallback` when absent.
std::string textAttributeOr(const KernelCall &call, std::string_view name,
                            const std::string &fallback);

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_ATTRIBUTES_H
