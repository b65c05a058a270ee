//===- DataMovement.cpp - transpose, slice, concat, gather, embedding, ... ===//
//
// Kernels that move elements without computing on them, so they dispatch on
// the element width only and work for every type. Transpose, slice and
// expand are one strided copy each (input strides permuted, stepped, or
// zeroed), merged into long runs by StridedWalk. Gather and embedding check
// every index before writing anything: an index out of range is an error
// that names it, never a read outside the table.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/IndexingSupport.h"

#include <cstring>

namespace zplan::cpu::detail {

Status checkMove(const KernelCall &call) {
  if (Status status = expectArity(call, 1, 1); !status.ok())
    return status;
  return expectType(call, "result", call.results[0], call.operands[0].dtype);
}

namespace {

/// Copies operand 0 into result 0 reading it at element `base` with element
/// `strides` (aligned to the result's rank).
Status stridedMove(const KernelCall &call, int64_t base,
                   const std::vector<int64_t> &strides) {
  const TensorRef &input = call.operands[0], &result = call.results[0];
  return dispatchBySize(call, "input", input.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    stridedCopy(input.as<T>(), base, strides, result.shape, result.as<T>());
    return Status::success();
  });
}

/// Copies `rows` rows of `rowBytes` each: row r of the result is row
/// index(r) of `source` (indices already checked).
template <typename IndexFn>
void copyRows(const uint8_t *source, uint8_t *target, int64_t rows,
              int64_t rowBytes, IndexFn index) {
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(target + r * rowBytes, source + index(r) * rowBytes,
                static_cast<size_t>(rowBytes));
}

} // namespace

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

Status checkGatherIndices(const KernelCall &call, const TensorRef &indices,
                          int64_t axis, int64_t extent) {
  return checkIndices(call, indices, extent, "index", "the indices", [&] {
    return "axis " + std::to_string(axis) + " of extent " +
           std::to_string(extent);
  });
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
        "starts " + formatShape(starts) + ", steps " + formatShape(steps) +
        " and " + slicedName + " " + formatShape(sliced) +
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
      return call.error("perm " + formatShape(perm) +
                        " is not a permutation of the input rank " +
                        std::to_string(rank));
    seen[axis] = true;
    expected.push_back(input.shape[axis]);
    strides.push_back(inputStrides[axis]);
  }
  return expectShape(call, "result", result, expected);
}

Status runTranspose(const KernelCall &call) {
  std::vector<int64_t> strides;
  if (Status status = readTranspose(call, strides); !status.ok())
    return status;
  return stridedMove(call, 0, strides);
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

Status runSlice(const KernelCall &call) {
  int64_t base;
  std::vector<int64_t> strides;
  if (Status status = readSlice(call, base, strides); !status.ok())
    return status;
  if (call.results[0].numElements() == 0)
    return Status::success();
  return stridedMove(call, base, strides);
}

Status readExpand(const KernelCall &call, std::vector<int64_t> &strides) {
  if (Status status = checkMove(call); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (!broadcastStrides(input.shape, result.shape, strides))
    return call.error("cannot expand " + formatShape(input.shape) + " to " +
                      formatShape(result.shape));
  return Status::success();
}

Status runExpand(const KernelCall &call) {
  std::vector<int64_t> strides;
  if (Status status = readExpand(call, strides); !status.ok())
    return status;
  return stridedMove(call, 0, strides);
}

Status checkReshape(const KernelCall &call) {
  if (Status status = checkMove(call); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (input.numElements() != result.numElements())
    return call.error("cannot reshape " + formatShape(input.shape) + " (" +
                      std::to_string(input.numElements()) + " elements) into " +
                      formatShape(result.shape) + " (" +
                      std::to_string(result.numElements()) + " elements)");
  return Status::success();
}

Status runReshape(const KernelCall &call) {
  if (Status status = checkReshape(call); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  // Normally a view that never runs; when it does, the row-major data is
  // the same, so a copy (memmove: the two may be one buffer).
  if (input.data != result.data && input.numElements() > 0)
    std::memmove(
        result.data, input.data,
        static_cast<size_t>(input.numElements() * elementBytes(input.dtype)));
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
      return call.error(what + " of shape " + formatShape(operand.shape) +
                        " differs from input 0 of shape " +
                        formatShape(first.shape) + " outside axis " +
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

Status runConcat(const KernelCall &call) {
  int64_t axis, bytes;
  if (Status status = readConcat(call, axis, bytes); !status.ok())
    return status;
  const TensorRef &first = call.operands[0], &result = call.results[0];
  // [outer, axis extent * inner]: each input contributes one block per
  // outer index, the blocks laid side by side.
  int64_t outer = product(first.shape, 0, axis);
  int64_t inner = product(first.shape, axis + 1) * bytes;
  int64_t resultBlock = result.shape[axis] * inner;
  uint8_t *target = static_cast<uint8_t *>(result.data);
  int64_t column = 0;
  for (const TensorRef &operand : call.operands) {
    int64_t block = operand.shape[axis] * inner;
    const uint8_t *source = static_cast<const uint8_t *>(operand.data);
    if (block > 0)
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(target + o * resultBlock + column, source + o * block,
                    static_cast<size_t>(block));
    column += block;
  }
  return Status::success();
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

Status runGather(const KernelCall &call) {
  int64_t axis, bytes;
  if (Status status = checkGather(call, axis, bytes); !status.ok())
    return status;
  const TensorRef &data = call.operands[0], &indices = call.operands[1],
                  &result = call.results[0];
  int64_t extent = data.shape[axis];
  if (Status status = checkGatherIndices(call, indices, axis, extent);
      !status.ok())
    return status;
  int64_t count = indices.numElements();
  int64_t outer = product(data.shape, 0, axis);
  int64_t rowBytes = product(data.shape, axis + 1) * bytes;
  const uint8_t *source = static_cast<const uint8_t *>(data.data);
  uint8_t *target = static_cast<uint8_t *>(result.data);
  for (int64_t o = 0; o < outer; ++o)
    copyRows(source + o * extent * rowBytes, target + o * count * rowBytes,
             count, rowBytes, [&](int64_t r) {
               int64_t index = indexAt(indices, r);
               return index < 0 ? index + extent : index;
             });
  return Status::success();
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
    return call.error("table has shape " + formatShape(table.shape) +
                      ", expected rank 2 (rows x width)");
  std::vector<int64_t> expected = ids.shape;
  expected.push_back(table.shape[1]);
  if (Status status = expectShape(call, "result", result, expected);
      !status.ok())
    return status;
  return movableElementBytes(call, "table", table.dtype, bytes);
}

Status runEmbedding(const KernelCall &call) {
  int64_t bytes;
  if (Status status = checkEmbedding(call, bytes); !status.ok())
    return status;
  const TensorRef &table = call.operands[0], &ids = call.operands[1],
                  &result = call.results[0];
  // An embedding is formed from an ONNX Gather along axis 0, so negative
  // ids keep Gather's meaning (counted from the end); anything outside
  // [-rows, rows) is an error.
  int64_t rows = table.shape[0];
  if (Status status = checkIndices(
          call, ids, rows, "id", "the ids",
          [&] { return "a table of " + std::to_string(rows) + " rows"; });
      !status.ok())
    return status;
  int64_t count = ids.numElements();
  copyRows(static_cast<const uint8_t *>(table.data),
           static_cast<uint8_t *>(result.data), count, table.shape[1] * bytes,
           [&](int64_t r) {
             int64_t id = indexAt(ids, r);
             return id < 0 ? id + rows : id;
           });
  return Status::success();
}

} // namespace zplan::cpu::detail
