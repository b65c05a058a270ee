//===- CpuBackend.h - the CPU implementation of the Backend interface -----===//
//
// The reference backend: memory is aligned host memory (weights stay in the
// bytes read from the file), each compute instruction resolves to one of the
// kernels of this directory, a kernel runs to completion on the thread that
// issues it (so queues and events need no work beyond the executor's
// host-side events), and --check's poison and checksums are plain loops.
// Stateless: one instance serves every rank memory and executor of a
// process.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_CPUBACKEND_H
#define ZPLAN_RUNTIME_CPU_CPUBACKEND_H

#include "runtime/Backend.h"

namespace zplan::cpu {

class CpuBackend final : public Backend {
public:
  std::string_view name() const override { return "cpu"; }

  /// The threads each kernel may use (cpu::setKernelThreads; one pool per
  /// process): 1 unless set.
  void setThreads(int threads);
  bool hostAddressable() const override { return true; }
  uint64_t weightCopyBytes() const override;

  Status allocate(uint64_t bytes, std::string_view what,
                  std::unique_ptr<BackendMemory> &out) override;
  Status adopt(std::vector<uint8_t> &&host,
               std::unique_ptr<BackendMemory> &out) override;
  Status copyFromHost(void *target, const void *source,
                      uint64_t bytes) override;
  Status copyToHost(void *target, const void *source, uint64_t bytes) override;

  bool hasKernel(plan::Opcode opcode) const override;
  Status prepareKernel(const plan::Instruction &instruction,
                       std::vector<TensorRef> operands,
                       std::vector<TensorRef> results,
                       std::unique_ptr<PreparedKernel> &out) override;

  Status createQueues(uint32_t instructionCount, bool timing,
                      std::unique_ptr<Queues> &out) override;

  Status poison(void *data, uint64_t bytes, ElementType type) override;
  Status checksum(const void *data, uint64_t bytes, uint64_t &out) override;
};

/// The process's CPU backend.
CpuBackend &cpuBackend();

} // namespace zplan::cpu

#endif // ZPLAN_RUNTIME_CPU_CPUBACKEND_H
