//===- ActivationOps.cpp - gelu's and gelu_grad's checks ------------------===//
//
// gelu's one attribute and gelu_grad's operands: dy, the forward's input
// and the result share one float type and shape.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/ActivationOps.h"

#include "runtime/ops/Attributes.h"
#include "runtime/ops/Checks.h"

#include <string>
#include <utility>

namespace zplan::ops {

Status readGeluApproximation(const KernelCall &call, bool &tanhForm) {
  std::string approximate = textAttributeOr(call, "approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return call.error("approximate is \"" + approximate +
                      "\", expected \"none\" or \"tanh\"");
  tanhForm = approximate == "tanh";
  return Status::success();
}

Status readGeluGrad(const KernelCall &call, bool &tanhForm) {
  if (Status status = expectArity(call, 2, 2); !status.ok())
    return status;
  const TensorRef &dy = call.operands[0], &input = call.operands[1],
                  &dinput = call.results[0];
  if (Status status = readGeluApproximation(call, tanhForm); !status.ok())
    return status;
  for (const auto &[what, tensor] :
       {std::pair{"input", &input}, std::pair{"result", &dinput}}) {
    if (Status status = expectType(call, what, *tensor, dy.dtype); !status.ok())
      return status;
    if (Status status = expectShape(call, what, *tensor, dy.shape);
        !status.ok())
      return status;
  }
  return Status::success();
}

} // namespace zplan::ops
