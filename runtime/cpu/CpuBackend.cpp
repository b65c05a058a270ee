//===- CpuBackend.cpp - the CPU implementation of the Backend interface ---===//
//
// Memory is touched when allocated (every page written once), so that the
// first run does not pay for page faults and the RSS `zrun --stats` reports
// includes the arena. A prepared kernel holds the kernel function found in
// Kernels.cpp's opcode table and its tensors: running it is one indirect
// call. A matmul whose rhs is a weight its program only reads holds that
// weight packed as well (StationaryWeights.h).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuBackend.h"

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cpu/StationaryWeights.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/support/Bfloat16.h"
#include "runtime/support/Checksum.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

using namespace zplan;
using namespace zplan::cpu;

namespace {

uint64_t roundUp(uint64_t bytes) {
  return (bytes + kMemoryAlignment - 1) / kMemoryAlignment * kMemoryAlignment;
}

/// Bytes read from a file, kept where they are (no copy on the CPU).
class AdoptedHostBytes final : public BackendMemory {
public:
  explicit AdoptedHostBytes(std::vector<uint8_t> &&host)
      : storage(std::move(host)) {}
  uint8_t *data() const override {
    return storage.empty() ? nullptr : const_cast<uint8_t *>(storage.data());
  }
  uint64_t bytes() const override { return storage.size(); }

private:
  std::vector<uint8_t> storage;
};

/// A kernel function and its tensors; a matmul whose rhs is a weight its
/// program only reads (TensorRef::weightsVersion) keeps that weight packed
/// across runs as well (`packed`, StationaryWeights.h).
class CpuKernel final : public PreparedKernel {
public:
  CpuKernel(const plan::Instruction &instruction,
            std::vector<TensorRef> operands, std::vector<TensorRef> results,
            cpu::detail::KernelFunction function)
      : instruction(instruction), operands(std::move(operands)),
        results(std::move(results)), function(function) {
    if (instruction.opcode() == plan::OPCODE_MATMUL &&
        this->operands.size() >= 2 && this->operands[1].weightsVersion)
      packed = std::make_unique<cpu::detail::PackedRhs>();
  }

  Status run() override {
    cpu::detail::KernelCall call{instruction, operands, results};
    return packed ? cpu::detail::runMatmulStationary(call, *packed)
                  : function(call);
  }

private:
  const plan::Instruction &instruction;
  std::vector<TensorRef> operands;
  std::vector<TensorRef> results;
  cpu::detail::KernelFunction function;
  std::unique_ptr<cpu::detail::PackedRhs> packed; // null: nothing kept
};

/// A CPU kernel or collective has completed when the call that issued it
/// returns: the executor's host-side events are all the ordering needed.
class CpuQueues final : public Queues {
public:
  Status recordCompletion(plan::Queue, uint32_t) override {
    return Status::success();
  }
  Status waitFor(plan::Queue, uint32_t) override { return Status::success(); }
  Status synchronize() override { return Status::success(); }
  Status copy(plan::Queue, void *target, const void *source,
              uint64_t bytes) override {
    if (bytes != 0)
      std::memcpy(target, source, bytes);
    return Status::success();
  }
  Status zero(plan::Queue, void *target, uint64_t bytes) override {
    if (bytes != 0)
      std::memset(target, 0, bytes);
    return Status::success();
  }
  Status accumulate(plan::Queue, float *target, const float *source,
                    uint64_t count) override {
    for (uint64_t i = 0; i < count; ++i)
      target[i] += source[i];
    return Status::success();
  }
  Status roundToBf16(plan::Queue, uint16_t *target, const float *source,
                     uint64_t count) override {
    narrowBf16(source, static_cast<int64_t>(count), target);
    return Status::success();
  }
  Status accumulateBf16(plan::Queue, float *target, const uint16_t *source,
                        uint64_t count) override {
    for (uint64_t i = 0; i < count; ++i)
      target[i] += bf16ToFloat(source[i]);
    return Status::success();
  }
};

} // namespace

Status CpuBackend::allocate(uint64_t bytes, std::string_view what,
                            std::unique_ptr<BackendMemory> &out) {
  uint64_t size = std::max<uint64_t>(roundUp(bytes), kMemoryAlignment);
  auto *memory =
      static_cast<uint8_t *>(std::aligned_alloc(kMemoryAlignment, size));
  if (!memory)
    return failure("cannot allocate ", bytes, " bytes for ", what);
  std::memset(memory, 0, size);
  out = std::make_unique<AlignedHostMemory>(memory, bytes);
  return Status::success();
}

Status CpuBackend::adopt(std::vector<uint8_t> &&host,
                         std::unique_ptr<BackendMemory> &out) {
  out = std::make_unique<AdoptedHostBytes>(std::move(host));
  return Status::success();
}

Status CpuBackend::copyFromHost(void *target, const void *source,
                                uint64_t bytes) {
  if (bytes != 0)
    std::memcpy(target, source, bytes);
  return Status::success();
}

Status CpuBackend::copyToHost(void *target, const void *source,
                              uint64_t bytes) {
  if (bytes != 0)
    std::memcpy(target, source, bytes);
  return Status::success();
}

uint64_t CpuBackend::weightCopyBytes() const {
  return cpu::detail::packedWeightBytes();
}

bool CpuBackend::hasKernel(plan::Opcode opcode) const {
  return cpu::detail::findKernel(opcode) != nullptr;
}

Status CpuBackend::prepareKernel(const plan::Instruction &instruction,
                                 std::vector<TensorRef> operands,
                                 std::vector<TensorRef> results,
                                 std::unique_ptr<PreparedKernel> &out) {
  cpu::detail::KernelFunction function =
      cpu::detail::findKernel(instruction.opcode());
  if (!function)
    return Status::error(plan::opcodeName(instruction.opcode()) +
                         ": the CPU backend has no kernel for this op");
  cpu::detail::chooseDefaultBlasThreads();
  out = std::make_unique<CpuKernel>(instruction, std::move(operands),
                                    std::move(results), function);
  return Status::success();
}

Status CpuBackend::createQueues(uint32_t, bool, std::unique_ptr<Queues> &out) {
  out = std::make_unique<CpuQueues>();
  return Status::success();
}

Status CpuBackend::poison(void *data, uint64_t bytes, ElementType type) {
  auto *target = static_cast<uint8_t *>(data);
  const ElementTypeInfo &info = elementTypeInfo(type);
  if (info.quietNaN == 0) {
    std::memset(target, 0xA5, bytes);
    return Status::success();
  }
  // The NaN's low `info.bytes` bytes, repeated (little-endian host).
  uint64_t count = bytes / info.bytes;
  for (uint64_t i = 0; i < count; ++i)
    std::memcpy(target + i * info.bytes, &info.quietNaN, info.bytes);
  std::memset(target + count * info.bytes, 0xA5, bytes % info.bytes);
  return Status::success();
}

Status CpuBackend::checksum(const void *data, uint64_t bytes, uint64_t &out) {
  // The one checksum zcc's writer and the loader use too.
  out = zplan::checksum(data, bytes);
  return Status::success();
}

void CpuBackend::setThreads(int threads) { cpu::setKernelThreads(threads); }

CpuBackend &zplan::cpu::cpuBackend() {
  static CpuBackend backend;
  return backend;
}
