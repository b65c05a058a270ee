//===- DeviceSupport.cuh - device-side helpers the CUDA kernels share
//------===//
//
// Included by .cu files only: grid-stride loops, warp and block reductions
// (sums in float or double, maxima), and reportKernelError(), the device
// half of CudaKernels.h's error word. Block reductions assume blockDim.x is
// a multiple of 32 and at most 1024, and that every thread of the block
// calls them.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_DEVICESUPPORT_CUH
#define ZPLAN_RUNTIME_CUDA_DEVICESUPPORT_CUH

#include "runtime/cuda/CudaKernels.h"

#include <cstdint>

namespace zplan::cuda {

/// The first thread to report wins: later reports keep the first one, so the
/// message names the op that failed first.
__device__ inline void reportKernelError(uint32_t *errorWord, uint32_t tag,
                                         KernelError error) {
  atomicCAS(errorWord, 0u, tag | static_cast<uint32_t>(error));
}

/// for (int64_t i : gridStride(count)): this thread's elements of a grid
/// stride loop over [0, count).
#define ZPLAN_GRID_STRIDE(i, count)                                            \
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;             \
       i < (count); i += int64_t(gridDim.x) * blockDim.x)

template <typename T> __device__ inline T warpSum(T value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

template <typename T> __device__ inline T warpMax(T value) {
  for (int offset = 16; offset > 0; offset /= 2) {
    T other = __shfl_xor_sync(0xffffffffu, value, offset);
    value = other > value ? other : value;
  }
  return value;
}

/// The sum of `value` over the block, returned to every thread. `scratch`
/// is 32 elements of shared memory, free again when this returns.
template <typename T> __device__ inline T blockSum(T value, T *scratch) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int warps = (blockDim.x + 31) / 32;
  value = warpSum(value);
  __syncthreads(); // scratch may still be read by a previous reduction
  if (lane == 0)
    scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : T(0);
  return warpSum(value);
}

/// The maximum of `value` over the block (NaN-unaware: -inf is the
/// identity), returned to every thread; `scratch` as blockSum's.
template <typename T> __device__ inline T blockMax(T value, T *scratch) {
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int warps = (blockDim.x + 31) / 32;
  value = warpMax(value);
  __syncthreads();
  if (lane == 0)
    scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : T(-INFINITY);
  return warpMax(value);
}

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_DEVICESUPPORT_CUH
