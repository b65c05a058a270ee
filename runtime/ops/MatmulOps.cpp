//===- MatmulOps.cpp - nn.matmul's checks and shapes ----------------------===//
//
// numpy matmul: batch dimensions broadcast, a rank-1 operand is promoted
// (and its unit dimension dropped from the result), `transpose_rhs` makes
// the rhs [..., N, K], and the optional bias broadcasts to the result.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/MatmulOps.h"

#include "runtime/ops/Attributes.h"
#include "runtime/ops/Checks.h"
#include "runtime/ops/Shapes.h"
#include "runtime/support/ShapeText.h"

#include <climits>
#include <string>

namespace zplan::ops {

bool fitsBlas(int64_t value) { return value >= 0 && value <= INT_MAX; }

namespace {

Status inferShape(const KernelCall &call, MatmulShape &shape) {
  const std::vector<int64_t> &lhs = call.operands[0].shape;
  const std::vector<int64_t> &rhs = call.operands[1].shape;
  if (lhs.empty() || rhs.empty())
    return call.error("operands must have rank >= 1, got lhs " +
                      shapeText(lhs) + " and rhs " + shapeText(rhs));
  shape.transposeRhs = intAttributeOr(call, "transpose_rhs", 0) != 0;
  if (shape.transposeRhs && rhs.size() < 2)
    return call.error("transpose_rhs needs rhs of rank >= 2, got " +
                      shapeText(rhs));
  bool lhsVector = lhs.size() == 1;
  shape.rhsVector = rhs.size() == 1;
  shape.m = lhsVector ? 1 : lhs[lhs.size() - 2];
  shape.k = lhs.back();
  int64_t rhsK;
  if (shape.rhsVector) {
    rhsK = rhs[0];
    shape.n = 1;
  } else if (shape.transposeRhs) {
    shape.n = rhs[rhs.size() - 2];
    rhsK = rhs.back();
  } else {
    rhsK = rhs[rhs.size() - 2];
    shape.n = rhs.back();
  }
  if (shape.k != rhsK)
    return call.error("contraction dimensions differ: lhs " + shapeText(lhs) +
                      " has " + std::to_string(shape.k) + ", rhs " +
                      shapeText(rhs) + " has " + std::to_string(rhsK));
  if (!lhsVector)
    shape.lhsBatch.assign(lhs.begin(), lhs.end() - 2);
  if (!shape.rhsVector)
    shape.rhsBatch.assign(rhs.begin(), rhs.end() - 2);
  if (!broadcastShapes(shape.lhsBatch, shape.rhsBatch, shape.batch))
    return call.error("batch dimensions do not broadcast: " + shapeText(lhs) +
                      " and " + shapeText(rhs));
  std::vector<int64_t> expected = shape.batch;
  if (!lhsVector)
    expected.push_back(shape.m);
  if (!shape.rhsVector)
    expected.push_back(shape.n);
  return expectShape(call, "result", call.results[0], expected);
}

} // namespace

Status checkMatmul(const KernelCall &call, MatmulShape &shape) {
  if (Status status = expectArity(call, 2, 3); !status.ok())
    return status;
  const TensorRef &lhs = call.operands[0];
  if (Status status = expectType(call, "rhs", call.operands[1], lhs.dtype);
      !status.ok())
    return status;
  // bf16 operands may produce an f32 result (and take an f32 bias).
  ElementType resultType = lhs.dtype;
  if (lhs.dtype == ElementType::BF16 &&
      call.results[0].dtype == ElementType::F32)
    resultType = ElementType::F32;
  if (call.operands.size() == 3)
    if (Status status = expectType(call, "bias", call.operands[2], resultType);
        !status.ok())
      return status;
  if (Status status = expectType(call, "result", call.results[0], resultType);
      !status.ok())
    return status;
  return inferShape(call, shape);
}

bool isBf16Product(const KernelCall &call) {
  return call.operands[0].dtype == ElementType::BF16 &&
         call.results[0].dtype == ElementType::F32;
}

bool isBf16RoundedProduct(const KernelCall &call) {
  return call.operands[0].dtype == ElementType::BF16 &&
         call.results[0].dtype == ElementType::BF16;
}

Status matmulBiasStrides(const KernelCall &call,
                         std::vector<int64_t> &strides) {
  const TensorRef &bias = call.operands[2], &result = call.results[0];
  if (!broadcastStrides(bias.shape, result.shape, strides))
    return call.error("bias of shape " + shapeText(bias.shape) +
                      " does not broadcast to the result shape " +
                      shapeText(result.shape));
  return Status::success();
}

} // namespace zplan::ops
