//===- PlanQueries.cpp - what zrun's commands ask of a validated plan -----===//

#include "runtime/tooling/PlanQueries.h"

#include "runtime/support/ElementType.h"

#include <cstdio>
#include <optional>

using namespace zplan;
using namespace zplan::tooling;

std::string zplan::tooling::typeName(plan::DataType type) {
  if (std::optional<ElementType> element = elementTypeFromPlan(type))
    return std::string(elementTypeInfo(*element).numpyName);
  return "dtype " + std::to_string(static_cast<int>(type));
}

std::vector<int64_t> zplan::tooling::shapeOf(const plan::Buffer &buffer) {
  return {buffer.shape().begin(), buffer.shape().end()};
}

uint64_t zplan::tooling::elementCount(const plan::Buffer &buffer) {
  uint64_t count = 1;
  for (int64_t dimension : buffer.shape())
    count *= static_cast<uint64_t>(dimension);
  return count;
}

const plan::Buffer &zplan::tooling::bufferOf(const plan::Plan &plan,
                                             uint32_t id) {
  return plan.buffers(id - 1);
}

Status zplan::tooling::selectProgram(const plan::Plan &plan,
                                     const std::string &name,
                                     const plan::Program *&program) {
  std::string names;
  for (const plan::Program &candidate : plan.programs()) {
    if (candidate.name() == name ||
        (name.empty() &&
         (plan.programs_size() == 1 || candidate.name() == "infer"))) {
      program = &candidate;
      return Status::success();
    }
    names += (names.empty() ? "" : ", ") + inQuotes(candidate.name());
  }
  if (name.empty())
    return failure("the plan has several programs (", names,
                   "); choose one with --program");
  return failure("the plan has no program ", inQuotes(name), "; it has ",
                 names);
}

std::string zplan::tooling::planIdentity(const plan::Plan &plan) {
  char text[32];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(plan.body_checksum()));
  return text;
}

const plan::Binding *zplan::tooling::findBinding(
    const google::protobuf::RepeatedPtrField<plan::Binding> &bindings,
    const std::string &name) {
  for (const plan::Binding &binding : bindings)
    if (binding.name() == name)
      return &binding;
  return nullptr;
}
