//===- CudaPoisonTest.cpp - the --check kernels on a GPU ------------------===//
//
// Built wherever CUDA is installed; runs only where a GPU is present (the
// build and CI machines have none, so the tests skip there).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Poison.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

namespace {

bool haveDevice() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

TEST(CudaPoison, FillsWithNaN) {
  if (!haveDevice())
    GTEST_SKIP() << "no CUDA device";
  const size_t count = 100003;
  float *device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, count * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(device, 0, count * sizeof(float)), cudaSuccess);
  ASSERT_EQ(zplan::cuda::poisonWithNaN(device, count, nullptr), cudaSuccess);
  std::vector<float> host(count);
  ASSERT_EQ(cudaMemcpy(host.data(), device, count * sizeof(float),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(device);
  for (size_t i = 0; i < count; ++i)
    ASSERT_TRUE(std::isnan(host[i])) << "element " << i;
}

TEST(CudaPoison, ChecksumMatchesHost) {
  if (!haveDevice())
    GTEST_SKIP() << "no CUDA device";
  std::vector<float> host(4097);
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = 0.25f * static_cast<float>(i % 13) - 1.0f;
  double expected = std::accumulate(host.begin(), host.end(), 0.0);
  float *device = nullptr;
  double *sum = nullptr;
  ASSERT_EQ(cudaMalloc(&device, host.size() * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&sum, sizeof(double)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(float),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(zplan::cuda::checksum(device, host.size(), sum, nullptr),
            cudaSuccess);
  double actual = 0;
  ASSERT_EQ(cudaMemcpy(&actual, sum, sizeof(double), cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(device);
  cudaFree(sum);
  EXPECT_DOUBLE_EQ(actual, expected);
}

} // namespace
