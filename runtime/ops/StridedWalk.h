//===- StridedWalk.h - one walk over strided views, for every backend -----===//
//
// Shared by every backend: how a contiguous output is walked while inputs
// are read through their own strides (broadcast, transposed, sliced,
// reversed), with the dimensions that every tensor walks jointly
// contiguously merged into one. The CPU kernels run the walk; the CUDA
// kernels take its merged extents and steps (runtime/cuda/Strided.cuh,
// Matmul.cpp's batched GEMMs), so that dimensions merge exactly alike on
// both and a view one backend reads is the view every backend reads.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_STRIDEDWALK_H
#define ZPLAN_RUNTIME_OPS_STRIDEDWALK_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zplan::ops {

/// Walks a contiguous output of `shape` while `N` inputs are read with their
/// own element strides (aligned to shape's rank: 0 to broadcast, negative
/// to walk backwards). Dimensions that every tensor walks jointly
/// contiguously are merged when the walk is built, so the innermost run is
/// as long as possible: run(bases, fn) then calls fn(outputOffset,
/// inputOffsets, innerStrides, count) for `count` consecutive outputs,
/// input i being read at inputOffsets[i] + j * innerStrides[i] for
/// j < count (offsets start at bases). Build once, run many times.
template <size_t N> class StridedWalk {
public:
  StridedWalk(const std::vector<int64_t> &shape,
              const std::array<std::vector<int64_t>, N> &strides) {
    // Drop unit dimensions; merge d into the dimension before it where
    // every input (and the contiguous output) steps over that dimension
    // exactly one run of d.
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 0) {
        empty = true;
        return;
      }
      if (shape[d] == 1)
        continue;
      bool merge = !extents.empty();
      for (size_t i = 0; i < N && merge; ++i)
        merge = steps[i].back() == strides[i][d] * shape[d];
      if (merge) {
        extents.back() *= shape[d];
        for (size_t i = 0; i < N; ++i)
          steps[i].back() = strides[i][d];
        continue;
      }
      extents.push_back(shape[d]);
      for (size_t i = 0; i < N; ++i)
        steps[i].push_back(strides[i][d]);
    }
  }

  /// The merged walk, for a backend that indexes it itself (the CUDA
  /// kernels): isEmpty() when some extent is 0; the merged extents,
  /// outermost first (none when every extent is 1), and input i's steps.
  bool isEmpty() const { return empty; }
  const std::vector<int64_t> &mergedExtents() const { return extents; }
  const std::vector<int64_t> &mergedSteps(size_t i) const { return steps[i]; }

  template <typename Fn>
  void run(const std::array<int64_t, N> &bases, Fn &&fn) const {
    if (empty)
      return;
    std::array<int64_t, N> inner;
    int64_t count = 1;
    if (extents.empty()) {
      inner.fill(0);
    } else {
      count = extents.back();
      for (size_t i = 0; i < N; ++i)
        inner[i] = steps[i].back();
    }
    size_t outerRank = extents.empty() ? 0 : extents.size() - 1;
    if (outerRank == 0) {
      fn(int64_t(0), bases, inner, count);
      return;
    }
    // The odometer over the outer dimensions; no allocation for the ranks
    // tensors have in practice.
    int64_t local[8] = {};
    std::vector<int64_t> heap;
    int64_t *index = local;
    if (outerRank > 8) {
      heap.assign(outerRank, 0);
      index = heap.data();
    }
    std::array<int64_t, N> offsets = bases;
    int64_t output = 0;
    while (true) {
      fn(output, offsets, inner, count);
      output += count;
      size_t d = outerRank;
      while (true) {
        --d;
        for (size_t i = 0; i < N; ++i)
          offsets[i] += steps[i][d];
        if (++index[d] < extents[d])
          break;
        for (size_t i = 0; i < N; ++i)
          offsets[i] -= steps[i][d] * extents[d];
        index[d] = 0;
        if (d == 0)
          return;
      }
    }
  }

private:
  bool empty = false;
  std::vector<int64_t> extents;
  std::array<std::vector<int64_t>, N> steps;
};

/// A StridedWalk built and run once.
template <size_t N, typename Fn>
void forEachRun(const std::vector<int64_t> &shape,
                const std::array<std::vector<int64_t>, N> &strides,
                const std::array<int64_t, N> &bases, Fn &&fn) {
  StridedWalk<N>(shape, strides).run(bases, fn);
}

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_STRIDEDWALK_H
