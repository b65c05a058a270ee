//===- NormalizationOps.cpp - the norms', softmax's and gradients' checks -===//
//
// A norm's rows are input.shape[axis:] (rms_norm: the last axis), its
// weight and bias have exactly that shape; softmax runs along one axis.
// The gradients take dy and the forward's input (softmax_grad: its output)
// of one float type and shape, and return gradients shaped as what they
// differentiate.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/NormalizationOps.h"

#include "runtime/ops/Attributes.h"
#include "runtime/ops/Checks.h"
#include "runtime/ops/Shapes.h"

#include <string>

namespace zplan::ops {

Status axisAttribute(const KernelCall &call, size_t rank, size_t &axis) {
  int64_t value;
  if (Status status = intAttribute(call, "axis", value); !status.ok())
    return status;
  int64_t normalized = value < 0 ? value + static_cast<int64_t>(rank) : value;
  if (normalized < 0 || normalized >= static_cast<int64_t>(rank))
    return call.error("axis " + std::to_string(value) +
                      " is out of range for rank " + std::to_string(rank));
  axis = static_cast<size_t>(normalized);
  return Status::success();
}

Status expectNormalizedParameter(const KernelCall &call, const char *what,
                                 const TensorRef &parameter,
                                 const TensorRef &input, size_t axis) {
  if (Status status = expectType(call, what, parameter, input.dtype);
      !status.ok())
    return status;
  std::vector<int64_t> normalized(input.shape.begin() + axis,
                                  input.shape.end());
  return expectShape(call, what, parameter, normalized);
}

Status readSoftmaxLines(const KernelCall &call,
                        const std::vector<int64_t> &shape,
                        SoftmaxLines &lines) {
  size_t axis;
  if (Status status = axisAttribute(call, shape.size(), axis); !status.ok())
    return status;
  lines.outer = product(shape, 0, axis);
  lines.length = shape[axis];
  lines.inner = product(shape, axis + 1);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// layer_norm, rms_norm, softmax
//===----------------------------------------------------------------------===//

Status readLayerNorm(const KernelCall &call, NormRows &norm) {
  if (Status status = expectArity(call, 1, 3); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (Status status = expectLike(call, "result", result, input); !status.ok())
    return status;
  size_t axis;
  if (Status status = axisAttribute(call, input.shape.size(), axis);
      !status.ok())
    return status;
  if (Status status = floatAttribute(call, "epsilon", norm.epsilon);
      !status.ok())
    return status;

  // The plan lists only the present operands; operandSegmentSizes
  // (input, weight, bias) says which of the optional ones they are. Without
  // it only the unambiguous counts can be read.
  bool hasWeight, hasBias;
  size_t count = call.operands.size();
  const plan::Attribute *segments = findAttribute(call, "operandSegmentSizes");
  if (segments && segments->ints_size() == 3) {
    int64_t input = segments->ints(0), weight = segments->ints(1),
            bias = segments->ints(2);
    if (input != 1 || weight < 0 || weight > 1 || bias < 0 || bias > 1 ||
        static_cast<size_t>(input + weight + bias) != count)
      return call.error("operandSegmentSizes [" + std::to_string(input) + ", " +
                        std::to_string(weight) + ", " + std::to_string(bias) +
                        "] does not describe " + std::to_string(count) +
                        " operands");
    hasWeight = weight == 1;
    hasBias = bias == 1;
  } else if (count == 2) {
    return call.error("2 operands but no operandSegmentSizes of 3 entries to "
                      "tell whether the second is the weight or the bias");
  } else {
    hasWeight = hasBias = count == 3;
  }
  norm.weight = hasWeight ? &call.operands[1] : nullptr;
  norm.bias = hasBias ? &call.operands[hasWeight ? 2 : 1] : nullptr;
  if (norm.weight)
    if (Status status = expectNormalizedParameter(call, "weight", *norm.weight,
                                                  input, axis);
        !status.ok())
      return status;
  if (norm.bias)
    if (Status status =
            expectNormalizedParameter(call, "bias", *norm.bias, input, axis);
        !status.ok())
      return status;
  norm.rows = product(input.shape, 0, axis);
  norm.width = product(input.shape, axis);
  return Status::success();
}

Status readRmsNorm(const KernelCall &call, NormRows &norm) {
  if (Status status = expectArity(call, 1, 2); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (Status status = expectLike(call, "result", result, input); !status.ok())
    return status;
  if (input.shape.empty())
    return call.error("input must have rank >= 1");
  size_t axis = input.shape.size() - 1;
  if (Status status = floatAttribute(call, "epsilon", norm.epsilon);
      !status.ok())
    return status;
  norm.weight = call.operands.size() == 2 ? &call.operands[1] : nullptr;
  if (norm.weight)
    if (Status status = expectNormalizedParameter(call, "weight", *norm.weight,
                                                  input, axis);
        !status.ok())
      return status;
  norm.width = input.shape.back();
  norm.rows = norm.width == 0 ? 0 : input.numElements() / norm.width;
  return Status::success();
}

Status readSoftmax(const KernelCall &call, SoftmaxLines &lines) {
  if (Status status = expectArity(call, 1, 1); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (Status status = expectLike(call, "result", result, input); !status.ok())
    return status;
  return readSoftmaxLines(call, input.shape, lines);
}

//===----------------------------------------------------------------------===//
// Their gradients
//===----------------------------------------------------------------------===//

namespace {

/// A float dy, and an input of its type and shape.
Status checkGradientAndInput(const KernelCall &call, const char *inputName) {
  const TensorRef &dy = call.operands[0], &input = call.operands[1];
  if (Status status = expectFloatType(call, "dy", dy); !status.ok())
    return status;
  return expectLike(call, inputName, input, dy);
}

/// The weight (input.shape[axis:], input's type) and the dinput and dweight
/// results both norm gradients have.
Status checkWeightAndGradients(const KernelCall &call, size_t axis) {
  const TensorRef &input = call.operands[1], &weight = call.operands[2];
  if (Status status =
          expectNormalizedParameter(call, "weight", weight, input, axis);
      !status.ok())
    return status;
  if (Status status = expectLike(call, "dinput", call.results[0], input);
      !status.ok())
    return status;
  return expectLike(call, "dweight", call.results[1], weight);
}

} // namespace

Status readLayerNormGrad(const KernelCall &call, NormRows &norm) {
  if (Status status = expectArity(call, 3, 3, 3); !status.ok())
    return status;
  if (Status status = checkGradientAndInput(call, "input"); !status.ok())
    return status;
  const TensorRef &input = call.operands[1], &weight = call.operands[2];
  size_t axis;
  if (Status status = axisAttribute(call, input.shape.size(), axis);
      !status.ok())
    return status;
  if (Status status = floatAttribute(call, "epsilon", norm.epsilon);
      !status.ok())
    return status;
  if (Status status = checkWeightAndGradients(call, axis); !status.ok())
    return status;
  if (Status status = expectLike(call, "dbias", call.results[2], weight);
      !status.ok())
    return status;
  norm.rows = product(input.shape, 0, axis);
  norm.width = product(input.shape, axis);
  norm.weight = &weight;
  return Status::success();
}

Status readRmsNormGrad(const KernelCall &call, NormRows &norm) {
  if (Status status = expectArity(call, 3, 3, 2); !status.ok())
    return status;
  if (Status status = checkGradientAndInput(call, "input"); !status.ok())
    return status;
  const TensorRef &input = call.operands[1];
  if (input.shape.empty())
    return call.error("input must have rank >= 1");
  if (Status status = floatAttribute(call, "epsilon", norm.epsilon);
      !status.ok())
    return status;
  if (Status status =
          checkWeightAndGradients(call, /*axis=*/input.shape.size() - 1);
      !status.ok())
    return status;
  norm.width = input.shape.back();
  norm.rows = norm.width == 0 ? 0 : input.numElements() / norm.width;
  norm.weight = &call.operands[2];
  return Status::success();
}

Status readSoftmaxGrad(const KernelCall &call, SoftmaxLines &lines) {
  if (Status status = expectArity(call, 2, 2); !status.ok())
    return status;
  if (Status status = checkGradientAndInput(call, "y"); !status.ok())
    return status;
  const TensorRef &y = call.operands[1];
  if (Status status = expectLike(call, "dinput", call.results[0], y);
      !status.ok())
    return status;
  // The lines the forward softmax walked.
  return readSoftmaxLines(call, y.shape, lines);
}

} // namespace zplan::ops
