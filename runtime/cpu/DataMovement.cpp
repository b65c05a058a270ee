//===- DataMovement.cpp - transpose, slice, concat, gather, embedding, ... ===//
//
// Kernels that move elements without computing on them, so they dispatch on
// the element width only and work for every type. Transpose, slice and
// expand are one strided copy each (input strides permuted, stepped, or
// zeroed), merged into long runs by StridedWalk. Gather and embedding check
// every index before writing anything: an index out of range is an error
// that names it, never a read outside the table. Everything else they check
// is the ops layer's (runtime/ops/IndexingOps.h), shared with the CUDA
// kernels.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/IndexingSupport.h"

#include <cstring>

namespace zplan::cpu::detail {

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

Status checkGatherIndices(const KernelCall &call, const TensorRef &indices,
                          int64_t axis, int64_t extent) {
  return checkIndices(call, indices, extent, "index", "the indices", [&] {
    return "axis " + std::to_string(axis) + " of extent " +
           std::to_string(extent);
  });
}

Status runTranspose(const KernelCall &call) {
  std::vector<int64_t> strides;
  if (Status status = readTranspose(call, strides); !status.ok())
    return status;
  return stridedMove(call, 0, strides);
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

Status runExpand(const KernelCall &call) {
  std::vector<int64_t> strides;
  if (Status status = readExpand(call, strides); !status.ok())
    return status;
  return stridedMove(call, 0, strides);
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
