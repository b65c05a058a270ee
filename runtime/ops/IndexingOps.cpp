//===- IndexingOps.cpp - the data-movement ops' and gradients' checks -----===//
//
// Everything the data-movement kernels and their gradients check before
// they touch an element: types, shapes, the axis and slice attributes, and
// the strided views transpose, slice, expand and slice_grad are. The index
// *values* are each backend's to check (the CPU on the host before it
// writes, CUDA on the device).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/IndexingOps.h"

#include "runtime/ops/Attributes.h"
#include "runtime/ops/Checks.h"
#include "runtime/ops/Shapes.h"
#include "runtime/support/ShapeText.h"

#include <string>

namespace zplan::ops {

namespace {

/// dy and the result are of one float type.
Status checkFloatGradient(const KernelCall &call) {
  const TensorRef &dy = call.operands[0];
  if (Status status = expectFloatType(call, "dy", dy); !status.ok())
    return status;
  return expectType(call, "result", call.results[0], dy.dtype);
}

} // namespace

Status checkMove(const KernelCall &call) {
  if (Status status = expectArity(call, 1, 1); !status.ok())
    return status;
  return expectType(call, "result", call.results[0], call.operands[0].dtype);
}

Status checkIndexType(const KernelCall &call, const char *what,
                      const TensorRef &indices) {
  if (indices.dtype == ElementType::I64 || indices.dtype == ElementType::I32)
    return Status::success();
  return call.error(std::string(what) + " has element type " +
                    dataTypeName(indices.dtype) + ", expected i64 or i32");
}

Status dataAxisAttribute(const KernelCall &call, int64_t rank, int64_t &axis) {
  if (Status status = intAttribute(call, "axis", axis); !status.ok())
    return status;
  if (axis < 0)
    axis += rank;
  if (axis < 0 || axis >= rank)
    return call.error("axis " + std::to_string(axis) +
                      " is out of range for rank " + std::to_string(rank));
  return Status::success();
}

Status readGatherAxis(const KernelCall &call, const std::vector<int64_t> &data,
                      const TensorRef &indices, const char *gatheredName,
                      const TensorRef &gathered, int64_t &axis) {
  if (Status status =
          dataAxisAttribute(call, static_cast<int64_t>(data.size()), axis);
      !status.ok())
    return status;
  std::vector<int64_t> expected(data.begin(), data.begin() + axis);
  expected.insert(expected.end(), indices.shape.begin(), indices.shape.end());
  expected.insert(expected.end(), data.begin() + axis + 1, data.end());
  return expectShape(call, gatheredName, gathered, expected);
}

Status readSliceAttributes(const KernelCall &call, size_t rank,
                           const char *slicedName,
                           const std::vector<int64_t> &sliced,
                           std::vector<int64_t> &starts,
                           std::vector<int64_t> &steps) {
  if (Status status = intsAttribute(call, "starts", starts); !status.ok())
    return status;
  if (Status status = intsAttribute(call, "steps", steps); !status.ok())
    return status;
  if (starts.size() != rank || steps.size() != rank || sliced.size() != rank)
    return call.error(
        "starts " + shapeText(starts) + ", steps " + shapeText(steps) +
        " and " + slicedName + " " + shapeText(sliced) +
        " need one entry per input dimension (" + std::to_string(rank) + ")");
  return Status::success();
}

Status sliceView(const KernelCall &call, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps,
                 const std::vector<int64_t> &input,
                 const std::vector<int64_t> &sliced, const char *verb,
                 int64_t &base, std::vector<int64_t> &strides) {
  std::vector<int64_t> inputStrides = contiguousStrides(input);
  size_t rank = input.size();
  strides.assign(rank, 0);
  base = 0;
  bool empty = product(sliced) == 0;
  for (size_t d = 0; d < rank; ++d) {
    int64_t start = starts[d], step = steps[d], count = sliced[d];
    if (step == 0)
      return call.error("step of dimension " + std::to_string(d) + " is 0");
    int64_t last = start + (count - 1) * step;
    if (!empty &&
        (start < 0 || start >= input[d] || last < 0 || last >= input[d]))
      return call.error("dimension " + std::to_string(d) + " " + verb + " [" +
                        std::to_string(start) + ", " + std::to_string(last) +
                        "] with step " + std::to_string(step) +
                        ", outside the input extent " +
                        std::to_string(input[d]));
    base += start * inputStrides[d];
    strides[d] = step * inputStrides[d];
  }
  return Status::success();
}

Status readTranspose(const KernelCall &call, std::vector<int64_t> &strides) {
  if (Status status = checkMove(call); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  std::vector<int64_t> perm;
  if (Status status = intsAttribute(call, "perm", perm); !status.ok())
    return status;
  size_t rank = input.shape.size();
  if (perm.size() != rank)
    return call.error("perm has " + std::to_string(perm.size()) +
                      " entries, expected the input rank " +
                      std::to_string(rank));
  std::vector<int64_t> inputStrides = contiguousStrides(input.shape);
  std::vector<int64_t> expected;
  strides.clear();
  std::vector<bool> seen(rank, false);
  for (int64_t axis : perm) {
    if (axis < 0 || axis >= static_cast<int64_t>(rank) || seen[axis])
      return call.error("perm " + shapeText(perm) +
                        " is not a permutation of the input rank " +
                        std::to_string(rank));
    seen[axis] = true;
    expected.push_back(input.shape[axis]);
    strides.push_back(inputStrides[axis]);
  }
  return expectShape(call, "result", result, expected);
}

Status readSlice(const KernelCall &call, int64_t &base,
                 std::vector<int64_t> &strides) {
  if (Status status = checkMove(call); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  std::vector<int64_t> starts, steps;
  if (Status status = readSliceAttributes(call, input.shape.size(), "result",
                                          result.shape, starts, steps);
      !status.ok())
    return status;
  // Element j of dimension d reads start + j * step: the slice is a strided
  // view whose base is the starts and whose strides are the steps.
  return sliceView(call, starts, steps, input.shape, result.shape, "reads",
                   base, strides);
}

Status readExpand(const KernelCall &call, std::vector<int64_t> &strides) {
  if (Status status = checkMove(call); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (!broadcastStrides(input.shape, result.shape, strides))
    return call.error("cannot expand " + shapeText(input.shape) + " to " +
                      shapeText(result.shape));
  return Status::success();
}

Status checkReshape(const KernelCall &call) {
  if (Status status = checkMove(call); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (input.numElements() != result.numElements())
    return call.error("cannot reshape " + shapeText(input.shape) + " (" +
                      std::to_string(input.numElements()) + " elements) into " +
                      shapeText(result.shape) + " (" +
                      std::to_string(result.numElements()) + " elements)");
  return Status::success();
}

Status readConcat(const KernelCall &call, int64_t &axis, int64_t &bytes) {
  if (call.operands.empty())
    return call.error("needs at least one input");
  if (Status status = expectArity(call, 1, call.operands.size()); !status.ok())
    return status;
  const TensorRef &first = call.operands[0], &result = call.results[0];
  if (Status status = dataAxisAttribute(
          call, static_cast<int64_t>(first.shape.size()), axis);
      !status.ok())
    return status;
  std::vector<int64_t> expected = first.shape;
  expected[axis] = 0;
  for (size_t i = 0; i < call.operands.size(); ++i) {
    const TensorRef &operand = call.operands[i];
    std::string what = "input " + std::to_string(i);
    if (Status status = expectType(call, what.c_str(), operand, first.dtype);
        !status.ok())
      return status;
    std::vector<int64_t> shape = operand.shape;
    if (shape.size() == first.shape.size())
      shape[axis] = first.shape[axis];
    if (shape != first.shape)
      return call.error(what + " of shape " + shapeText(operand.shape) +
                        " differs from input 0 of shape " +
                        shapeText(first.shape) + " outside axis " +
                        std::to_string(axis));
    expected[axis] += operand.shape[axis];
  }
  if (Status status = expectType(call, "result", result, first.dtype);
      !status.ok())
    return status;
  if (Status status = expectShape(call, "result", result, expected);
      !status.ok())
    return status;
  return movableElementBytes(call, "input 0", first.dtype, bytes);
}

Status checkGather(const KernelCall &call, int64_t &axis, int64_t &bytes) {
  if (Status status = expectArity(call, 2, 2); !status.ok())
    return status;
  const TensorRef &data = call.operands[0], &indices = call.operands[1],
                  &result = call.results[0];
  if (Status status = checkIndexType(call, "indices", indices); !status.ok())
    return status;
  if (Status status = expectType(call, "result", result, data.dtype);
      !status.ok())
    return status;
  if (Status status =
          readGatherAxis(call, data.shape, indices, "result", result, axis);
      !status.ok())
    return status;
  return movableElementBytes(call, "data", data.dtype, bytes);
}

Status checkEmbedding(const KernelCall &call, int64_t &bytes) {
  if (Status status = expectArity(call, 2, 2); !status.ok())
    return status;
  const TensorRef &table = call.operands[0], &ids = call.operands[1],
                  &result = call.results[0];
  if (Status status = checkIndexType(call, "ids", ids); !status.ok())
    return status;
  if (Status status = expectType(call, "result", result, table.dtype);
      !status.ok())
    return status;
  if (table.shape.size() != 2)
    return call.error("table has shape " + shapeText(table.shape) +
                      ", expected rank 2 (rows x width)");
  std::vector<int64_t> expected = ids.shape;
  expected.push_back(table.shape[1]);
  if (Status status = expectShape(call, "result", result, expected);
      !status.ok())
    return status;
  return movableElementBytes(call, "table", table.dtype, bytes);
}

Status checkEmbeddingGrad(const KernelCall &call) {
  if (Status status = expectArity(call, 2, 2); !status.ok())
    return status;
  if (Status status = checkFloatGradient(call); !status.ok())
    return status;
  const TensorRef &dy = call.operands[0], &ids = call.operands[1],
                  &table = call.results[0];
  if (Status status = checkIndexType(call, "ids", ids); !status.ok())
    return status;
  if (table.shape.size() != 2)
    return call.error("result has shape " + shapeText(table.shape) +
                      ", expected rank 2 (rows x width)");
  std::vector<int64_t> expected = ids.shape;
  expected.push_back(table.shape[1]);
  return expectShape(call, "dy", dy, expected);
}

Status checkGatherGrad(const KernelCall &call, int64_t &axis) {
  if (Status status = expectArity(call, 2, 2); !status.ok())
    return status;
  if (Status status = checkFloatGradient(call); !status.ok())
    return status;
  const TensorRef &dy = call.operands[0], &indices = call.operands[1],
                  &data = call.results[0];
  if (Status status = checkIndexType(call, "indices", indices); !status.ok())
    return status;
  return readGatherAxis(call, data.shape, indices, "dy", dy, axis);
}

Status readSliceGrad(const KernelCall &call, int64_t &base,
                     std::vector<int64_t> &strides, int64_t &bytes) {
  if (Status status = expectArity(call, 1, 1); !status.ok())
    return status;
  const TensorRef &dy = call.operands[0], &dinput = call.results[0];
  if (Status status = expectType(call, "result", dinput, dy.dtype);
      !status.ok())
    return status;
  std::vector<int64_t> starts, steps;
  if (Status status = readSliceAttributes(call, dinput.shape.size(), "dy",
                                          dy.shape, starts, steps);
      !status.ok())
    return status;
  if (Status status = movableElementBytes(call, "dy", dy.dtype, bytes);
      !status.ok())
    return status;
  // The forward's strided view, written through instead of read.
  return sliceView(call, starts, steps, dinput.shape, dy.shape, "writes", base,
                   strides);
}

} // namespace zplan::ops
