//===- Poison.cu - CUDA kernels for zrun --check --------------------------===//

#include "runtime/cuda/Poison.h"

#include <cmath>

namespace {

__global__ void fillNaNKernel(float *data, size_t count) {
  const float nan = __int_as_float(0x7fc00000);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count;
       i += size_t(gridDim.x) * blockDim.x)
    data[i] = nan;
}

/// One block sums in double (order fixed by the block size) so the checksum
/// is reproducible run to run.
__global__ void sumKernel(const float *data, size_t count, double *result) {
  __shared__ double partial[256];
  double sum = 0;
  for (size_t i = threadIdx.x; i < count; i += blockDim.x)
    sum += data[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride)
      partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    *result = partial[0];
}

} // namespace

cudaError_t zplan::cuda::poisonWithNaN(float *data, size_t count,
                                       cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  unsigned blocks =
      static_cast<unsigned>(std::min<size_t>((count + 255) / 256, 4096));
  fillNaNKernel<<<blocks, 256, 0, stream>>>(data, count);
  return cudaGetLastError();
}

cudaError_t zplan::cuda::checksum(const float *data, size_t count,
                                  double *result, cudaStream_t stream) {
  sumKernel<<<1, 256, 0, stream>>>(data, count, result);
  return cudaGetLastError();
}
