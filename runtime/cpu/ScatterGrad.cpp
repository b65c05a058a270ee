//===- ScatterGrad.cpp - embedding_grad, gather_grad, slice_grad ----------===//
//
// The backward of DataMovement.cpp's indexing kernels: the result is zeroed,
// then dy is scattered back to where the forward read it. Embedding and
// gather may read one row many times (a repeated token), so their gradient
// ADDS, one index after another in index order: the same sums in the same
// order on every run and rank. Indices are checked, with the forward
// kernels' rules (negative ones count from the end), before anything is
// written; the other checks are the ops layer's (runtime/ops/IndexingOps.h),
// shared with the CUDA kernels. A slice reads each element at most once, so its
// gradient is a plain strided copy into the zeroed input.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/IndexingSupport.h"

#include <algorithm>
#include <cstring>

namespace zplan::cpu::detail {

namespace {

/// Zeroes `outer` blocks of the result [outer, extent, width] and adds row
/// r of dy [outer, count, width] into row index(r) of its block, for r in
/// increasing order.
Status scatterAddRows(const KernelCall &call, int64_t outer, int64_t extent,
                      int64_t count, int64_t width, const TensorRef &indices) {
  const TensorRef &dy = call.operands[0], &result = call.results[0];
  return dispatchFloatType(call, "dy", dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T *target = result.as<T>();
    std::fill(target, target + outer * extent * width, T(0));
    const T *source = dy.as<T>();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t r = 0; r < count; ++r) {
        int64_t index = indexAt(indices, r);
        if (index < 0)
          index += extent;
        T *row = target + (o * extent + index) * width;
        const T *from = source + (o * count + r) * width;
        for (int64_t i = 0; i < width; ++i)
          row[i] += from[i];
      }
    }
    return Status::success();
  });
}

} // namespace

/// embedding_grad(dy [ids..., D], ids [...] i64/i32) -> dtable [R, D]
/// (R from the result type): zeroed, then dy's row for each id (in the
/// order of the ids; negative ids count from the end, as in embedding)
/// added into row id. An id outside [-R, R) is an error.
Status runEmbeddingGrad(const KernelCall &call) {
  if (Status status = checkEmbeddingGrad(call); !status.ok())
    return status;
  const TensorRef &ids = call.operands[1], &table = call.results[0];
  int64_t rows = table.shape[0];
  if (Status status = checkIndices(
          call, ids, rows, "id", "the ids",
          [&] { return "a table of " + std::to_string(rows) + " rows"; });
      !status.ok())
    return status;
  return scatterAddRows(call, /*outer=*/1, rows, ids.numElements(),
                        table.shape[1], ids);
}

/// gather_grad(dy, indices i64/i32; axis) -> ddata (the gathered data's
/// shape, from the result type; dy's shape is data.shape[:axis] +
/// indices.shape + data.shape[axis+1:]): zeroed, then every dy slice added
/// at the index it was gathered from, in index order. An index outside
/// [-extent, extent) is an error.
Status runGatherGrad(const KernelCall &call) {
  int64_t axis;
  if (Status status = checkGatherGrad(call, axis); !status.ok())
    return status;
  const TensorRef &indices = call.operands[1], &data = call.results[0];
  int64_t extent = data.shape[axis];
  if (Status status = checkGatherIndices(call, indices, axis, extent);
      !status.ok())
    return status;
  return scatterAddRows(call, product(data.shape, 0, axis), extent,
                        indices.numElements(), product(data.shape, axis + 1),
                        indices);
}

/// slice_grad(dy; starts, steps) -> dinput (the sliced input's shape, from
/// the result type): zero, except dinput[starts + j * steps] = dy[j]. starts
/// and steps hold one entry per input dimension, as nn.slice's; dy's shape
/// is the slice's result shape, every position it covers inside the input.
Status runSliceGrad(const KernelCall &call) {
  int64_t base, bytes;
  std::vector<int64_t> strides;
  if (Status status = readSliceGrad(call, base, strides, bytes); !status.ok())
    return status;
  const TensorRef &dy = call.operands[0], &dinput = call.results[0];
  std::memset(dinput.data, 0,
              static_cast<size_t>(dinput.numElements() * bytes));
  if (dy.numElements() == 0)
    return Status::success();
  return dispatchBySize(call, "dy", dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *source = dy.as<T>();
    T *target = dinput.as<T>();
    // The walk is over dy (contiguous, the "output" offset) with dinput's
    // strided offsets as its one "input".
    forEachRun<1>(dy.shape, {strides}, {base},
                  [&](int64_t at, const std::array<int64_t, 1> &to,
                      const std::array<int64_t, 1> &step, int64_t count) {
                    for (int64_t j = 0; j < count; ++j)
                      target[to[0] + j * step[0]] = source[at + j];
                  });
    return Status::success();
  });
}

} // namespace zplan::cpu::detail
