//===- CudaBackendTest.cpp - the CUDA backend's memory, queues and --check ===//
//
// What the executor relies on from a device backend, checked against the
// CPU backend where they must agree byte for byte (poison patterns,
// checksums) and by value elsewhere (copies, the queues' copy, zero and
// accumulate, the order one queue's event imposes on the other, device
// times, a kernel's device-side error reported at synchronize). Built
// wherever CUDA is installed (ctest label gpu); every test skips, saying
// why, where the CUDA runtime sees no device.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackend.h"
#include "runtime/cpu/CpuBackend.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

using namespace zplan;

namespace {

class CudaBackendTest : public ::testing::Test {
protected:
  void SetUp() override {
    if (cuda::deviceCount() == 0)
      GTEST_SKIP() << "no CUDA device: " << cuda::noDeviceReason();
    Status status = cuda::createCudaBackend(0, backend);
    ASSERT_TRUE(status.ok()) << status.message();
  }

  /// `bytes` of zeroed device memory.
  std::unique_ptr<BackendMemory> allocate(uint64_t bytes) {
    std::unique_ptr<BackendMemory> memory;
    Status status = backend->allocate(bytes, "a test buffer", memory);
    EXPECT_TRUE(status.ok()) << status.message();
    return memory;
  }

  std::vector<uint8_t> read(const BackendMemory &memory) {
    std::vector<uint8_t> host(memory.bytes());
    Status status =
        backend->copyToHost(host.data(), memory.data(), host.size());
    EXPECT_TRUE(status.ok()) << status.message();
    return host;
  }

  std::unique_ptr<Backend> backend;
};

TEST_F(CudaBackendTest, AllocatesZeroedMemoryAndCopiesBothWays) {
  auto memory = allocate(1001);
  EXPECT_EQ(memory->bytes(), 1001u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(memory->data()) % kMemoryAlignment, 0u);
  std::vector<uint8_t> host = read(*memory);
  EXPECT_EQ(std::count(host.begin(), host.end(), 0), 1001);
  std::iota(host.begin(), host.end(), uint8_t(7));
  ASSERT_TRUE(
      backend->copyFromHost(memory->data(), host.data(), host.size()).ok());
  EXPECT_EQ(read(*memory), host);
}

TEST_F(CudaBackendTest, AdoptCopiesWeightsToTheDevice) {
  std::vector<uint8_t> weights(4096);
  std::iota(weights.begin(), weights.end(), uint8_t(3));
  std::vector<uint8_t> expected = weights;
  std::unique_ptr<BackendMemory> memory;
  ASSERT_TRUE(backend->adopt(std::move(weights), memory).ok());
  EXPECT_EQ(read(*memory), expected);
}

TEST_F(CudaBackendTest, PoisonWritesTheCpuBackendsBytes) {
  for (ElementType type :
       {ElementType::F32, ElementType::BF16, ElementType::F64, ElementType::I64,
        ElementType::I32, ElementType::Bool})
    for (uint64_t bytes : {uint64_t(8), uint64_t(1000), uint64_t(100003)}) {
      auto memory = allocate(bytes);
      ASSERT_TRUE(backend->poison(memory->data(), bytes, type).ok());
      std::vector<uint8_t> expected(bytes, 0);
      ASSERT_TRUE(cpu::cpuBackend().poison(expected.data(), bytes, type).ok());
      EXPECT_EQ(read(*memory), expected)
          << elementTypeInfo(type).name << ", " << bytes << " bytes";
    }
}

TEST_F(CudaBackendTest, ChecksumEqualsTheCpuBackends) {
  std::vector<uint8_t> host(77777);
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = static_cast<uint8_t>(i * 131 + 17);
  auto memory = allocate(host.size());
  ASSERT_TRUE(
      backend->copyFromHost(memory->data(), host.data(), host.size()).ok());
  uint64_t device = 0, expected = 0;
  ASSERT_TRUE(backend->checksum(memory->data(), host.size(), device).ok());
  ASSERT_TRUE(
      cpu::cpuBackend().checksum(host.data(), host.size(), expected).ok());
  EXPECT_EQ(device, expected);
}

TEST_F(CudaBackendTest, QueuesCopyZeroAndAccumulate) {
  const uint64_t count = 300001;
  std::vector<float> values(count);
  for (uint64_t i = 0; i < count; ++i)
    values[i] = 0.5f * static_cast<float>(i % 97);
  auto source = allocate(count * sizeof(float));
  auto target = allocate(count * sizeof(float));
  ASSERT_TRUE(
      backend
          ->copyFromHost(source->data(), values.data(), count * sizeof(float))
          .ok());
  std::unique_ptr<Queues> queues;
  ASSERT_TRUE(backend->createQueues(1, false, queues).ok());
  auto *sum = reinterpret_cast<float *>(target->data());
  auto *from = reinterpret_cast<const float *>(source->data());
  // target = source; target += source; target += source -> 3 * source.
  ASSERT_TRUE(queues->copy(plan::COMM, sum, from, count * sizeof(float)).ok());
  ASSERT_TRUE(queues->accumulate(plan::COMM, sum, from, count).ok());
  ASSERT_TRUE(queues->accumulate(plan::COMM, sum, from, count).ok());
  ASSERT_TRUE(queues->synchronize().ok());
  std::vector<float> result(count);
  ASSERT_TRUE(
      backend->copyToHost(result.data(), sum, count * sizeof(float)).ok());
  for (uint64_t i = 0; i < count; ++i)
    ASSERT_EQ(result[i], 3.0f * values[i]) << "element " << i;
  ASSERT_TRUE(queues->zero(plan::COMPUTE, sum, count * sizeof(float)).ok());
  ASSERT_TRUE(queues->synchronize().ok());
  ASSERT_TRUE(
      backend->copyToHost(result.data(), sum, count * sizeof(float)).ok());
  EXPECT_EQ(std::count(result.begin(), result.end(), 0.0f),
            static_cast<long>(count));
}

TEST_F(CudaBackendTest, AnEventOrdersTheOtherQueue) {
  // Comm: many accumulations into `sum` (long enough to still be running
  // when compute is issued), then event 0. Compute waits for event 0 and
  // copies `sum` out: without the wait it would copy a partial sum.
  const uint64_t count = uint64_t(1) << 22;
  const int rounds = 50;
  std::vector<float> ones(count, 1.0f);
  auto source = allocate(count * sizeof(float));
  auto sumMemory = allocate(count * sizeof(float));
  auto copyMemory = allocate(count * sizeof(float));
  ASSERT_TRUE(
      backend->copyFromHost(source->data(), ones.data(), count * sizeof(float))
          .ok());
  auto *sum = reinterpret_cast<float *>(sumMemory->data());
  std::unique_ptr<Queues> queues;
  ASSERT_TRUE(backend->createQueues(2, false, queues).ok());
  for (int round = 0; round < rounds; ++round)
    ASSERT_TRUE(queues
                    ->accumulate(plan::COMM, sum,
                                 reinterpret_cast<float *>(source->data()),
                                 count)
                    .ok());
  ASSERT_TRUE(queues->recordCompletion(plan::COMM, 0).ok());
  ASSERT_TRUE(queues->waitFor(plan::COMPUTE, 0).ok());
  ASSERT_TRUE(
      queues
          ->copy(plan::COMPUTE, copyMemory->data(), sum, count * sizeof(float))
          .ok());
  ASSERT_TRUE(queues->recordCompletion(plan::COMPUTE, 1).ok());
  ASSERT_TRUE(queues->synchronize().ok());
  std::vector<float> copied(count);
  ASSERT_TRUE(
      backend
          ->copyToHost(copied.data(), copyMemory->data(), count * sizeof(float))
          .ok());
  for (uint64_t i = 0; i < count; i += 4099)
    ASSERT_EQ(copied[i], static_cast<float>(rounds)) << "element " << i;
}

TEST_F(CudaBackendTest, TimesEveryInstructionOnTheDevice) {
  auto memory = allocate(uint64_t(64) << 20);
  std::unique_ptr<Queues> queues;
  ASSERT_TRUE(backend->createQueues(2, true, queues).ok());
  ASSERT_TRUE(queues->timesOnDevice());
  ASSERT_TRUE(queues->beginRun().ok());
  for (uint32_t index : {0u, 1u}) {
    plan::Queue queue = index == 0 ? plan::COMPUTE : plan::COMM;
    ASSERT_TRUE(queues->recordStart(queue, index).ok());
    ASSERT_TRUE(queues->zero(queue, memory->data(), memory->bytes()).ok());
    ASSERT_TRUE(queues->recordCompletion(queue, index).ok());
  }
  ASSERT_TRUE(queues->synchronize().ok());
  for (uint32_t index : {0u, 1u}) {
    uint64_t start = 0, end = 0;
    ASSERT_TRUE(queues->timesOf(index, start, end).ok());
    EXPECT_GT(end, start) << "instruction " << index;
  }
}

TEST_F(CudaBackendTest, AKernelsDeviceSideErrorFailsTheSynchronize) {
  // An embedding of a 4-row table read at row 9: the kernel cannot return
  // an error, so it reports one the queues' synchronize() turns into a
  // message naming the op.
  plan::Instruction instruction;
  instruction.set_opcode(plan::OPCODE_EMBEDDING);
  instruction.set_queue(plan::COMPUTE);
  auto table = allocate(4 * 8 * sizeof(float));
  auto ids = allocate(2 * sizeof(int64_t));
  auto out = allocate(2 * 8 * sizeof(float));
  int64_t badIds[2] = {1, 9};
  ASSERT_TRUE(backend->copyFromHost(ids->data(), badIds, sizeof(badIds)).ok());
  std::unique_ptr<PreparedKernel> kernel;
  Status prepared = backend->prepareKernel(
      instruction,
      {TensorRef{table->data(), {4, 8}, ElementType::F32},
       TensorRef{ids->data(), {2}, ElementType::I64}},
      {TensorRef{out->data(), {2, 8}, ElementType::F32}}, kernel);
  ASSERT_TRUE(prepared.ok()) << prepared.message();
  std::unique_ptr<Queues> queues;
  ASSERT_TRUE(backend->createQueues(1, false, queues).ok());
  ASSERT_TRUE(kernel->run().ok());
  Status synchronized = queues->synchronize();
  ASSERT_FALSE(synchronized.ok());
  EXPECT_NE(synchronized.message().find("embedding: "), std::string::npos)
      << synchronized.message();
  // Reported once: the next synchronize is clean.
  EXPECT_TRUE(queues->synchronize().ok());
}

} // namespace
