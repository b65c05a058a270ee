//===- StridedLayoutHostTest.cu - the CUDA kernels' index math, on the host
//===//
//
// Every elementwise, movement and scatter kernel of runtime/cuda finds the
// elements of a thread through StridedLayout::locate (Strided.cuh), which is
// host-device code: this test runs it on the host, on any machine, against
// ops::StridedWalk (runtime/ops/StridedWalk.h) -- the walk the CPU
// reference reads with -- for random views (broadcast, reversed and
// permuted strides, unit and merged dimensions, rank 0), with 32- and
// 64-bit indices. Compiled by nvcc
// (Strided.cuh holds device code too); needs no GPU, so it runs in the
// default label.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Strided.cuh"
#include "runtime/ops/Shapes.h"
#include "runtime/ops/StridedWalk.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

using namespace zplan;
using namespace zplan::cuda;

namespace {

/// A random view of N tensors over a random output shape: each tensor a
/// permuted contiguous tensor with some dimensions broadcast (stride 0)
/// and some reversed (based at the far end, negative stride).
template <int N>
void randomViews(std::mt19937 &rng, std::vector<int64_t> &shape,
                 std::array<std::vector<int64_t>, N> &strides,
                 std::array<int64_t, N> &bases) {
  int rank = static_cast<int>(rng() % 7);
  shape.assign(rank, 0);
  for (int64_t &extent : shape)
    extent = 1 + rng() % 4;
  bases.fill(0);
  for (int k = 0; k < N; ++k) {
    std::vector<int64_t> order(rank);
    for (int d = 0; d < rank; ++d)
      order[d] = d;
    if (rng() % 2)
      std::shuffle(order.begin(), order.end(), rng);
    std::vector<int64_t> permuted(rank);
    for (int d = 0; d < rank; ++d)
      permuted[d] = shape[order[d]];
    std::vector<int64_t> contiguous = ops::contiguousStrides(permuted);
    strides[k].assign(rank, 0);
    for (int d = 0; d < rank; ++d)
      strides[k][order[d]] = contiguous[d];
    for (int d = 0; d < rank; ++d) {
      int pick = static_cast<int>(rng() % 5);
      if (pick == 0) {
        strides[k][d] = 0;
      } else if (pick == 1) {
        bases[k] += (shape[d] - 1) * strides[k][d];
        strides[k][d] = -strides[k][d];
      }
    }
  }
}

template <int N> void expectLocateMatchesTheCpuWalk(uint32_t seed) {
  std::mt19937 rng(seed);
  plan::Instruction instruction;
  std::vector<TensorRef> none;
  ops::KernelCall host{instruction, none, none};
  DeviceContext device;
  KernelCall call{host, device};
  for (int view = 0; view < 3000; ++view) {
    std::vector<int64_t> shape;
    std::array<std::vector<int64_t>, N> strides;
    std::array<int64_t, N> bases;
    randomViews<N>(rng, shape, strides, bases);
    StridedLayout<N> layout;
    Status made = makeStridedLayout<N>(call, shape, strides, bases, layout);
    ASSERT_TRUE(made.ok()) << made.message();
    std::vector<std::array<int64_t, N>> expected;
    ops::forEachRun<N>(shape, strides, bases,
                       [&](int64_t, const std::array<int64_t, N> &at,
                           const std::array<int64_t, N> &step, int64_t count) {
                         for (int64_t j = 0; j < count; ++j) {
                           std::array<int64_t, N> offsets;
                           for (int k = 0; k < N; ++k)
                             offsets[k] = at[k] + j * step[k];
                           expected.push_back(offsets);
                         }
                       });
    ASSERT_EQ(static_cast<int64_t>(expected.size()), layout.count)
        << "view " << view;
    for (int64_t i = 0; i < layout.count; ++i) {
      int64_t wide[N];
      int32_t narrow[N];
      layout.locate(i, wide);
      layout.locate(static_cast<int32_t>(i), narrow);
      for (int k = 0; k < N; ++k) {
        ASSERT_EQ(wide[k], expected[i][k])
            << "view " << view << ", element " << i << ", tensor " << k;
        ASSERT_EQ(narrow[k], expected[i][k])
            << "view " << view << ", element " << i << ", tensor " << k
            << " (32-bit index)";
      }
    }
  }
}

TEST(StridedLayoutOnTheHost, OneTensorMatchesTheCpuWalk) {
  expectLocateMatchesTheCpuWalk<1>(7);
}
TEST(StridedLayoutOnTheHost, TwoTensorsMatchTheCpuWalk) {
  expectLocateMatchesTheCpuWalk<2>(8);
}
TEST(StridedLayoutOnTheHost, ThreeTensorsMatchTheCpuWalk) {
  expectLocateMatchesTheCpuWalk<3>(9);
}

TEST(StridedLayoutOnTheHost, ContiguousLayoutIsTheIdentity) {
  StridedLayout<2> layout = contiguousLayout<2>(10);
  for (int64_t i = 0; i < 10; ++i) {
    int64_t offsets[2];
    layout.locate(i, offsets);
    EXPECT_EQ(offsets[0], i);
    EXPECT_EQ(offsets[1], i);
  }
}

} // namespace
