//===- AttentionOps.cpp - attention's and attention_grad's checks ---------===//
//
// query [..., S, D], key [..., T, D], value [..., T, Dv], all f32, and an
// optional mask that broadcasts to the scores [..., S, T]: additive (f32,
// added) or select (bool, masked_value where false).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/AttentionOps.h"

#include "runtime/ops/Attributes.h"
#include "runtime/ops/Checks.h"
#include "runtime/ops/Shapes.h"
#include "runtime/support/ShapeText.h"

#include <string>

namespace zplan::ops {

std::vector<int64_t> AttentionShape::outputShape() const {
  std::vector<int64_t> shape = batch;
  shape.insert(shape.end(), {s, dv});
  return shape;
}

Status checkAttentionShapes(const KernelCall &call, const TensorRef &query,
                            const TensorRef &key, const TensorRef &value,
                            const char *outputName, const TensorRef &output,
                            AttentionShape &shape) {
  if (query.shape.size() < 2)
    return call.error("query has shape " + shapeText(query.shape) +
                      ", expected rank >= 2 ([..., S, D])");
  size_t rank = query.shape.size();
  shape.batch.assign(query.shape.begin(), query.shape.end() - 2);
  shape.s = query.shape[rank - 2];
  shape.d = query.shape[rank - 1];
  shape.t = key.shape.size() == rank ? key.shape[rank - 2] : 0;
  shape.dv = value.shape.empty() ? 0 : value.shape.back();
  std::vector<int64_t> expected = shape.batch;
  expected.insert(expected.end(), {shape.t, shape.d});
  if (Status status = expectShape(call, "key", key, expected); !status.ok())
    return status;
  expected.back() = shape.dv;
  if (Status status = expectShape(call, "value", value, expected); !status.ok())
    return status;
  return expectShape(call, outputName, output, shape.outputShape());
}

Status readAttentionAttributes(const KernelCall &call,
                               const TensorRef *maskOperand,
                               const AttentionShape &shape, float &scale,
                               AttentionMask &mask) {
  double scaleValue;
  if (Status status = floatAttribute(call, "scale", scaleValue); !status.ok())
    return status;
  scale = static_cast<float>(scaleValue);
  mask = AttentionMask();
  if (!maskOperand) {
    mask.batchStrides.assign(shape.batch.size(), 0);
    return Status::success();
  }
  std::string kindText = textAttributeOr(call, "mask_kind", "additive");
  if (kindText == "additive") {
    if (Status status =
            expectType(call, "additive mask", *maskOperand, ElementType::F32);
        !status.ok())
      return status;
    mask.additive = maskOperand->as<float>();
  } else if (kindText == "select") {
    if (Status status =
            expectType(call, "select mask", *maskOperand, ElementType::Bool);
        !status.ok())
      return status;
    double masked;
    if (Status status = floatAttribute(call, "masked_value", masked);
        !status.ok())
      return status;
    mask.maskedValue = static_cast<float>(masked);
    mask.select = maskOperand->as<uint8_t>();
  } else {
    return call.error("mask_kind is \"" + kindText +
                      "\", expected \"additive\" or \"select\"");
  }
  std::vector<int64_t> scores = shape.batch;
  scores.insert(scores.end(), {shape.s, shape.t});
  std::vector<int64_t> strides;
  if (!broadcastStrides(maskOperand->shape, scores, strides))
    return call.error("mask of shape " + shapeText(maskOperand->shape) +
                      " does not broadcast to the scores " + shapeText(scores));
  size_t rank = scores.size();
  mask.rowStride = strides[rank - 2];
  mask.columnStride = strides[rank - 1];
  mask.batchStrides.assign(strides.begin(), strides.end() - 2);
  return Status::success();
}

/// query, key and value: f32, or bf16 (mixed precision), which the kernels
/// widen as they read; the op computes in f32 either way.
static Status expectAttentionInput(const KernelCall &call, const char *what,
                                   const TensorRef &input) {
  if (input.dtype == ElementType::BF16)
    return Status::success();
  return expectType(call, what, input, ElementType::F32);
}

Status checkAttention(const KernelCall &call, AttentionShape &shape,
                      float &scale, AttentionMask &mask) {
  if (Status status = expectArity(call, 3, 4); !status.ok())
    return status;
  const TensorRef &query = call.operands[0], &key = call.operands[1],
                  &value = call.operands[2], &result = call.results[0];
  const char *names[] = {"query", "key", "value"};
  for (size_t i = 0; i < 3; ++i)
    if (Status status = expectAttentionInput(call, names[i], call.operands[i]);
        !status.ok())
      return status;
  if (Status status = expectType(call, "result", result, ElementType::F32);
      !status.ok())
    return status;

  // Shapes: query [..., S, D], key [..., T, D], value [..., T, Dv].
  if (Status status = checkAttentionShapes(call, query, key, value, "result",
                                           result, shape);
      !status.ok())
    return status;
  // The scale, and the mask broadcast to the scores [..., S, T].
  return readAttentionAttributes(
      call, call.operands.size() == 4 ? &call.operands[3] : nullptr, shape,
      scale, mask);
}

Status checkAttentionGrad(const KernelCall &call, AttentionShape &shape,
                          float &scale, AttentionMask &mask) {
  if (Status status = expectArity(call, 4, 5, 3); !status.ok())
    return status;
  const TensorRef &dout = call.operands[0], &query = call.operands[1],
                  &key = call.operands[2], &value = call.operands[3];
  if (Status status = expectType(call, "dout", dout, ElementType::F32);
      !status.ok())
    return status;
  const char *inputNames[] = {"query", "key", "value"};
  for (size_t i = 0; i < 3; ++i)
    if (Status status =
            expectAttentionInput(call, inputNames[i], call.operands[i + 1]);
        !status.ok())
      return status;

  if (Status status =
          checkAttentionShapes(call, query, key, value, "dout", dout, shape);
      !status.ok())
    return status;

  const char *resultNames[] = {"dquery", "dkey", "dvalue"};
  for (size_t i = 0; i < 3; ++i) {
    const TensorRef &result = call.results[i], &like = call.operands[i + 1];
    if (Status status =
            expectType(call, resultNames[i], result, ElementType::F32);
        !status.ok())
      return status;
    if (Status status = expectShape(call, resultNames[i], result, like.shape);
        !status.ok())
      return status;
  }

  // The scale, and the mask broadcast to the scores [..., S, T], read as
  // the forward reads them.
  return readAttentionAttributes(
      call, call.operands.size() == 5 ? &call.operands[4] : nullptr, shape,
      scale, mask);
}

} // namespace zplan::ops
