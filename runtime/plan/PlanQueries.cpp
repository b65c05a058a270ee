//===- PlanQueries.cpp - look-ups into a validated plan -------------------===//

#include "runtime/plan/PlanQueries.h"

#include "runtime/support/ElementType.h"

#include <cstdio>
#include <optional>

using namespace zplan;
using namespace zplan::plan;

const Buffer &zplan::plan::bufferOf(const Plan &plan, uint32_t id) {
  return plan.buffers(static_cast<int>(id) - 1);
}

std::vector<int64_t> zplan::plan::shapeOf(const Buffer &buffer) {
  return {buffer.shape().begin(), buffer.shape().end()};
}

uint64_t zplan::plan::elementCount(const Buffer &buffer) {
  uint64_t count = 1;
  for (int64_t dimension : buffer.shape())
    count *= static_cast<uint64_t>(dimension);
  return count;
}

std::string zplan::plan::typeName(DataType type) {
  if (std::optional<ElementType> element = elementTypeFromPlan(type))
    return std::string(elementTypeInfo(*element).numpyName);
  return "dtype " + std::to_string(static_cast<int>(type));
}

const Program *zplan::plan::findProgram(const Plan &plan, ProgramKind kind) {
  for (const Program &program : plan.programs())
    if (program.kind() == kind)
      return &program;
  return nullptr;
}

const Binding *zplan::plan::findBinding(
    const google::protobuf::RepeatedPtrField<Binding> &bindings,
    BindingRole role) {
  for (const Binding &binding : bindings)
    if (binding.role() == role)
      return &binding;
  return nullptr;
}

const Binding *zplan::plan::findBinding(
    const google::protobuf::RepeatedPtrField<Binding> &bindings,
    const std::string &name) {
  for (const Binding &binding : bindings)
    if (binding.name() == name)
      return &binding;
  return nullptr;
}

Status zplan::plan::selectProgram(const Plan &plan, const std::string &name,
                                  const Program *&program) {
  if (name.empty() && plan.programs_size() == 1) {
    program = &plan.programs(0);
    return Status::success();
  }
  std::string names;
  for (const Program &candidate : plan.programs()) {
    if (name.empty() ? candidate.kind() == PROGRAM_KIND_INFER
                     : candidate.name() == name) {
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

std::string zplan::plan::planIdentity(const Plan &plan) {
  char text[32];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(plan.body_checksum()));
  return text;
}
