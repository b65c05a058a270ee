//===- ScatterGrad.cu - embedding_grad, gather_grad, slice_grad on CUDA ---===//
//
// The CUDA twin of runtime/cpu/ScatterGrad.cpp, with its checks
// (runtime/ops/IndexingOps.h): the result is zeroed (cudaMemsetAsync on the
// stream), then dy is scattered back to where the forward read it. A
// thread per dy element: embedding and gather may read one row many times
// (a repeated token), so their gradient adds with atomicAdd, f32 and f64
// alike. Unlike the CPU, which adds in index order, the order of the
// atomic additions varies from run to run: a row hit n times may differ in
// its last bits between runs. An index out of range is reported
// (KernelError::IndexOutOfRange) and its elements are skipped. A slice
// reads each element at most once, so its gradient is a plain strided
// write into the zeroed input.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Strided.cuh"
#include "runtime/ops/IndexingOps.h"

namespace zplan::cuda {

namespace {

/// Zeroes `bytes` of the result on the stream (nothing for none: an empty
/// tensor may have no address).
Status zeroResult(const KernelCall &call, void *data, size_t bytes) {
  if (bytes == 0)
    return Status::success();
  return checkCuda(call, cudaMemsetAsync(data, 0, bytes, call.device.stream),
                   "cudaMemsetAsync");
}

/// dy element i adds into result element rows.tableOffset(i).
template <typename T, typename IndexT> struct ScatterAddBody {
  const T *dy;
  const IndexT *indices;
  T *output;
  IndexedRows rows;
  template <typename Index>
  __device__ void operator()(Index i, const Index (&)[1]) const {
    int64_t offset;
    if (rows.tableOffset(indices, i, offset))
      atomicAdd(output + offset, dy[i]);
  }
};

/// Zeroes the result [outer, extent, inner] and adds dy [outer, count,
/// inner] into it through `indices` (count elements).
Status scatterAddRows(const KernelCall &call, int64_t extent, int64_t inner,
                      const TensorRef &indices) {
  const TensorRef &dy = call.host.operands[0], &result = call.host.results[0];
  return ops::dispatchFloatType(
      call.host, "dy", dy.dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        if (Status status = zeroResult(
                call, result.data,
                static_cast<size_t>(result.numElements()) * sizeof(T));
            !status.ok())
          return status;
        IndexedRows rows{indices.numElements(), extent, inner,
                         call.device.errorWord, call.errorTag()};
        auto layout = contiguousLayout<1>(dy.numElements());
        return dispatchIndexType(indices.dtype, [&](auto indexTag) {
          using IndexT = typename decltype(indexTag)::type;
          return launchStrided(call, layout,
                               ScatterAddBody<T, IndexT>{dy.as<T>(),
                                                         indices.as<IndexT>(),
                                                         result.as<T>(), rows});
        });
      });
}

} // namespace

Status runEmbeddingGrad(const KernelCall &call) {
  if (Status status = ops::checkEmbeddingGrad(call.host); !status.ok())
    return status;
  const TensorRef &table = call.host.results[0];
  return scatterAddRows(call, table.shape[0], table.shape[1],
                        call.host.operands[1]);
}

Status runGatherGrad(const KernelCall &call) {
  int64_t axis;
  if (Status status = ops::checkGatherGrad(call.host, axis); !status.ok())
    return status;
  const TensorRef &data = call.host.results[0];
  return scatterAddRows(call, data.shape[axis],
                        ops::product(data.shape, axis + 1),
                        call.host.operands[1]);
}

Status runSliceGrad(const KernelCall &call) {
  int64_t base, bytes;
  std::vector<int64_t> strides;
  if (Status status = ops::readSliceGrad(call.host, base, strides, bytes);
      !status.ok())
    return status;
  const TensorRef &dy = call.host.operands[0], &dinput = call.host.results[0];
  if (Status status = zeroResult(
          call, dinput.data, static_cast<size_t>(dinput.numElements() * bytes));
      !status.ok())
    return status;
  if (dy.numElements() == 0)
    return Status::success();
  // The walk is over dy (contiguous, the "output" index) with dinput's
  // strided offsets as its one tensor, written through.
  StridedLayout<1> layout;
  if (Status status =
          makeStridedLayout<1>(call, dy.shape, {strides}, {base}, layout);
      !status.ok())
    return status;
  return ops::dispatchBySize(call.host, "dy", dy.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return launchStrided(call, layout,
                         StridedWriteBody<T>{dy.as<T>(), dinput.as<T>()});
  });
}

} // namespace zplan::cuda
