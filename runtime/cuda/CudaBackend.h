//===- CudaBackend.h - the CUDA implementation of the Backend interface ---===//
//
// One GPU per rank: device memory from cudaMalloc (the arena once, at the
// plan's offsets), a compute and a comm stream with one cudaEvent per
// instruction for the plan's cross-queue edges, the kernels of
// CudaKernels.h, and --check's poison and checksums on the device. See
// runtime/Backend.h for how the executor drives it and CudaBackend.cpp for
// the choices made.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_CUDABACKEND_H
#define ZPLAN_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/Backend.h"

#include <memory>
#include <string>

namespace zplan::cuda {

/// The number of CUDA devices this process sees; 0 when there is no device
/// or no driver (never an error: the caller falls back or explains).
int deviceCount();

/// Why there is no device, for the message of a run that needs one: the
/// CUDA runtime's own words ("no CUDA-capable device is detected").
std::string noDeviceReason();

/// Creates the backend on device `device` (made current for the calling
/// thread and every thread the backend starts). Fails, naming the device,
/// when it cannot be used.
Status createCudaBackend(int device, std::unique_ptr<Backend> &out);

/// Whether CUDA has a kernel for `opcode` (no device needed): the answer
/// CudaBackend::hasKernel gives.
bool hasCudaKernel(plan::Opcode opcode);

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_CUDABACKEND_H
