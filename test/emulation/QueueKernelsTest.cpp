//===- QueueKernelsTest.cpp - the backend's own kernels, emulated ---------===//
//
// QueueKernels.cu's fill (poison), accumulate and bf16 kernels are the CUDA
// backend's, not an opcode's, so KernelDiffTest.cpp never runs them: here
// they run through the emulated backend (EmulatedBackend.cpp) against the
// CPU backend's poison and queues, and a plain loop. Sizes: a tail shorter than
// a word, counts not a multiple of the block, and more elements than the grid
// cap (4096 blocks of 256) so that the grid-stride loop wraps.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuBackend.h"
#include "runtime/cuda/CudaBackend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace zplan;

namespace {

Backend &emulated() {
  static std::unique_ptr<Backend> backend = [] {
    std::unique_ptr<Backend> b;
    EXPECT_TRUE(cuda::createCudaBackend(0, b).ok());
    return b;
  }();
  return *backend;
}

TEST(EmulatedQueueKernels, PoisonMatchesTheCpuBackend) {
  for (ElementType type : {ElementType::F32, ElementType::F64, ElementType::I64,
                           ElementType::I8, ElementType::Bool})
    for (uint64_t bytes : {1, 6, 8, 1030, 300001}) {
      std::vector<uint8_t> expected(bytes, 0), actual(bytes, 0);
      ASSERT_TRUE(cpu::cpuBackend().poison(expected.data(), bytes, type).ok());
      ASSERT_TRUE(emulated().poison(actual.data(), bytes, type).ok());
      EXPECT_EQ(expected, actual)
          << elementTypeInfo(type).name << ", " << bytes << " bytes";
    }
}

TEST(EmulatedQueueKernels, AccumulateAddsEveryElement) {
  std::unique_ptr<Queues> queues;
  ASSERT_TRUE(emulated().createQueues(1, false, queues).ok());
  for (uint64_t count : {1, 257, 4096 * 256 + 300}) {
    std::vector<float> target(count), source(count), expected(count);
    for (uint64_t i = 0; i < count; ++i) {
      target[i] = float(i % 97) * 0.5f;
      source[i] = float(i % 13) - 6.0f;
      expected[i] = target[i] + source[i];
    }
    ASSERT_TRUE(
        queues->accumulate(plan::COMPUTE, target.data(), source.data(), count)
            .ok());
    ASSERT_TRUE(queues->synchronize().ok());
    EXPECT_EQ(expected, target) << count << " elements";
  }
}

/// The mixed-precision conversions around a collective (Instructions.cpp):
/// rounding to bf16 and accumulating bf16 into f32, bit for bit the CPU
/// backend's (both compile runtime/support/Bfloat16.h).
TEST(EmulatedQueueKernels, Bf16ConversionsMatchTheCpuBackend) {
  std::unique_ptr<Queues> device, host;
  ASSERT_TRUE(emulated().createQueues(1, false, device).ok());
  ASSERT_TRUE(cpu::cpuBackend().createQueues(1, false, host).ok());
  for (uint64_t count : {1, 257, 4096 * 256 + 300}) {
    std::vector<float> source(count);
    for (uint64_t i = 0; i < count; ++i)
      source[i] = (float(i % 1013) - 506.0f) * 1.00390625f / 7.0f;
    std::vector<uint16_t> expected(count), actual(count);
    ASSERT_TRUE(
        host->roundToBf16(plan::COMM, expected.data(), source.data(), count)
            .ok());
    ASSERT_TRUE(
        device->roundToBf16(plan::COMM, actual.data(), source.data(), count)
            .ok());
    ASSERT_TRUE(device->synchronize().ok());
    EXPECT_EQ(expected, actual) << count << " elements";

    std::vector<float> hostSum(source), deviceSum(source);
    ASSERT_TRUE(
        host->accumulateBf16(plan::COMM, hostSum.data(), expected.data(), count)
            .ok());
    ASSERT_TRUE(device
                    ->accumulateBf16(plan::COMM, deviceSum.data(),
                                     expected.data(), count)
                    .ok());
    ASSERT_TRUE(device->synchronize().ok());
    EXPECT_EQ(hostSum, deviceSum) << count << " elements";
    // The sum moved: the accumulation is not a no-op.
    EXPECT_NE(hostSum, source);
  }
}

} // namespace
