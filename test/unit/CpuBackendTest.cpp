//===- CpuBackendTest.cpp - the Backend interface on the CPU --------------===//
//
// What the executor relies on from a backend, checked on the CPU one:
// allocations are aligned and zeroed, adopted weights stay where they were
// read, a compute instruction resolves once to a kernel that runs without a
// look-up (and an opcode with no kernel fails to resolve), poison writes the
// element type's NaN, and the checksum notices a changed or swapped word.
// checkProgramSupported asks the backend it is given, so "is there a
// kernel" has one answer.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuBackend.h"
#include "runtime/exec/Executor.h"

#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace zplan;
using zplan::testing::contains;
using zplan::testing::errorOf;

namespace {

Backend &backend() { return cpu::cpuBackend(); }

TEST(CpuBackend, AllocationsAreAlignedAndZeroed) {
  std::unique_ptr<BackendMemory> memory;
  ASSERT_TRUE(backend().allocate(1000, "a test buffer", memory).ok());
  EXPECT_EQ(memory->bytes(), 1000u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(memory->data()) % kMemoryAlignment, 0u);
  for (uint64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(memory->data()[i], 0) << i;
  // Even nothing gets an address (an arena of 0 bytes).
  std::unique_ptr<BackendMemory> empty;
  ASSERT_TRUE(backend().allocate(0, "an empty arena", empty).ok());
  EXPECT_NE(empty->data(), nullptr);
}

TEST(CpuBackend, AdoptedBytesStayInPlace) {
  std::vector<uint8_t> host = {1, 2, 3, 4, 5};
  const uint8_t *before = host.data();
  std::unique_ptr<BackendMemory> memory;
  ASSERT_TRUE(backend().adopt(std::move(host), memory).ok());
  EXPECT_EQ(memory->data(), before);
  EXPECT_EQ(memory->bytes(), 5u);
  EXPECT_EQ(memory->data()[4], 5);
}

TEST(CpuBackend, KernelsResolveOnceAndRun) {
  plan::Instruction add;
  add.set_opcode(plan::OPCODE_ADD);
  float a[3] = {1, 2, 3}, b[3] = {10, 20, 30}, sum[3] = {};
  std::vector<TensorRef> operands = {{a, {3}, ElementType::F32},
                                     {b, {3}, ElementType::F32}};
  std::vector<TensorRef> results = {{sum, {3}, ElementType::F32}};
  std::unique_ptr<PreparedKernel> kernel;
  ASSERT_TRUE(backend().prepareKernel(add, operands, results, kernel).ok());
  ASSERT_TRUE(kernel->run().ok());
  EXPECT_EQ(sum[2], 33.0f);
  // The prepared kernel reads the memory it was prepared with, every run.
  a[2] = 100;
  ASSERT_TRUE(kernel->run().ok());
  EXPECT_EQ(sum[2], 130.0f);

  plan::Instruction gather;
  gather.set_opcode(plan::OPCODE_ALL_GATHER);
  EXPECT_FALSE(backend().hasKernel(plan::OPCODE_ALL_GATHER));
  EXPECT_TRUE(contains(
      errorOf(backend().prepareKernel(gather, operands, results, kernel)),
      "all_gather: the CPU backend has no kernel"));
}

TEST(CpuBackend, PoisonWritesTheTypesNaN) {
  float f32[3];
  ASSERT_TRUE(backend().poison(f32, sizeof(f32), ElementType::F32).ok());
  for (float value : f32)
    EXPECT_TRUE(std::isnan(value));
  double f64[2];
  ASSERT_TRUE(backend().poison(f64, sizeof(f64), ElementType::F64).ok());
  EXPECT_TRUE(std::isnan(f64[0]) && std::isnan(f64[1]));
  uint16_t bf16[2];
  ASSERT_TRUE(backend().poison(bf16, sizeof(bf16), ElementType::BF16).ok());
  EXPECT_EQ(bf16[1], 0x7FC0);
  int64_t i64[2];
  ASSERT_TRUE(backend().poison(i64, sizeof(i64), ElementType::I64).ok());
  EXPECT_EQ(static_cast<uint64_t>(i64[0]), 0xA5A5A5A5A5A5A5A5ull);
}

TEST(CpuBackend, ChecksumNoticesChangedAndSwappedWords) {
  uint64_t words[4] = {1, 2, 3, 4};
  uint64_t original, changed, swapped;
  ASSERT_TRUE(backend().checksum(words, sizeof(words), original).ok());
  words[3] = 5;
  ASSERT_TRUE(backend().checksum(words, sizeof(words), changed).ok());
  words[3] = 4;
  std::swap(words[0], words[1]);
  ASSERT_TRUE(backend().checksum(words, sizeof(words), swapped).ok());
  EXPECT_NE(original, changed);
  EXPECT_NE(original, swapped);
  std::swap(words[0], words[1]);
  uint64_t again;
  ASSERT_TRUE(backend().checksum(words, sizeof(words), again).ok());
  EXPECT_EQ(original, again);
}

/// The CPU backend without a matmul kernel: a backend that lacks an op.
class NoMatmulBackend final : public Backend {
public:
  std::string_view name() const override { return "no-matmul"; }
  Status allocate(uint64_t bytes, std::string_view what,
                  std::unique_ptr<BackendMemory> &out) override {
    return backend().allocate(bytes, what, out);
  }
  Status adopt(std::vector<uint8_t> &&host,
               std::unique_ptr<BackendMemory> &out) override {
    return backend().adopt(std::move(host), out);
  }
  Status copyFromHost(void *target, const void *source,
                      uint64_t bytes) override {
    return backend().copyFromHost(target, source, bytes);
  }
  Status copyToHost(void *target, const void *source, uint64_t bytes) override {
    return backend().copyToHost(target, source, bytes);
  }
  bool hasKernel(plan::Opcode opcode) const override {
    return opcode != plan::OPCODE_MATMUL && backend().hasKernel(opcode);
  }
  Status prepareKernel(const plan::Instruction &instruction,
                       std::vector<TensorRef> operands,
                       std::vector<TensorRef> results,
                       std::unique_ptr<PreparedKernel> &out) override {
    return backend().prepareKernel(instruction, std::move(operands),
                                   std::move(results), out);
  }
  Status createQueues(uint32_t count, bool timing,
                      std::unique_ptr<Queues> &out) override {
    return backend().createQueues(count, timing, out);
  }
  Status poison(void *data, uint64_t bytes, ElementType type) override {
    return backend().poison(data, bytes, type);
  }
  Status checksum(const void *data, uint64_t bytes, uint64_t &out) override {
    return backend().checksum(data, bytes, out);
  }
};

TEST(CpuBackend, CheckProgramSupportedAsksTheBackend) {
  plan::Plan plan;
  plan::Program &program = *plan.add_programs();
  program.set_name("infer");
  plan::Instruction &matmul = *program.add_instructions();
  matmul.set_index(0);
  matmul.set_queue(plan::COMPUTE);
  matmul.set_opcode(plan::OPCODE_MATMUL);
  matmul.set_location("/MatMul");
  EXPECT_TRUE(checkProgramSupported(plan, program, backend()).ok());
  NoMatmulBackend lacking;
  EXPECT_TRUE(contains(errorOf(checkProgramSupported(plan, program, lacking)),
                       "program 'infer', instruction #0 'matmul' at '/MatMul': "
                       "the no-matmul backend has no kernel for 'matmul'"));
}

} // namespace
