//===- PlanBuilder.h - hand-made plans for the runtime's unit tests -------===//
//
// The pieces tests build plans from: a buffer of a kind, shape and type
// (its id the next one, its bytes its shape's), and a binding of a role.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_TEST_UNIT_PLANBUILDER_H
#define ZPLAN_TEST_UNIT_PLANBUILDER_H

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
