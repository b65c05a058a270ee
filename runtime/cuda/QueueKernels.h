//===- QueueKernels.h - the device kernels the backend itself issues ------===//
//
// Not plan kernels: what CudaBackend and its queues issue for the executor
// -- --check's poison (a byte pattern repeated over a released buffer) and
// the accumulation of a reduced gradient into its accumulator, and the
// bf16 conversions of mixed precision around a collective.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_QUEUEKERNELS_H
#define ZPLAN_RUNTIME_CUDA_QUEUEKERNELS_H

#include <cstdint>
#include <cuda_runtime.h>

namespace zplan::cuda {

/// Fills `bytes` bytes at `data` (device memory) with the low `width` bytes
/// of `pattern` (little-endian) repeated, and the last bytes % width bytes
/// with 0xA5: exactly what the CPU backend's poison writes.
cudaError_t fillPattern(void *data, uint64_t bytes, uint64_t pattern,
                        uint32_t width, cudaStream_t stream);

/// target[i] += source[i] for i < count, on `stream`.
cudaError_t accumulate(float *target, const float *source, uint64_t count,
                       cudaStream_t stream);

/// target[i] = source[i] rounded to bf16 (ops/Bfloat16.h), on `stream`.
cudaError_t roundToBf16(uint16_t *target, const float *source, uint64_t count,
                        cudaStream_t stream);

/// target[i] += source[i] (bf16) for i < count, on `stream`.
cudaError_t accumulateBf16(float *target, const uint16_t *source,
                           uint64_t count, cudaStream_t stream);

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_QUEUEKERNELS_H
