//===- Strided.cuh - strided and broadcast indexing on the device ---------===//
//
// What the elementwise, data-movement and scatter kernels share: a walk
// over a contiguous output whose elements are read from (or written to) N
// tensors at strided offsets, which is broadcasting, transpose, slice,
// expand, concat and slice_grad alike. The layout is built on the host from
// the ops layer's StridedWalk (runtime/ops/StridedWalk.h), the walk the CPU
// kernels run, so dimensions merge exactly as on the CPU (a bias
// add over [B, S, H] is a rank-2 walk), and passed to the kernel by value:
// one thread per output element, a grid-stride loop, the element's offsets
// found by dividing its index by the merged extents. 32-bit indices where
// every offset fits (integer division is much cheaper), and no division at
// all when every tensor is walked contiguously (same-shape operands).
//
// A strided read that moves the innermost dimension (a transpose of the
// last two) is also described here as tiles (TransposeTiles), copied
// through shared memory by DataMovement.cu so both sides coalesce.
//
// The matmul bias (MatmulBias.cu) is such a strided read, and the
// attention kernels find each (batch, head) entry's first mask element
// with locate() (AttentionTiles.cuh).
//
// Also the row lookup of gather, embedding and their gradients: an output
// element is (outer, row, inner), and row picks a table row through an
// index tensor, checked on the device (reportKernelError), since the
// indices are device data.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_STRIDED_CUH
#define ZPLAN_RUNTIME_CUDA_STRIDED_CUH

#include "runtime/cuda/DeviceSupport.cuh"
#include "runtime/ops/StridedWalk.h"
#include "runtime/support/ShapeText.h"

#include <array>
#include <climits>
#include <cstdint>
#include <string>
#include <vector>

namespace zplan::cuda {

/// Dimensions a strided walk may keep after merging: the kernels' layout
/// is a fixed-size struct passed by value.
constexpr int kMaxStridedRank = 8;

/// A walk over `count` contiguous output elements reading (or writing) N
/// tensors: element i of the output is at offset bases[k] + sum over d of
/// index_d(i) * strides[k][d] in tensor k, index_d being i's coordinate in
/// the merged `extents` (outermost first).
template <int N> struct StridedLayout {
  int rank = 0;
  int64_t count = 0;
  int64_t extents[kMaxStridedRank] = {};
  int64_t strides[N][kMaxStridedRank] = {};
  int64_t bases[N] = {};
  /// Every tensor is walked as the output is (no division needed).
  bool contiguous = false;
  /// The count and every offset fit in 31 bits (half of int32, so that a
  /// grid-stride step past the end cannot overflow either).
  bool fits32 = false;

  /// The offsets of output element `i` in each tensor (host code too, so
  /// that a host test can check it against the CPU's walk).
  template <typename Index>
  __host__ __device__ void locate(Index i, Index (&offsets)[N]) const {
    for (int k = 0; k < N; ++k)
      offsets[k] = static_cast<Index>(bases[k]);
    if (contiguous) {
      for (int k = 0; k < N; ++k)
        offsets[k] += i;
      return;
    }
    // Innermost first; what is left of i after the inner dimensions is the
    // outermost coordinate itself (i < count), so it needs no division.
    for (int d = rank - 1; d > 0; --d) {
      Index extent = static_cast<Index>(extents[d]);
      Index next = i / extent;
      Index coordinate = i - next * extent;
      for (int k = 0; k < N; ++k)
        offsets[k] += coordinate * static_cast<Index>(strides[k][d]);
      i = next;
    }
    if (rank > 0)
      for (int k = 0; k < N; ++k)
        offsets[k] += i * static_cast<Index>(strides[k][0]);
  }
};

/// `count` elements walked contiguously in every tensor.
template <int N> StridedLayout<N> contiguousLayout(int64_t count) {
  StridedLayout<N> layout;
  layout.rank = 1;
  layout.count = count;
  layout.extents[0] = count;
  for (int k = 0; k < N; ++k)
    layout.strides[k][0] = 1;
  layout.contiguous = true;
  layout.fits32 = count <= INT_MAX / 2;
  return layout;
}

/// The walk over a contiguous output of `shape` reading tensor k at element
/// bases[k] with element strides[k] (aligned to shape's rank; 0 to
/// broadcast, negative to walk backwards), merged as the CPU's StridedWalk
/// merges it. More than kMaxStridedRank dimensions left after merging is an
/// error naming the op.
template <int N>
Status makeStridedLayout(const KernelCall &call,
                         const std::vector<int64_t> &shape,
                         const std::array<std::vector<int64_t>, N> &strides,
                         const std::array<int64_t, N> &bases,
                         StridedLayout<N> &layout) {
  ops::StridedWalk<N> walk(shape, strides);
  layout = StridedLayout<N>();
  if (walk.isEmpty())
    return Status::success(); // count 0: nothing to launch
  const std::vector<int64_t> &extents = walk.mergedExtents();
  if (extents.size() > static_cast<size_t>(kMaxStridedRank))
    return call.error(
        "walks " + shapeText(shape) + " as " + std::to_string(extents.size()) +
        " dimensions that do not merge, more than the " +
        std::to_string(kMaxStridedRank) + " the CUDA kernels index");
  layout.rank = static_cast<int>(extents.size());
  layout.count = 1;
  for (int d = 0; d < layout.rank; ++d) {
    layout.extents[d] = extents[d];
    layout.count *= extents[d];
  }
  layout.contiguous = layout.rank <= 1;
  layout.fits32 = layout.count <= INT_MAX / 2;
  for (int k = 0; k < N; ++k) {
    const std::vector<int64_t> &steps = walk.mergedSteps(k);
    layout.bases[k] = bases[k];
    // The farthest offset any element reaches: every coordinate combination
    // is a valid element, so partial sums stay within this too.
    int64_t reach = bases[k] < 0 ? -bases[k] : bases[k];
    for (int d = 0; d < layout.rank; ++d) {
      layout.strides[k][d] = steps[d];
      reach += (extents[d] - 1) * (steps[d] < 0 ? -steps[d] : steps[d]);
      layout.contiguous = layout.contiguous && steps[d] == 1;
    }
    layout.fits32 = layout.fits32 && reach <= INT_MAX / 2;
  }
  return Status::success();
}

template <int N, typename Index, typename Body>
__global__ void stridedKernel(StridedLayout<N> layout, Body body) {
  Index count = static_cast<Index>(layout.count);
  for (Index i = blockIdx.x * static_cast<Index>(blockDim.x) + threadIdx.x;
       i < count; i += static_cast<Index>(gridDim.x) * blockDim.x) {
    Index offsets[N];
    layout.locate(i, offsets);
    body(i, offsets);
  }
}

/// Threads per block of the strided kernels: memory-bound, so any multiple
/// of the warp that keeps several blocks per SM resident.
constexpr unsigned kStridedThreads = 256;

/// Issues body(i, offsets) for every output element i of `layout` on the
/// call's stream; `body` is a functor with a templated
/// `__device__ void operator()(Index i, const Index (&offsets)[N]) const`.
template <int N, typename Body>
Status launchStrided(const KernelCall &call, const StridedLayout<N> &layout,
                     const Body &body) {
  if (layout.count == 0)
    return Status::success();
  unsigned blocks = gridFor(layout.count, kStridedThreads, call.device);
  if (layout.fits32)
    stridedKernel<N, int32_t>
        <<<blocks, kStridedThreads, 0, call.device.stream>>>(layout, body);
  else
    stridedKernel<N, int64_t>
        <<<blocks, kStridedThreads, 0, call.device.stream>>>(layout, body);
  return launched(call);
}

/// output[i] = input[offsets[0]]: a strided read (transpose, slice, expand).
template <typename T> struct StridedReadBody {
  const T *input;
  T *output;
  template <typename Index>
  __device__ void operator()(Index i, const Index (&offsets)[1]) const {
    output[i] = input[offsets[0]];
  }
};

/// A strided read whose innermost output dimension q is strided in the
/// input while another output dimension p is contiguous in it (a transpose
/// that moves the innermost dimension): read thread by thread, one of the
/// two sides would be uncoalesced. Instead it is cut into tiles of
/// kTransposeTile x kTransposeTile (rows along p, columns along q), each
/// read along p and written along q through shared memory; the other
/// dimensions ("batch") are walked tile by tile.
constexpr int kTransposeTile = 32;

struct TransposeTiles {
  /// Over the dimensions other than p and q: the input (0) and output (1)
  /// offsets of each batch entry.
  StridedLayout<2> batch;
  int64_t rows = 0, columns = 0;
  /// The input's stride along q (along p it is 1) and the output's along p
  /// (along q it is 1).
  int64_t inputColumnStride = 0, outputRowStride = 0;
  int64_t rowTiles = 0, columnTiles = 0, tiles = 0;

  /// Tile t's batch offsets and its first row and column.
  __host__ __device__ void origin(int64_t t, int64_t &inputBase,
                                  int64_t &outputBase, int64_t &row,
                                  int64_t &column) const {
    column = t % columnTiles * kTransposeTile;
    t /= columnTiles;
    row = t % rowTiles * kTransposeTile;
    t /= rowTiles;
    int64_t offsets[2];
    batch.locate(t, offsets);
    inputBase = offsets[0];
    outputBase = offsets[1];
  }
};

/// The tiles of the strided read `layout` (tensor 0 the input), or false
/// when it is not such a read, or its tiles would be mostly empty (fewer
/// than 16 rows or columns).
inline bool makeTransposeTiles(const StridedLayout<1> &layout,
                               TransposeTiles &tiles) {
  int q = layout.rank - 1;
  if (q < 1 || layout.strides[0][q] == 1)
    return false;
  int p = -1;
  for (int d = 0; d < q && p < 0; ++d)
    if (layout.strides[0][d] == 1)
      p = d;
  if (p < 0 || layout.extents[p] < 16 || layout.extents[q] < 16)
    return false;
  tiles = TransposeTiles();
  tiles.rows = layout.extents[p];
  tiles.columns = layout.extents[q];
  tiles.inputColumnStride = layout.strides[0][q];
  // The output is contiguous: its stride along d is the product of the
  // extents inside d.
  int64_t outputStrides[kMaxStridedRank];
  int64_t stride = 1;
  for (int d = q; d >= 0; --d) {
    outputStrides[d] = stride;
    stride *= layout.extents[d];
  }
  tiles.outputRowStride = outputStrides[p];
  StridedLayout<2> &batch = tiles.batch;
  batch.count = 1;
  batch.bases[0] = layout.bases[0];
  for (int d = 0; d < q; ++d) {
    if (d == p)
      continue;
    batch.extents[batch.rank] = layout.extents[d];
    batch.strides[0][batch.rank] = layout.strides[0][d];
    batch.strides[1][batch.rank] = outputStrides[d];
    batch.count *= layout.extents[d];
    ++batch.rank;
  }
  tiles.rowTiles = (tiles.rows + kTransposeTile - 1) / kTransposeTile;
  tiles.columnTiles = (tiles.columns + kTransposeTile - 1) / kTransposeTile;
  tiles.tiles = batch.count * tiles.rowTiles * tiles.columnTiles;
  return true;
}

/// output[offsets[0]] = input[i]: a strided write (concat's blocks,
/// slice_grad).
template <typename T> struct StridedWriteBody {
  const T *input;
  T *output;
  template <typename Index>
  __device__ void operator()(Index i, const Index (&offsets)[1]) const {
    output[offsets[0]] = input[i];
  }
};

/// The rows of gather and embedding and of their gradients: element i of
/// the gathered tensor [outer, count, inner] is element
/// (outer, indices[row], inner) of the table [outer, extent, inner].
struct IndexedRows {
  int64_t count = 0, extent = 0, inner = 0;
  /// Where an index outside [-extent, extent) is reported.
  uint32_t *errorWord = nullptr;
  uint32_t errorTag = 0;

  /// The table offset of gathered element `i`, false (reported) when its
  /// index is out of range; a negative index counts from the end.
  template <typename IndexT, typename Index>
  __device__ bool tableOffset(const IndexT *indices, Index i,
                              int64_t &offset) const {
    Index column = i % static_cast<Index>(inner);
    Index line = i / static_cast<Index>(inner);
    Index row = line % static_cast<Index>(count);
    Index block = line / static_cast<Index>(count);
    int64_t index = indices[row];
    if (index < -extent || index >= extent) {
      reportKernelError(errorWord, errorTag, KernelError::IndexOutOfRange);
      return false;
    }
    if (index < 0)
      index += extent;
    offset = (block * extent + index) * inner + column;
    return true;
  }
};

/// Calls fn(TypeTag<I>{}) for an index tensor's type (i64 or i32, already
/// checked by ops::checkIndexType).
template <typename Fn> Status dispatchIndexType(ElementType type, Fn &&fn) {
  if (type == ElementType::I64)
    return fn(ops::TypeTag<int64_t>{});
  return fn(ops::TypeTag<int32_t>{});
}

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_STRIDED_CUH
