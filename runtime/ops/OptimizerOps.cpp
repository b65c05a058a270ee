//===- OptimizerOps.cpp - adamw's and sgd's operand checks ----------------===//
//
// An optimizer has no results: its operands (the parameter, its gradient
// and its state, f32 of one shape) are updated in place, and the last
// operand is the f32[8] hyper tensor.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/OptimizerOps.h"

#include "runtime/ops/Checks.h"

namespace zplan::ops {

Status checkOptimizerOperands(const KernelCall &call,
                              const std::vector<const char *> &names) {
  if (Status status = expectArity(call, names.size() + 1, names.size() + 1, 0);
      !status.ok())
    return status;
  const TensorRef &param = call.operands[0];
  for (size_t i = 0; i < names.size(); ++i) {
    if (Status status =
            expectType(call, names[i], call.operands[i], ElementType::F32);
        !status.ok())
      return status;
    if (Status status =
            expectShape(call, names[i], call.operands[i], param.shape);
        !status.ok())
      return status;
  }
  const TensorRef &hyper = call.operands.back();
  if (Status status = expectType(call, "hyper", hyper, ElementType::F32);
      !status.ok())
    return status;
  return expectShape(call, "hyper", hyper, {plan::HyperParameter_ARRAYSIZE});
}

} // namespace zplan::ops
