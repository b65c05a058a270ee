//===- DataMovement.cu - transpose, slice, concat, gather, ... on CUDA ----===//
//
// The CUDA twin of runtime/cpu/DataMovement.cpp, with its checks
// (runtime/ops/IndexingOps.h). These kernels move elements without computing on
// them, so they dispatch on the element width only. Transpose, slice and
// expand are one strided read each (Strided.cuh: a thread per result
// element, the input offset from the merged strides), or, when the read
// moves the innermost dimension (a [M, N] -> [N, M] transpose), a tiled
// copy through shared memory so that reads and writes both coalesce; concat
// writes each
// input as a strided block of the result; gather and embedding give each
// result element a thread that looks its row up through the index tensor.
// The indices are device data: one out of range is reported
// (KernelError::IndexOutOfRange, the op named at synchronize) and its
// elements are left unwritten, where the CPU refuses before writing.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Strided.cuh"
#include "runtime/ops/IndexingOps.h"

namespace zplan::cuda {

namespace {

constexpr unsigned kTransposeRowsPerPass = 8;

/// One block per tile (grid-stride over the tiles), 32 x 8 threads: each
/// thread loads 4 elements of the tile with x along the input's contiguous
/// rows, then stores 4 with x along the output's contiguous columns.
template <typename T>
__global__ void transposeTilesKernel(TransposeTiles tiles, const T *input,
                                     T *output) {
  // +1: the store pass reads a column of the tile; keep it off one bank.
  __shared__ T tile[kTransposeTile][kTransposeTile + 1];
  for (int64_t t = blockIdx.x; t < tiles.tiles; t += gridDim.x) {
    int64_t inputBase, outputBase, row0, column0;
    tiles.origin(t, inputBase, outputBase, row0, column0);
    int64_t row = row0 + threadIdx.x;
    for (int j = threadIdx.y; j < kTransposeTile; j += kTransposeRowsPerPass) {
      int64_t column = column0 + j;
      if (row < tiles.rows && column < tiles.columns)
        tile[j][threadIdx.x] =
            input[inputBase + row + column * tiles.inputColumnStride];
    }
    __syncthreads();
    int64_t column = column0 + threadIdx.x;
    for (int j = threadIdx.y; j < kTransposeTile; j += kTransposeRowsPerPass) {
      int64_t row = row0 + j;
      if (row < tiles.rows && column < tiles.columns)
        output[outputBase + row * tiles.outputRowStride + column] =
            tile[threadIdx.x][j];
    }
    __syncthreads(); // the tile is refilled for the next t
  }
}

/// Copies operand 0 into result 0 reading it at element `base` with element
/// `strides` (aligned to the result's rank): by tiles when the read moves
/// the innermost dimension, else a thread per element.
Status stridedMove(const KernelCall &call, int64_t base,
                   const std::vector<int64_t> &strides) {
  const TensorRef &input = call.host.operands[0],
                  &result = call.host.results[0];
  StridedLayout<1> layout;
  if (Status status =
          makeStridedLayout<1>(call, result.shape, {strides}, {base}, layout);
      !status.ok())
    return status;
  TransposeTiles tiles;
  bool tiled = makeTransposeTiles(layout, tiles);
  return ops::dispatchBySize(call.host, "input", input.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (!tiled)
      return launchStrided(call, layout,
                           StridedReadBody<T>{input.as<T>(), result.as<T>()});
    transposeTilesKernel<T>
        <<<gridFor(tiles.tiles, 1, call.device),
           dim3(kTransposeTile, kTransposeRowsPerPass), 0,
           call.device.stream>>>(tiles, input.as<T>(), result.as<T>());
    return launched(call);
  });
}

} // namespace

Status runTranspose(const KernelCall &call) {
  std::vector<int64_t> strides;
  if (Status status = ops::readTranspose(call.host, strides); !status.ok())
    return status;
  return stridedMove(call, 0, strides);
}

Status runSlice(const KernelCall &call) {
  int64_t base;
  std::vector<int64_t> strides;
  if (Status status = ops::readSlice(call.host, base, strides); !status.ok())
    return status;
  if (call.host.results[0].numElements() == 0)
    return Status::success();
  return stridedMove(call, base, strides);
}

Status runExpand(const KernelCall &call) {
  std::vector<int64_t> strides;
  if (Status status = ops::readExpand(call.host, strides); !status.ok())
    return status;
  return stridedMove(call, 0, strides);
}

Status runReshape(const KernelCall &call) {
  if (Status status = ops::checkReshape(call.host); !status.ok())
    return status;
  const TensorRef &input = call.host.operands[0],
                  &result = call.host.results[0];
  // Normally a view that never runs; when it does, the row-major data is
  // the same, so a copy, or nothing when the two are one buffer.
  if (input.data == result.data || input.numElements() == 0)
    return Status::success();
  size_t bytes =
      static_cast<size_t>(input.numElements() * ops::elementBytes(input.dtype));
  return checkCuda(call,
                   cudaMemcpyAsync(result.data, input.data, bytes,
                                   cudaMemcpyDeviceToDevice,
                                   call.device.stream),
                   "cudaMemcpyAsync");
}

Status runConcat(const KernelCall &call) {
  int64_t axis, bytes;
  if (Status status = ops::readConcat(call.host, axis, bytes); !status.ok())
    return status;
  const TensorRef &first = call.host.operands[0],
                  &result = call.host.results[0];
  // [outer, axis extent * inner]: each input is a block [outer, its extent
  // * inner] of the result, written at its column (one launch per input).
  int64_t outer = ops::product(first.shape, 0, axis);
  int64_t inner = ops::product(first.shape, axis + 1);
  int64_t resultRow = result.shape[axis] * inner;
  return ops::dispatchBySize(
      call.host, "input 0", first.dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        int64_t column = 0;
        for (const TensorRef &operand : call.host.operands) {
          int64_t row = operand.shape[axis] * inner;
          std::vector<int64_t> block = {outer, row}, strides = {resultRow, 1};
          StridedLayout<1> layout;
          if (Status status = makeStridedLayout<1>(call, block, {strides},
                                                   {column}, layout);
              !status.ok())
            return status;
          if (Status status = launchStrided(
                  call, layout,
                  StridedWriteBody<T>{operand.as<T>(), result.as<T>()});
              !status.ok())
            return status;
          column += row;
        }
        return Status::success();
      });
}

namespace {

/// Result element i is table element rows.tableOffset(i).
template <typename T, typename IndexT> struct GatherBody {
  const T *table;
  const IndexT *indices;
  T *output;
  IndexedRows rows;
  template <typename Index>
  __device__ void operator()(Index i, const Index (&)[1]) const {
    int64_t offset;
    if (rows.tableOffset(indices, i, offset))
      output[i] = table[offset];
  }
};

/// Gathers result [outer, count, inner] from operand 0 [outer, extent,
/// inner] through the index tensor `indices` (count elements).
Status gatherRows(const KernelCall &call, const TensorRef &indices,
                  int64_t extent, int64_t inner) {
  const TensorRef &table = call.host.operands[0],
                  &result = call.host.results[0];
  IndexedRows rows{indices.numElements(), extent, inner, call.device.errorWord,
                   call.errorTag()};
  auto layout = contiguousLayout<1>(result.numElements());
  return ops::dispatchBySize(call.host, "data", table.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return dispatchIndexType(indices.dtype, [&](auto indexTag) {
      using IndexT = typename decltype(indexTag)::type;
      return launchStrided(call, layout,
                           GatherBody<T, IndexT>{table.as<T>(),
                                                 indices.as<IndexT>(),
                                                 result.as<T>(), rows});
    });
  });
}

} // namespace

Status runGather(const KernelCall &call) {
  int64_t axis, bytes;
  if (Status status = ops::checkGather(call.host, axis, bytes); !status.ok())
    return status;
  const TensorRef &data = call.host.operands[0];
  return gatherRows(call, call.host.operands[1], data.shape[axis],
                    ops::product(data.shape, axis + 1));
}

Status runEmbedding(const KernelCall &call) {
  int64_t bytes;
  if (Status status = ops::checkEmbedding(call.host, bytes); !status.ok())
    return status;
  // Negative ids count from the end, as in gather along axis 0.
  const TensorRef &table = call.host.operands[0];
  return gatherRows(call, call.host.operands[1], table.shape[0],
                    table.shape[1]);
}

} // namespace zplan::cuda
