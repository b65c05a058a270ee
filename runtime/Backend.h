//===- Backend.h - kernels, memory, queues and events behind the executor -===//
//
// The executor (runtime/exec/Executor.h) owns what every backend shares: the
// two instruction queues, the dependencies between them, and --check's
// bookkeeping. What depends on the hardware sits behind this interface:
//
//  - memory: the arena, this rank's shards, the persistent groups and the
//    constants are allocated (or handed over) through the backend, once, at
//    load (RankMemory); an address is one the backend's kernels can read;
//  - kernels: each compute instruction is resolved once, when the executor
//    is created, into a PreparedKernel (the kernel and the tensor
//    descriptors of its operands and results); a run calls it without any
//    look-up by name or opcode;
//  - queues and events: the executor issues COMPUTE instructions from the
//    thread that calls run() and COMM instructions from its comm thread, and
//    orders them across queues with host-side completion events (one per
//    instruction). A backend whose work is asynchronous makes the device
//    follow the same order through its Queues;
//  - --check: poisoning a released buffer and checksumming resident data
//    run where the data lives.
//
// A backend whose work is asynchronous (a GPU) maps the queues onto its
// streams and the completion events onto its own: the executor's threads
// only *issue* work, recordCompletion(q, i) after issuing instruction i on
// queue q, waitFor(q, j) before issuing one that waits for instruction j of
// the other queue, synchronize() at the end of a run; the device then sees
// exactly the plan's cross-queue edges. Each implementation says how in its
// own header (runtime/cpu/CpuBackend.h, the reference, whose queues do
// nothing; runtime/cuda/CudaBackend.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_BACKEND_H
#define ZPLAN_RUNTIME_BACKEND_H

#include "runtime/plan/plan.pb.h"
#include "runtime/support/ElementType.h"
#include "runtime/support/Status.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace zplan {

/// The alignment of every allocation a backend makes: a cache line on the
/// CPU, and enough for any vector load a kernel does.
inline constexpr uint64_t kMemoryAlignment = 64;

/// A tensor in backend memory: where, what shape, which element type.
/// Built once per operand and result when the executor is created.
struct TensorRef {
  void *data = nullptr;
  std::vector<int64_t> shape;
  ElementType dtype = ElementType::F32;
  /// Set by the executor where the tensor is a weight its program only
  /// reads (Executor.h: a shard, persistent group or constant, in an infer
  /// or logprobs program that writes none of it). Its bytes then change
  /// only when this counter (RankMemory::weightsVersion) moves, and a
  /// kernel may keep a copy derived from them while it stays put: the CPU
  /// GEMM's packed weights (runtime/cpu/StationaryWeights.h). Null
  /// otherwise.
  const std::atomic<uint64_t> *weightsVersion = nullptr;

  int64_t numElements() const {
    int64_t count = 1;
    for (int64_t extent : shape)
      count *= extent;
    return count;
  }
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// Memory a backend allocated or adopted; freed when destroyed.
class BackendMemory {
public:
  virtual ~BackendMemory() = default;
  /// An address the backend's kernels and collectives can use (a host
  /// pointer on the CPU, a device pointer on CUDA); null for zero bytes.
  virtual uint8_t *data() const = 0;
  virtual uint64_t bytes() const = 0;
};

/// One compute instruction, resolved: its kernel and its tensors.
class PreparedKernel {
public:
  virtual ~PreparedKernel() = default;
  /// Runs (CPU) or issues (asynchronous backends) the kernel on the compute
  /// queue. Errors name the op ("matmul: ...").
  virtual Status run() = 0;
};

/// The two queues of one executor and a completion event per instruction
/// (see the file comment for what a CUDA backend does in each call).
class Queues {
public:
  virtual ~Queues() = default;
  /// Instruction `index` has just been issued on `queue`.
  virtual Status recordCompletion(plan::Queue queue, uint32_t index) = 0;
  /// The next instruction issued on `queue` must start after instruction
  /// `index` (of the other queue, already issued) completes.
  virtual Status waitFor(plan::Queue queue, uint32_t index) = 0;
  /// Returns when everything issued on both queues has completed; fails
  /// with what a kernel reported on the device since the last call ("<op>:
  /// <what was wrong>"), where the backend's kernels report asynchronously.
  virtual Status synchronize() = 0;

  // Data movement the executor itself issues (the packing and accumulation
  // around a gradient reduction), in `queue`'s order: host loops on the
  // CPU, asynchronous copies and a kernel on a device.

  /// Copies `bytes` bytes from `source` to `target` (backend memory).
  virtual Status copy(plan::Queue queue, void *target, const void *source,
                      uint64_t bytes) = 0;
  /// Zeroes `bytes` bytes at `target`.
  virtual Status zero(plan::Queue queue, void *target, uint64_t bytes) = 0;
  // Offload (docs/offload.md): the tier copies between backend memory and
  // host memory from Backend::allocateHost().
  /// Copies `bytes` bytes between backend memory and such host memory
  /// (`toDevice`: host `source` to backend `target`; else backend `source`
  /// to host `target`), in `queue`'s order: a plain copy where backend
  /// memory is the host's, an asynchronous one on a device. The host bytes
  /// must stay as they are (fetch) or unread (store) until the copy
  /// completes: until the other queue has waited for it and been
  /// synchronized with synchronizeQueue(), or this one has.
  virtual Status copyHost(plan::Queue queue, void *target, const void *source,
                          uint64_t bytes, bool toDevice) {
    (void)toDevice;
    return copy(queue, target, source, bytes);
  }
  /// Returns when everything issued on `queue` so far has completed (a host
  /// kernel then reads what a copy the queue waited for wrote). Nothing to
  /// do where the queues run synchronously.
  virtual Status synchronizeQueue(plan::Queue) { return Status::success(); }
  /// target[i] += source[i] for i < count (f32).
  virtual Status accumulate(plan::Queue queue, float *target,
                            const float *source, uint64_t count) = 0;
  // Mixed precision (plan.proto, Group.gather_dtype and reduce_dtype):
  /// target[i] = source[i] rounded to bf16 (ops/Bfloat16.h), i < count.
  virtual Status roundToBf16(plan::Queue queue, uint16_t *target,
                             const float *source, uint64_t count) = 0;
  /// target[i] += source[i] (bf16, widened exactly) for i < count.
  virtual Status accumulateBf16(plan::Queue queue, float *target,
                                const uint16_t *source, uint64_t count) = 0;

  // Device timings for --trace. A backend whose queues run asynchronously
  // times each instruction on the device: the executor then calls
  // beginRun() before the run, recordStart() before issuing each
  // instruction, and after synchronize() reads each instruction's times
  // with timesOf(); the host-side times would only say when it was issued.

  /// Whether this backend's queues time instructions on the device (only
  /// when created with timing requested).
  virtual bool timesOnDevice() const { return false; }
  /// Marks time zero of a run's device times.
  virtual Status beginRun() { return Status::success(); }
  /// Instruction `index` is about to be issued on `queue`.
  virtual Status recordStart(plan::Queue, uint32_t) {
    return Status::success();
  }
  /// After synchronize(): instruction `index`'s start and end, in
  /// nanoseconds since beginRun().
  virtual Status timesOf(uint32_t, uint64_t &startNs, uint64_t &endNs) {
    startNs = endNs = 0;
    return Status::success();
  }
};

class Backend {
public:
  virtual ~Backend() = default;

  /// "cpu", "cuda": for messages.
  virtual std::string_view name() const = 0;
  /// Whether this backend's addresses are host addresses (the CPU's): host
  /// code may then read backend memory in place instead of copying it out
  /// (RankMemory::view).
  virtual bool hostAddressable() const { return false; }
  /// What `zrun --stats` says a rank runs on: the name, and for a device
  /// which one ("cuda device 0 (NVIDIA H200, 139.8 GiB)").
  virtual std::string description() const { return std::string(name()); }
  /// The bytes the backend's kernels hold beside the plan's memory as
  /// copies of weights in a layout of their own (the CPU GEMM's packed
  /// weights, runtime/cpu/StationaryWeights.h), for `zrun --stats`.
  virtual uint64_t weightCopyBytes() const { return 0; }

  //===--------------------------------------------------------------------===//
  // Memory
  //===--------------------------------------------------------------------===//

  /// `bytes` of zeroed memory aligned to kMemoryAlignment (at least one
  /// alignment unit, so that even an empty arena has an address). `what`
  /// ("the arena") names it in the error when the allocation fails.
  virtual Status allocate(uint64_t bytes, std::string_view what,
                          std::unique_ptr<BackendMemory> &out) = 0;
  /// `bytes` of host memory (not zeroed, page-aligned) that the queues'
  /// copyHost() moves to and from backend memory: plain memory on the CPU,
  /// pinned (page-locked) memory on a device, whose copies can then run
  /// asynchronously. Offload's host tier and staging live in it.
  virtual Status allocateHost(uint64_t bytes, std::string_view what,
                              std::unique_ptr<BackendMemory> &out) {
    return allocateAlignedHost(bytes, what, out);
  }
  /// The CPU's allocateHost(): page-aligned memory from the C library.
  static Status allocateAlignedHost(uint64_t bytes, std::string_view what,
                                    std::unique_ptr<BackendMemory> &out);
  /// Takes `host` (weights read from the file) into backend memory: the CPU
  /// keeps the bytes where they are, a device backend copies and frees them.
  virtual Status adopt(std::vector<uint8_t> &&host,
                       std::unique_ptr<BackendMemory> &out) = 0;
  /// Copies `bytes` host bytes at `source` to backend memory at `target`.
  virtual Status copyFromHost(void *target, const void *source,
                              uint64_t bytes) = 0;
  /// Copies `bytes` bytes of backend memory at `source` to host memory at
  /// `target`, after everything issued before on either queue completed
  /// (outputs, the loss, logits the sampler reads).
  virtual Status copyToHost(void *target, const void *source,
                            uint64_t bytes) = 0;

  //===--------------------------------------------------------------------===//
  // Kernels
  //===--------------------------------------------------------------------===//

  /// Whether prepareKernel() can resolve `opcode`: the one answer both the
  /// plan check before any work and the executor rely on.
  virtual bool hasKernel(plan::Opcode opcode) const = 0;
  /// Resolves compute instruction `instruction` (which must outlive the
  /// kernel) over `operands` and `results`. Fails when the backend has no
  /// kernel for its opcode.
  virtual Status prepareKernel(const plan::Instruction &instruction,
                               std::vector<TensorRef> operands,
                               std::vector<TensorRef> results,
                               std::unique_ptr<PreparedKernel> &out) = 0;

  //===--------------------------------------------------------------------===//
  // Queues and events
  //===--------------------------------------------------------------------===//

  /// The queues and `instructionCount` completion events of one executor;
  /// `timing` asks for device times of every instruction (--trace).
  virtual Status createQueues(uint32_t instructionCount, bool timing,
                              std::unique_ptr<Queues> &out) = 0;
  /// Makes the calling thread ready to issue work on this backend (the
  /// executor's comm thread calls it first: a device backend makes its
  /// device current there).
  virtual Status bindThread() { return Status::success(); }

  //===--------------------------------------------------------------------===//
  // --check
  //===--------------------------------------------------------------------===//

  /// Fills `bytes` at `data` with quiet NaNs of `type` (a recognisable 0xA5
  /// byte pattern for integer types, which have no NaN).
  virtual Status poison(void *data, uint64_t bytes, ElementType type) = 0;
  /// A position-sensitive checksum of `bytes` at `data`: a changed, swapped
  /// or zeroed word changes it. Equal bytes give equal sums on every
  /// backend and rank.
  virtual Status checksum(const void *data, uint64_t bytes, uint64_t &out) = 0;
};

/// Page-aligned host memory from the C library (Backend::allocateHost on
/// the CPU).
class AlignedHostMemory final : public BackendMemory {
public:
  AlignedHostMemory(uint8_t *data, uint64_t bytes)
      : address(data), size(bytes) {}
  ~AlignedHostMemory() override { std::free(address); }
  uint8_t *data() const override { return address; }
  uint64_t bytes() const override { return size; }

private:
  uint8_t *address;
  uint64_t size;
};

inline Status
Backend::allocateAlignedHost(uint64_t bytes, std::string_view what,
                             std::unique_ptr<BackendMemory> &out) {
  constexpr uint64_t kPage = 4096;
  uint64_t rounded = (std::max<uint64_t>(bytes, 1) + kPage - 1) / kPage * kPage;
  auto *data = static_cast<uint8_t *>(std::aligned_alloc(kPage, rounded));
  if (!data)
    return failure("cannot allocate ", bytes, " bytes of host memory for ",
                   what);
  out = std::make_unique<AlignedHostMemory>(data, bytes);
  return Status::success();
}

} // namespace zplan

#endif // ZPLAN_RUNTIME_BACKEND_H
