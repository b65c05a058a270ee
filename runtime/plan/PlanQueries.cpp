//===- PlanQueries.cpp - look-ups into a validated plan -------------------===//

#include "runtime/plan/PlanQueries.h"

#include "runtime/plan/Opcodes.h"

#include "runtime/support/ElementType.h"

#include <cstdio>
#include <optional>

using namespace zplan;
using namespace zplan::plan;

const Buffer &zplan::plan::bufferOf(const Plan &plan, uint32_t id) {
  return plan.buffers(static_cast<int>(id) - 1);
}

const Buffer &zplan::plan::rootBufferOf(const Plan &plan, uint32_t id) {
  while (bufferOf(plan, id).view_of() != 0)
    id = bufferOf(plan, id).view_of();
  return bufferOf(plan, id);
}

const Buffer &zplan::plan::gatheredShardOf(const Plan &plan,
                                           const Program &program,
                                           int position) {
  const Buffer &source =
      rootBufferOf(plan, program.instructions(position).operands(0));
  if (source.kind() != Buffer::ARENA)
    return source;
  for (int index = position - 1; index >= 0; --index) {
    const Instruction &writer = program.instructions(index);
    bool writes = false;
    for (uint32_t id : writer.results())
      writes |= rootBufferOf(plan, id).id() == source.id();
    if (!writes)
      continue;
    if (writer.opcode() == OPCODE_TIER_FETCH && writer.operands_size() == 1)
      return rootBufferOf(plan, writer.operands(0));
    break;
  }
  return source;
}

std::string zplan::plan::describeBuffer(const Buffer &buffer) {
  return "buffer " + std::to_string(buffer.id()) + " " +
         inQuotes(buffer.name());
}

std::string zplan::plan::describeInstruction(const Program &program,
                                             int position) {
  const Instruction &instruction = program.instructions(position);
  std::string text = "program " + inQuotes(program.name()) + ", instruction #" +
                     std::to_string(position) + " " +
                     inQuotes(opcodeName(instruction.opcode()));
  if (!instruction.location().empty())
    text += " at " + inQuotes(instruction.location());
  return text;
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
