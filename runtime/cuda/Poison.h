//===- Poison.h - CUDA kernels for zrun --check ---------------------------===//
//
// `zrun --check` fills every released buffer with NaN so that a schedule bug
// (a read after release) turns into NaN in the output instead of a silently
// stale value, and compares shard checksums. These are the device halves.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_POISON_H
#define ZPLAN_RUNTIME_CUDA_POISON_H

#include <cstddef>
#include <cuda_runtime.h>

namespace zplan::cuda {

/// Fills `count` floats at `data` (device memory) with a quiet NaN.
cudaError_t poisonWithNaN(float *data, size_t count, cudaStream_t stream);

/// Writes to `*result` (device memory, one double) the sum of `count` floats
/// at `data`: a checksum to compare against the host's.
cudaError_t checksum(const float *data, size_t count, double *result,
                     cudaStream_t stream);

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_POISON_H
