//===- CudaBackend.h - the CUDA implementation of the Backend interface ---===//
//
// One GPU per rank: device memory from cudaMalloc (the arena once, at the
// plan's offsets), a compute and a comm stream with one cudaEvent per
// instruction for the plan's cross-queue edges, the kernels of
// CudaKernels.h, and --check's poison and checksums on the device.
//
// How it maps onto the Backend interface: allocate() is cudaMalloc +
// cudaMemset; adopt() copies the host bytes to the device and frees them;
// createQueues() makes one cudaEvent per instruction (a second one when
// --trace times them); recordCompletion(q, i) is cudaEventRecord(event[i],
// stream[q]) and waitFor(q, j) cudaStreamWaitEvent(stream[q], event[j]),
// so the device sees exactly the plan's cross-queue edges and same-queue
// order is the stream's; synchronize() (both streams) ends a run. The NCCL
// communicator issues its collectives on the comm stream. poison() fills on
// the device (QueueKernels.h); checksum() sums a host copy with
// runtime/support/Checksum.h, as the CPU does. CudaBackend.cpp says why
// each choice was made.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_CUDABACKEND_H
#define ZPLAN_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Backend.h"

#include <cuda_runtime.h>

#include <memory>
#include <string>

namespace zplan::cuda {

/// The number of CUDA devices this process sees; 0 when there is no device
/// or no driver (never an error: the caller falls back or explains).
int deviceCount();

/// Why there is no device, for the message of a run that needs one: the
/// CUDA runtime's own words ("no CUDA-capable device is detected").
std::string noDeviceReason();

/// Whether CUDA has a kernel for `opcode` (no device needed): the answer
/// CudaBackend::hasKernel gives.
bool hasCudaKernel(plan::Opcode opcode);

/// The backend's state beyond the Backend interface, for the NCCL
/// communicator that issues its collectives on the comm stream.
class CudaDevice {
public:
  virtual ~CudaDevice() = default;
  /// The device ordinal every thread of the backend uses.
  virtual int device() const = 0;
  /// The stream of `queue`'s work.
  virtual cudaStream_t stream(plan::Queue queue) const = 0;
  /// "cuda device 0 (NVIDIA H200, 139.8 GiB)".
  virtual std::string describe() const = 0;
};

/// Creates the backend on device `device` (made current for the calling
/// thread; the executor binds its comm thread through bindThread()).
/// Fails, naming the device, when it cannot be used.
Status createCudaBackend(int device, std::unique_ptr<Backend> &out);

/// The CudaDevice of a backend createCudaBackend() made; null for another
/// backend.
CudaDevice *asCudaDevice(Backend &backend);

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_CUDABACKEND_H
