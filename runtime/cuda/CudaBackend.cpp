//===- CudaBackend.cpp - the CUDA implementation of the Backend interface -===//
//
// Choices, and why:
//
//  - Memory is cudaMalloc'd once per section (weights, constants, state,
//    arena), zeroed, and freed with the memory. Nothing is allocated while
//    programs run: kernels get scratch from shared memory or from the one
//    workspace allocated here.
//  - Two non-blocking streams: compute (kernels) and comm (NCCL, the
//    gradient packing). One event per instruction (timing disabled unless
//    --trace asks) carries the plan's cross-queue edges: the executor
//    records an instruction's event after issuing it and makes the other
//    stream wait on it (cudaStreamWaitEvent) before issuing a dependant.
//    Same-queue order is the stream's. With --trace, a second event before
//    each instruction gives its device start; times are read after the run.
//  - copyFromHost() and copyToHost() wait for both streams, then make a
//    plain cudaMemcpy: host code touches device memory between runs
//    (weights at load, inputs before a run, outputs after one).
//  - Offload's tier copies are the exception: the host tier and the
//    staging of the nvme tier's copies are pinned (allocateHost,
//    cudaHostAlloc), and copyHost() is a cudaMemcpyAsync on the comm
//    stream, ordered by the plan's events like a collective, so a copy
//    overlaps compute. synchronizeQueue() waits for one stream: before a
//    host kernel (the compute stream, which waited for the copies it
//    reads) and before an nvme staging buffer is reused (the comm stream).
//  - A kernel that finds bad data (an index out of range) cannot return an
//    error: it writes the first one into a device word, which synchronize()
//    reads and clears, so the run still fails with the op named.
//  - --check's poison and checksum synchronize the device first: the
//    release being poisoned was issued after its readers, and the checksum
//    must see every write issued before it. --check is a debugging mode;
//    its cost is the price of exact answers. The checksum copies the bytes
//    to the host and sums them there with the function the CPU backend and
//    the plan writer use, so sums agree across backends by construction.
//    (The synchronization cannot deadlock across ranks: every collective it
//    waits for was issued on this rank, in the plan's order, so the peers
//    issue the same collective without waiting for anything this rank has
//    not issued.)
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaBackend.h"

#include "runtime/cuda/CudaKernels.h"
#include "runtime/cuda/QueueKernels.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/support/Checksum.h"

#include <algorithm>
#include <cstdio>
#include <vector>

using namespace zplan;
using namespace zplan::cuda;

namespace {

/// cuBLAS and kernels that need more than shared memory share this;
/// every kernel runs on the compute stream, so one at a time.
constexpr size_t kWorkspaceBytes = size_t(64) << 20;

Status cudaFailure(std::string_view what, cudaError_t error) {
  return failure("cuda: ", what, ": ", cudaGetErrorString(error));
}

#define ZR_CUDA(expression, what)                                              \
  do {                                                                         \
    if (cudaError_t error_ = (expression); error_ != cudaSuccess)              \
      return cudaFailure(what, error_);                                        \
  } while (false)

uint64_t roundUp(uint64_t bytes) {
  return (bytes + kMemoryAlignment - 1) / kMemoryAlignment * kMemoryAlignment;
}

/// Memory the CUDA runtime allocated, given back with `release`: device
/// memory (cudaMalloc, cudaFree) or page-locked host memory
/// (Backend::allocateHost: cudaHostAlloc, cudaFreeHost), the tier store's
/// host pool, which the copy queue reads and writes asynchronously.
class CudaMemory final : public BackendMemory {
public:
  using Release = cudaError_t (*)(void *);
  CudaMemory(uint8_t *data, uint64_t bytes, Release release)
      : address(data), size(bytes), release(release) {}
  ~CudaMemory() override { release(address); }
  // Never null, as the CPU's: an empty arena still has an address.
  uint8_t *data() const override { return address; }
  uint64_t bytes() const override { return size; }

private:
  uint8_t *address;
  uint64_t size;
  Release release;
};

class CudaBackend;

class CudaKernel final : public PreparedKernel {
public:
  CudaKernel(const plan::Instruction &instruction,
             std::vector<TensorRef> operands, std::vector<TensorRef> results,
             KernelFunction function, DeviceContext &device)
      : instruction(instruction), operands(std::move(operands)),
        results(std::move(results)), function(function), device(device) {}

  Status run() override {
    ops::KernelCall host{instruction, operands, results};
    return function(KernelCall{host, device});
  }

private:
  const plan::Instruction &instruction;
  std::vector<TensorRef> operands;
  std::vector<TensorRef> results;
  KernelFunction function;
  DeviceContext &device;
};

class CudaBackend final : public Backend, public CudaDevice {
public:
  ~CudaBackend() override;
  Status initialize(int ordinal);

  std::string_view name() const override { return "cuda"; }
  std::string description() const override { return describe(); }

  Status allocate(uint64_t bytes, std::string_view what,
                  std::unique_ptr<BackendMemory> &out) override;
  Status allocateHost(uint64_t bytes, std::string_view what,
                      std::unique_ptr<BackendMemory> &out) override {
    void *data = nullptr;
    if (cudaError_t error = cudaHostAlloc(&data, std::max<uint64_t>(bytes, 1),
                                          cudaHostAllocDefault);
        error != cudaSuccess)
      return failure("cannot allocate ", bytes, " bytes of pinned host memory",
                     " for ", what, ": ", cudaGetErrorString(error));
    out = std::make_unique<CudaMemory>(static_cast<uint8_t *>(data), bytes,
                                       cudaFreeHost);
    return Status::success();
  }
  Status adopt(std::vector<uint8_t> &&host,
               std::unique_ptr<BackendMemory> &out) override;
  Status copyFromHost(void *target, const void *source,
                      uint64_t bytes) override;
  Status copyToHost(void *target, const void *source, uint64_t bytes) override;

  bool hasKernel(plan::Opcode opcode) const override {
    return findKernel(opcode) != nullptr;
  }
  Status prepareKernel(const plan::Instruction &instruction,
                       std::vector<TensorRef> operands,
                       std::vector<TensorRef> results,
                       std::unique_ptr<PreparedKernel> &out) override;
  Status createQueues(uint32_t instructionCount, bool timing,
                      std::unique_ptr<Queues> &out) override;
  Status bindThread() override {
    ZR_CUDA(cudaSetDevice(ordinal), "cudaSetDevice");
    return Status::success();
  }

  Status poison(void *data, uint64_t bytes, ElementType type) override;
  Status checksum(const void *data, uint64_t bytes, uint64_t &out) override;

  int device() const override { return ordinal; }
  cudaStream_t stream(plan::Queue queue) const override {
    return queue == plan::COMM ? commStream : context.stream;
  }
  std::string describe() const override;

  /// Waits for both streams.
  Status drain();
  /// Fails with the first error a kernel reported since the last call, and
  /// clears it.
  Status takeKernelError();

private:
  int ordinal = -1;
  cudaStream_t commStream = nullptr;
  DeviceContext context;
};

/// The queues of one executor: the backend's two streams, and events.
class CudaQueues final : public Queues {
public:
  CudaQueues(CudaBackend &backend, bool timing)
      : backend(backend), timing(timing) {}
  ~CudaQueues() override {
    for (cudaEvent_t event : done)
      cudaEventDestroy(event);
    for (cudaEvent_t event : started)
      cudaEventDestroy(event);
    if (origin)
      cudaEventDestroy(origin);
  }

  Status initialize(uint32_t count) {
    unsigned flags = timing ? cudaEventDefault : cudaEventDisableTiming;
    done.assign(count, nullptr);
    for (cudaEvent_t &event : done)
      ZR_CUDA(cudaEventCreateWithFlags(&event, flags), "cudaEventCreate");
    if (timing) {
      started.assign(count, nullptr);
      for (cudaEvent_t &event : started)
        ZR_CUDA(cudaEventCreate(&event), "cudaEventCreate");
      ZR_CUDA(cudaEventCreate(&origin), "cudaEventCreate");
    }
    return Status::success();
  }

  Status recordCompletion(plan::Queue queue, uint32_t index) override {
    ZR_CUDA(cudaEventRecord(done[index], backend.stream(queue)),
            "cudaEventRecord");
    return Status::success();
  }
  Status waitFor(plan::Queue queue, uint32_t index) override {
    ZR_CUDA(cudaStreamWaitEvent(backend.stream(queue), done[index], 0),
            "cudaStreamWaitEvent");
    return Status::success();
  }
  Status synchronize() override {
    ZR_RETURN_IF_ERROR(backend.drain());
    return backend.takeKernelError();
  }

  Status copy(plan::Queue queue, void *target, const void *source,
              uint64_t bytes) override {
    if (bytes != 0)
      ZR_CUDA(cudaMemcpyAsync(target, source, bytes, cudaMemcpyDeviceToDevice,
                              backend.stream(queue)),
              "cudaMemcpyAsync");
    return Status::success();
  }
  Status zero(plan::Queue queue, void *target, uint64_t bytes) override {
    if (bytes != 0)
      ZR_CUDA(cudaMemsetAsync(target, 0, bytes, backend.stream(queue)),
              "cudaMemsetAsync");
    return Status::success();
  }
  // Offload's tier copies: pinned host memory, so the copy runs on the
  // queue's stream while the other computes.
  Status copyHost(plan::Queue queue, void *target, const void *source,
                  uint64_t bytes, bool toDevice) override {
    if (bytes != 0)
      ZR_CUDA(cudaMemcpyAsync(target, source, bytes,
                              toDevice ? cudaMemcpyHostToDevice
                                       : cudaMemcpyDeviceToHost,
                              backend.stream(queue)),
              "cudaMemcpyAsync (tier copy)");
    return Status::success();
  }
  Status synchronizeQueue(plan::Queue queue) override {
    ZR_CUDA(cudaStreamSynchronize(backend.stream(queue)),
            "cudaStreamSynchronize");
    return Status::success();
  }
  Status accumulate(plan::Queue queue, float *target, const float *source,
                    uint64_t count) override {
    ZR_CUDA(cuda::accumulate(target, source, count, backend.stream(queue)),
            "gradient accumulation");
    return Status::success();
  }
  Status roundToBf16(plan::Queue queue, uint16_t *target, const float *source,
                     uint64_t count) override {
    ZR_CUDA(cuda::roundToBf16(target, source, count, backend.stream(queue)),
            "rounding to bf16");
    return Status::success();
  }
  Status accumulateBf16(plan::Queue queue, float *target,
                        const uint16_t *source, uint64_t count) override {
    ZR_CUDA(cuda::accumulateBf16(target, source, count, backend.stream(queue)),
            "bf16 gradient accumulation");
    return Status::success();
  }

  bool timesOnDevice() const override { return timing; }
  Status beginRun() override {
    // The previous run ended with synchronize(): the origin completes at
    // once, and the caller reads the host clock right after, so device
    // time zero and that host time coincide to within the call.
    ZR_CUDA(cudaEventRecord(origin, backend.stream(plan::COMPUTE)),
            "cudaEventRecord");
    ZR_CUDA(cudaEventSynchronize(origin), "cudaEventSynchronize");
    return Status::success();
  }
  Status recordStart(plan::Queue queue, uint32_t index) override {
    ZR_CUDA(cudaEventRecord(started[index], backend.stream(queue)),
            "cudaEventRecord");
    return Status::success();
  }
  Status timesOf(uint32_t index, uint64_t &startNs, uint64_t &endNs) override {
    float startMs = 0, endMs = 0;
    ZR_CUDA(cudaEventElapsedTime(&startMs, origin, started[index]),
            "cudaEventElapsedTime");
    ZR_CUDA(cudaEventElapsedTime(&endMs, origin, done[index]),
            "cudaEventElapsedTime");
    startNs = static_cast<uint64_t>(std::max(0.0f, startMs) * 1e6);
    endNs = std::max(startNs, static_cast<uint64_t>(endMs * 1e6));
    return Status::success();
  }

private:
  CudaBackend &backend;
  bool timing;
  std::vector<cudaEvent_t> done;
  std::vector<cudaEvent_t> started;
  cudaEvent_t origin = nullptr;
};

CudaBackend::~CudaBackend() {
  if (ordinal < 0)
    return;
  cudaSetDevice(ordinal);
  cudaDeviceSynchronize();
  if (context.cublas)
    cublasDestroy(context.cublas);
  cudaFree(context.workspace);
  cudaFree(context.errorWord);
  if (context.stream)
    cudaStreamDestroy(context.stream);
  if (commStream)
    cudaStreamDestroy(commStream);
}

Status CudaBackend::initialize(int device) {
  ZR_CUDA(cudaSetDevice(device),
          "cudaSetDevice(" + std::to_string(device) + ")");
  ordinal = device;
  ZR_CUDA(cudaGetDeviceProperties(&context.properties, device),
          "cudaGetDeviceProperties");
  ZR_CUDA(cudaStreamCreateWithFlags(&context.stream, cudaStreamNonBlocking),
          "cudaStreamCreate");
  ZR_CUDA(cudaStreamCreateWithFlags(&commStream, cudaStreamNonBlocking),
          "cudaStreamCreate");
  ZR_CUDA(cudaMalloc(&context.workspace, kWorkspaceBytes),
          "cudaMalloc (the kernel workspace)");
  context.workspaceBytes = kWorkspaceBytes;
  ZR_CUDA(cudaMalloc(&context.errorWord, sizeof(uint32_t)),
          "cudaMalloc (the error word)");
  ZR_CUDA(cudaMemset(context.errorWord, 0, sizeof(uint32_t)), "cudaMemset");
  if (cublasCreate(&context.cublas) != CUBLAS_STATUS_SUCCESS)
    return failure("cuda: cublasCreate failed on device ", device);
  // cuBLAS issues on the compute stream with the shared workspace (so it
  // never allocates), in fp32 arithmetic: the CPU reference is fp32, and
  // TF32 would differ from it by ~1e-3.
  if (cublasSetStream(context.cublas, context.stream) !=
          CUBLAS_STATUS_SUCCESS ||
      cublasSetWorkspace(context.cublas, context.workspace,
                         context.workspaceBytes) != CUBLAS_STATUS_SUCCESS ||
      cublasSetMathMode(context.cublas, CUBLAS_DEFAULT_MATH) !=
          CUBLAS_STATUS_SUCCESS)
    return failure("cuda: configuring cuBLAS failed on device ", device);
  return Status::success();
}

std::string CudaBackend::describe() const {
  char size[32];
  std::snprintf(size, sizeof(size), "%.1f GiB",
                static_cast<double>(context.properties.totalGlobalMem) /
                    double(uint64_t(1) << 30));
  return "cuda device " + std::to_string(ordinal) + " (" +
         context.properties.name + ", " + size + ")";
}

Status CudaBackend::allocate(uint64_t bytes, std::string_view what,
                             std::unique_ptr<BackendMemory> &out) {
  uint64_t size = std::max<uint64_t>(roundUp(bytes), kMemoryAlignment);
  void *memory = nullptr;
  if (cudaError_t error = cudaMalloc(&memory, size); error != cudaSuccess) {
    cudaGetLastError(); // an out-of-memory is not sticky: clear it
    return failure("cannot allocate ", bytes, " bytes for ", what,
                   " on cuda device ", ordinal, ": ",
                   cudaGetErrorString(error));
  }
  out = std::make_unique<CudaMemory>(static_cast<uint8_t *>(memory), bytes,
                                     cudaFree);
  ZR_CUDA(cudaMemset(memory, 0, size), "cudaMemset");
  return Status::success();
}

Status CudaBackend::adopt(std::vector<uint8_t> &&host,
                          std::unique_ptr<BackendMemory> &out) {
  std::vector<uint8_t> bytes = std::move(host);
  ZR_RETURN_IF_ERROR(allocate(bytes.size(), "weights", out));
  return copyFromHost(out->data(), bytes.data(), bytes.size());
}

Status CudaBackend::copyFromHost(void *target, const void *source,
                                 uint64_t bytes) {
  // Callers write between runs, when the streams are idle; waiting for
  // them anyway costs nothing then, and keeps a write from racing a kernel
  // still reading the old bytes if one ever is not.
  ZR_RETURN_IF_ERROR(drain());
  if (bytes != 0)
    ZR_CUDA(cudaMemcpy(target, source, bytes, cudaMemcpyHostToDevice),
            "cudaMemcpy to the device");
  return Status::success();
}

Status CudaBackend::copyToHost(void *target, const void *source,
                               uint64_t bytes) {
  ZR_RETURN_IF_ERROR(drain());
  if (bytes != 0)
    ZR_CUDA(cudaMemcpy(target, source, bytes, cudaMemcpyDeviceToHost),
            "cudaMemcpy from the device");
  return Status::success();
}

Status CudaBackend::prepareKernel(const plan::Instruction &instruction,
                                  std::vector<TensorRef> operands,
                                  std::vector<TensorRef> results,
                                  std::unique_ptr<PreparedKernel> &out) {
  KernelFunction function = findKernel(instruction.opcode());
  if (!function)
    return Status::error(plan::opcodeName(instruction.opcode()) +
                         ": the cuda backend has no kernel for this op");
  out = std::make_unique<CudaKernel>(instruction, std::move(operands),
                                     std::move(results), function, context);
  return Status::success();
}

Status CudaBackend::createQueues(uint32_t instructionCount, bool timing,
                                 std::unique_ptr<Queues> &out) {
  auto queues = std::make_unique<CudaQueues>(*this, timing);
  ZR_RETURN_IF_ERROR(queues->initialize(instructionCount));
  out = std::move(queues);
  return Status::success();
}

Status CudaBackend::drain() {
  ZR_CUDA(cudaStreamSynchronize(context.stream),
          "the compute stream (an earlier kernel failed)");
  ZR_CUDA(cudaStreamSynchronize(commStream),
          "the comm stream (an earlier collective failed)");
  return Status::success();
}

Status CudaBackend::takeKernelError() {
  uint32_t word = 0;
  ZR_CUDA(cudaMemcpy(&word, context.errorWord, sizeof(word),
                     cudaMemcpyDeviceToHost),
          "reading the kernels' error word");
  if (word == 0)
    return Status::success();
  ZR_CUDA(cudaMemset(context.errorWord, 0, sizeof(word)), "cudaMemset");
  auto opcode = static_cast<plan::Opcode>(word >> 8);
  return failure(plan::opcodeName(opcode), ": ",
                 kernelErrorText(static_cast<KernelError>(word & 0xFF)),
                 " (found on the device)");
}

Status CudaBackend::poison(void *data, uint64_t bytes, ElementType type) {
  ZR_RETURN_IF_ERROR(drain());
  const ElementTypeInfo &info = elementTypeInfo(type);
  // Integer types have no NaN: a recognisable byte pattern, as on the CPU.
  uint64_t pattern = info.quietNaN != 0 ? info.quietNaN : 0xA5;
  uint32_t width = info.quietNaN != 0 ? info.bytes : 1;
  ZR_CUDA(fillPattern(data, bytes, pattern, width, context.stream),
          "poisoning a released buffer");
  ZR_CUDA(cudaStreamSynchronize(context.stream), "cudaStreamSynchronize");
  return Status::success();
}

Status CudaBackend::checksum(const void *data, uint64_t bytes, uint64_t &out) {
  std::vector<uint8_t> host(bytes);
  ZR_RETURN_IF_ERROR(copyToHost(host.data(), data, bytes));
  out = zplan::checksum(host.data(), bytes);
  return Status::success();
}

} // namespace

int zplan::cuda::deviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

std::string zplan::cuda::noDeviceReason() {
  int count = 0;
  cudaError_t error = cudaGetDeviceCount(&count);
  cudaGetLastError();
  if (error != cudaSuccess)
    return cudaGetErrorString(error);
  if (count == 0)
    return "the CUDA runtime sees no device";
  return "a device is present";
}

bool zplan::cuda::hasCudaKernel(plan::Opcode opcode) {
  return findKernel(opcode) != nullptr;
}

Status zplan::cuda::createCudaBackend(int device,
                                      std::unique_ptr<Backend> &out) {
  auto backend = std::make_unique<CudaBackend>();
  if (Status status = backend->initialize(device); !status.ok())
    return failure("cuda device ", device, ": ", status.message());
  out = std::move(backend);
  return Status::success();
}

CudaDevice *zplan::cuda::asCudaDevice(Backend &backend) {
  return dynamic_cast<CudaDevice *>(&backend);
}
