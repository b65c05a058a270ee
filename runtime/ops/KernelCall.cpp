//===- KernelCall.cpp - the op's name in every kernel's messages ----------===//
//
// Every message a check or a kernel returns starts with the op's name, as
// runtime/plan/Opcodes.h spells it, so that a failing run names the op the
// same way on every backend.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/KernelCall.h"

#include "runtime/plan/Opcodes.h"

namespace zplan::ops {

std::string KernelCall::op() const {
  return plan::opcodeName(instruction.opcode());
}

Status KernelCall::error(const std::string &message) const {
  return Status::error(op() + ": " + message);
}

} // namespace zplan::ops
