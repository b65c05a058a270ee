//===- PlanBuilder.h - hand-made plans for the runtime's unit tests -------===//
//
// The pieces tests build plans from: a buffer of a kind, shape and type
// (its id the next one, its bytes its shape's), an instruction (its index
// the next one, on the queue the opcode table names), and a binding of a
// role.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_TEST_UNIT_PLANBUILDER_H
#define ZPLAN_TEST_UNIT_PLANBUILDER_H

#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanFormat.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zplan::testing {

inline plan::Buffer *addBuffer(plan::Plan &plan, const std::string &name,
                               plan::Buffer::Kind kind,
                               std::vector<int64_t> shape,
                               plan::DataType dtype = plan::F32) {
  plan::Buffer *buffer = plan.add_buffers();
  buffer->set_id(plan.buffers_size());
  buffer->set_name(name);
  buffer->set_kind(kind);
  uint64_t elements = 1;
  for (int64_t extent : shape) {
    buffer->add_shape(extent);
    elements *= static_cast<uint64_t>(extent);
  }
  buffer->set_dtype(dtype);
  buffer->set_bytes(elements * plan::dataTypeSize(dtype));
  return buffer;
}

inline plan::Instruction *addInstruction(plan::Program &program,
                                         plan::Opcode opcode,
                                         std::vector<uint32_t> operands,
                                         std::vector<uint32_t> results,
                                         std::vector<uint32_t> waitFor = {}) {
  plan::Instruction *instruction = program.add_instructions();
  instruction->set_index(program.instructions_size() - 1);
  instruction->set_queue(plan::findOpcode(opcode)->queue);
  instruction->set_opcode(opcode);
  for (uint32_t id : operands)
    instruction->add_operands(id);
  for (uint32_t id : results)
    instruction->add_results(id);
  for (uint32_t index : waitFor)
    instruction->add_wait_for(index);
  return instruction;
}

inline void bind(google::protobuf::RepeatedPtrField<plan::Binding> *bindings,
                 const std::string &name, uint32_t buffer,
                 plan::BindingRole role) {
  plan::Binding *binding = bindings->Add();
  binding->set_name(name);
  binding->set_buffer(buffer);
  binding->set_role(role);
}

} // namespace zplan::testing

#endif // ZPLAN_TEST_UNIT_PLANBUILDER_H
