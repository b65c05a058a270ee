//===- StridedIndex.cuh - a broadcast operand's offsets, on the device ----===//
//
// The device half of the CPU's broadcastStrides(): a kernel that walks a
// contiguous output linearly finds where a broadcast operand's element
// lives from the output index alone. The host builds the index once per
// launch from the operand's element strides (0 along broadcast dimensions)
// and passes it by value, so no table has to be copied to the device.
// Unit dimensions are dropped and dimensions the operand walks jointly
// contiguously with the output are merged first, so the per-element cost is
// one division per *merged* dimension: a [N] bias under a [B, S, N] result
// is a single modulo.
//
// Used by the matmul bias (MatmulBias.cu) and by the attention mask's
// per-(batch, head) base offset (Attention.cu, AttentionGrad.cu).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_STRIDEDINDEX_CUH
#define ZPLAN_RUNTIME_CUDA_STRIDEDINDEX_CUH

#include <cstdint>
#include <vector>

namespace zplan::cuda {

/// offset(i): the element offset of the operand element that output
/// element `i` (row-major over the output's shape) reads.
struct StridedIndex {
  /// More merged dimensions than this are refused by makeStridedIndex;
  /// real operands have at most 3 after merging.
  static constexpr int kMaxRank = 8;
  int rank = 0;
  int64_t extents[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};

  __host__ __device__ int64_t offset(int64_t linear) const {
    int64_t result = 0;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t extent = extents[d];
      result += (linear % extent) * strides[d];
      linear /= extent;
    }
    return result;
  }
};

/// The index of an operand read with element `strides` (aligned to
/// `shape`, the contiguous output's) while the output of `shape` is walked
/// linearly. False when more than kMaxRank dimensions remain after merging.
inline bool makeStridedIndex(const std::vector<int64_t> &shape,
                             const std::vector<int64_t> &strides,
                             StridedIndex &index) {
  index = StridedIndex();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    // The output is contiguous, so d merges into the dimension before it
    // when the operand steps over that dimension exactly one run of d.
    if (index.rank > 0 &&
        index.strides[index.rank - 1] == strides[d] * shape[d]) {
      index.extents[index.rank - 1] *= shape[d];
      index.strides[index.rank - 1] = strides[d];
      continue;
    }
    if (index.rank == StridedIndex::kMaxRank)
      return false;
    index.extents[index.rank] = shape[d];
    index.strides[index.rank] = strides[d];
    ++index.rank;
  }
  return true;
}

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_STRIDEDINDEX_CUH
