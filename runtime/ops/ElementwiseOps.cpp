//===- ElementwiseOps.cpp - the elementwise ops' checks -------------------===//
//
// Unary ops keep their operand's type and shape; binary ops, comparisons
// and where broadcast their operands to the result shape with numpy rules
// (Shapes.h) and return the strides each operand is read with.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/ElementwiseOps.h"

#include "runtime/ops/Checks.h"
#include "runtime/ops/Shapes.h"
#include "runtime/support/ShapeText.h"

#include <string>

namespace zplan::ops {

Status checkUnary(const KernelCall &call, Domain domain) {
  if (Status status = expectArity(call, 1, 1); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (Status status = expectType(call, "result", result, input.dtype);
      !status.ok())
    return status;
  if (Status status = expectShape(call, "result", result, input.shape);
      !status.ok())
    return status;
  if (domain == Domain::Numeric && input.dtype == ElementType::Bool)
    return call.error("input has element type bool, expected a number");
  return Status::success();
}

namespace {

/// Broadcasts operand `index` (called `what`) to the result shape.
Status operandStrides(const KernelCall &call, size_t index, const char *what,
                      std::vector<int64_t> &strides) {
  const TensorRef &operand = call.operands[index];
  const std::vector<int64_t> &target = call.results[0].shape;
  if (broadcastStrides(operand.shape, target, strides))
    return Status::success();
  return call.error(
      std::string(what) + " of shape " + shapeText(operand.shape) +
      " does not broadcast to the result shape " + shapeText(target));
}

} // namespace

Status checkBinary(const KernelCall &call,
                   std::optional<ElementType> resultType,
                   std::vector<int64_t> &lhsStrides,
                   std::vector<int64_t> &rhsStrides) {
  if (Status status = expectArity(call, 2, 2); !status.ok())
    return status;
  const TensorRef &lhs = call.operands[0], &rhs = call.operands[1];
  if (Status status = expectType(call, "rhs", rhs, lhs.dtype); !status.ok())
    return status;
  if (Status status = expectType(call, "result", call.results[0],
                                 resultType.value_or(lhs.dtype));
      !status.ok())
    return status;
  if (Status status = operandStrides(call, 0, "lhs", lhsStrides); !status.ok())
    return status;
  return operandStrides(call, 1, "rhs", rhsStrides);
}

Status checkArithmetic(const KernelCall &call, std::vector<int64_t> &lhsStrides,
                       std::vector<int64_t> &rhsStrides) {
  if (Status status = checkBinary(call, std::nullopt, lhsStrides, rhsStrides);
      !status.ok())
    return status;
  if (call.operands[0].dtype == ElementType::Bool)
    return call.error("operands have element type bool, expected numbers");
  return Status::success();
}

Status checkWhere(const KernelCall &call,
                  std::array<std::vector<int64_t>, 3> &strides) {
  if (Status status = expectArity(call, 3, 3); !status.ok())
    return status;
  const TensorRef &condition = call.operands[0], &onTrue = call.operands[1],
                  &onFalse = call.operands[2], &result = call.results[0];
  if (Status status =
          expectType(call, "condition", condition, ElementType::Bool);
      !status.ok())
    return status;
  if (Status status = expectType(call, "on_false", onFalse, onTrue.dtype);
      !status.ok())
    return status;
  if (Status status = expectType(call, "result", result, onTrue.dtype);
      !status.ok())
    return status;
  const char *names[] = {"condition", "on_true", "on_false"};
  for (size_t i = 0; i < 3; ++i)
    if (Status status = operandStrides(call, i, names[i], strides[i]);
        !status.ok())
      return status;
  return Status::success();
}

Status checkCast(const KernelCall &call) {
  if (Status status = expectArity(call, 1, 1); !status.ok())
    return status;
  return expectShape(call, "result", call.results[0], call.operands[0].shape);
}

bool isBf16Cast(const KernelCall &call, Status &status) {
  ElementType from = call.operands[0].dtype, to = call.results[0].dtype;
  status = Status::success();
  if (from != ElementType::BF16 && to != ElementType::BF16)
    return false;
  bool supported = (from == ElementType::BF16 && to == ElementType::F32) ||
                   (from == ElementType::F32 && to == ElementType::BF16);
  if (!supported)
    status =
        call.error(std::string("a cast from ") + dataTypeName(from) + " to " +
                   dataTypeName(to) + ": bf16 converts to and from f32 only");
  return true;
}

} // namespace zplan::ops
