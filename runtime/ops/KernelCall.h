//===- KernelCall.h - one compute instruction, as every backend sees it ---===//
//
// The ops layer (runtime/ops, namespace zplan::ops) is the shared validation
// of the compute ops, designed to be called by every backend's kernels
// before they run: operand, shape and attribute checks whose errors read
// alike on every backend ("<op>: <what was wrong>"), and the per-element
// formulas both backends compile (HostDevice.h). It sits below the backends
// and above the plan: support <- plan <- ops <- {cpu, cuda}. It includes
// runtime/support, runtime/plan and runtime/Backend.h (for TensorRef), never
// a backend's headers; what one backend alone needs stays in that backend.
//
// KernelCall is what every check takes: the instruction (its op and
// attributes) and its tensors, with addresses a backend's kernels can read
// -- a check reads shapes and types, never an element.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_KERNELCALL_H
#define ZPLAN_RUNTIME_OPS_KERNELCALL_H

#include "runtime/Backend.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/support/Status.h"

#include <string>
#include <vector>

namespace zplan::ops {

/// One instruction being run: its op and attributes, and its tensors.
struct KernelCall {
  const plan::Instruction &instruction;
  const std::vector<TensorRef> &operands;
  const std::vector<TensorRef> &results;

  /// The op's name, for messages.
  std::string op() const;
  /// "<op>: <message>".
  Status error(const std::string &message) const;
};

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_KERNELCALL_H
