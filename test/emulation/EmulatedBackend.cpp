//===- EmulatedBackend.cpp - the CUDA backend's kernels, emulated ---------===//
//
// What KernelDiffTest.cpp (built with ZPLAN_KERNEL_DIFF_CUDA=1) takes for
// the CUDA backend when it is linked here instead of CudaBackend.cpp:
// cuda::deviceCount() is 1 and createCudaBackend() returns this backend.
// Memory is host memory (the CPU backend's); every kernel is the CUDA
// entry point the real cuda::findKernel table registers (KernelTable.cpp,
// compiled under Prelude.h), run by the SIMT emulator with a DeviceContext
// like CudaBackend's: the 64 MiB workspace, the error word (reported at
// synchronize as CudaBackend::takeKernelError words it), and a device of
// two SMs, so that gridFor's grids stay small and the grid-stride loops
// wrap ($ZPLAN_EMULATION_SMS sets another count). An opcode without a CUDA
// kernel fails to prepare, as on CUDA. Poison and accumulate go through
// QueueKernels.cu's kernels too.
//
//===----------------------------------------------------------------------===//

#include "test/emulation/Prelude.h"

#include "runtime/cpu/CpuBackend.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/QueueKernels.h"
#include "runtime/ops/KernelCall.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/support/ElementType.h"

#include <cstdlib>
#include <cstring>

using namespace zplan;

namespace {

cuda::DeviceContext &deviceContext() {
  static cuda::DeviceContext device = [] {
    static std::vector<char> workspace(64u << 20);
    static uint32_t errorWord = 0;
    cuda::DeviceContext d;
    d.workspace = workspace.data();
    d.workspaceBytes = workspace.size();
    d.errorWord = &errorWord;
    // $ZPLAN_EMULATION_SMS: a device of another size (132 is an H100's).
    const char *sms = std::getenv("ZPLAN_EMULATION_SMS");
    d.properties.multiProcessorCount = sms ? std::atoi(sms) : 2;
    d.properties.sharedMemPerBlock = 48 * 1024;
    d.properties.sharedMemPerBlockOptin = 227 * 1024;
    d.properties.maxThreadsPerBlock = 1024;
    d.properties.warpSize = 32;
    return d;
  }();
  return device;
}

/// Device memory of exactly the bytes asked for (64-byte aligned as
/// cudaMalloc's), zeroed as the CPU backend's: under ASan a kernel that
/// reads or writes past a tensor's end is reported, where the CPU
/// backend's 64-byte rounding would hide it.
class ExactMemory final : public BackendMemory {
public:
  explicit ExactMemory(uint64_t bytes) : size(bytes) {
    // posix_memalign: aligned_alloc wants a multiple of the alignment.
    void *raw = nullptr;
    if (bytes && posix_memalign(&raw, 64, bytes) == 0) {
      memory = static_cast<uint8_t *>(raw);
      std::memset(memory, 0, size);
    }
  }
  ~ExactMemory() override { std::free(memory); }
  uint8_t *data() const override { return memory; }
  uint64_t bytes() const override { return size; }

private:
  uint8_t *memory = nullptr;
  uint64_t size;
};

class EmulatedKernel final : public PreparedKernel {
public:
  EmulatedKernel(const plan::Instruction &instruction,
                 std::vector<TensorRef> operands,
                 std::vector<TensorRef> results, cuda::KernelFunction function)
      : instruction(instruction), operands(std::move(operands)),
        results(std::move(results)), function(function) {}

  Status run() override {
    // The workspace holds whatever the previous kernel left: poison it so
    // that a kernel reading scratch it did not write fails the diff.
    cuda::DeviceContext &device = deviceContext();
    std::memset(device.workspace, 0xff, device.workspaceBytes);
    ops::KernelCall host{instruction, operands, results};
    return function(cuda::KernelCall{host, device});
  }

private:
  const plan::Instruction &instruction;
  std::vector<TensorRef> operands, results;
  cuda::KernelFunction function;
};

/// The CPU's queues (everything runs in order at once), with the kernels'
/// error word read at synchronize and accumulate through the CUDA kernel.
class EmulatedQueues final : public Queues {
public:
  explicit EmulatedQueues(std::unique_ptr<Queues> inner)
      : inner(std::move(inner)) {}

  Status recordCompletion(plan::Queue queue, uint32_t index) override {
    return inner->recordCompletion(queue, index);
  }
  Status waitFor(plan::Queue queue, uint32_t index) override {
    return inner->waitFor(queue, index);
  }
  Status synchronize() override {
    if (Status status = inner->synchronize(); !status.ok())
      return status;
    uint32_t &word = *deviceContext().errorWord;
    if (word == 0)
      return Status::success();
    auto opcode = static_cast<plan::Opcode>(word >> 8);
    auto error = static_cast<cuda::KernelError>(word & 0xFF);
    word = 0;
    return Status::error(plan::opcodeName(opcode) + ": " +
                         cuda::kernelErrorText(error) +
                         " (found on the device)");
  }
  Status copy(plan::Queue queue, void *target, const void *source,
              uint64_t bytes) override {
    return inner->copy(queue, target, source, bytes);
  }
  Status zero(plan::Queue queue, void *target, uint64_t bytes) override {
    return inner->zero(queue, target, bytes);
  }
  Status accumulate(plan::Queue, float *target, const float *source,
                    uint64_t count) override {
    if (cuda::accumulate(target, source, count, nullptr) != cudaSuccess)
      return Status::error("accumulate: the emulated kernel failed to launch");
    return Status::success();
  }
  Status roundToBf16(plan::Queue, uint16_t *target, const float *source,
                     uint64_t count) override {
    if (cuda::roundToBf16(target, source, count, nullptr) != cudaSuccess)
      return Status::error("roundToBf16: the emulated kernel failed to launch");
    return Status::success();
  }
  Status accumulateBf16(plan::Queue, float *target, const uint16_t *source,
                        uint64_t count) override {
    if (cuda::accumulateBf16(target, source, count, nullptr) != cudaSuccess)
      return Status::error(
          "accumulateBf16: the emulated kernel failed to launch");
    return Status::success();
  }

private:
  std::unique_ptr<Queues> inner;
};

class EmulatedBackend final : public Backend {
public:
  std::string_view name() const override { return "cuda (emulated)"; }
  Status allocate(uint64_t bytes, std::string_view what,
                  std::unique_ptr<BackendMemory> &out) override {
    auto memory = std::make_unique<ExactMemory>(bytes);
    if (bytes && !memory->data())
      return Status::error("cannot allocate " + std::to_string(bytes) +
                           " bytes for " + std::string(what));
    out = std::move(memory);
    return Status::success();
  }
  Status adopt(std::vector<uint8_t> &&host,
               std::unique_ptr<BackendMemory> &out) override {
    return cpu.adopt(std::move(host), out);
  }
  Status copyFromHost(void *target, const void *source,
                      uint64_t bytes) override {
    return cpu.copyFromHost(target, source, bytes);
  }
  Status copyToHost(void *target, const void *source, uint64_t bytes) override {
    return cpu.copyToHost(target, source, bytes);
  }
  bool hasKernel(plan::Opcode opcode) const override {
    return cuda::findKernel(opcode) != nullptr;
  }
  Status prepareKernel(const plan::Instruction &instruction,
                       std::vector<TensorRef> operands,
                       std::vector<TensorRef> results,
                       std::unique_ptr<PreparedKernel> &out) override {
    cuda::KernelFunction function = cuda::findKernel(instruction.opcode());
    if (!function)
      return Status::error(plan::opcodeName(instruction.opcode()) +
                           ": the cuda backend has no kernel for this op");
    out = std::make_unique<EmulatedKernel>(instruction, std::move(operands),
                                           std::move(results), function);
    return Status::success();
  }
  Status createQueues(uint32_t instructionCount, bool timing,
                      std::unique_ptr<Queues> &out) override {
    std::unique_ptr<Queues> inner;
    if (Status status = cpu.createQueues(instructionCount, timing, inner);
        !status.ok())
      return status;
    out = std::make_unique<EmulatedQueues>(std::move(inner));
    return Status::success();
  }
  Status poison(void *data, uint64_t bytes, ElementType type) override {
    // As CudaBackend::poison: the type's quiet NaN, 0xA5 bytes for integers.
    const ElementTypeInfo &info = elementTypeInfo(type);
    uint64_t pattern = info.quietNaN != 0 ? info.quietNaN : 0xA5;
    uint32_t width = info.quietNaN != 0 ? info.bytes : 1;
    if (cuda::fillPattern(data, bytes, pattern, width, nullptr) != cudaSuccess)
      return Status::error("poison: the emulated kernel failed to launch");
    return Status::success();
  }
  Status checksum(const void *data, uint64_t bytes, uint64_t &out) override {
    return cpu.checksum(data, bytes, out);
  }

private:
  cpu::CpuBackend cpu;
};

} // namespace

namespace zplan::cuda {
int deviceCount() { return 1; }
std::string noDeviceReason() { return ""; }
Status createCudaBackend(int, std::unique_ptr<Backend> &out) {
  out = std::make_unique<EmulatedBackend>();
  return Status::success();
}
} // namespace zplan::cuda
