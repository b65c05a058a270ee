//===- QueueKernels.cu - the device kernels the backend itself issues -----===//

#include "runtime/cuda/QueueKernels.h"
#include "runtime/support/Bfloat16.h"

#include <algorithm>

namespace {

constexpr unsigned kThreads = 256;

unsigned blocksFor(uint64_t count) {
  // A grid-stride loop: a few thousand blocks cover any buffer.
  return static_cast<unsigned>(
      std::clamp<uint64_t>((count + kThreads - 1) / kThreads, 1, 4096));
}

/// Element i of the pattern's width is the pattern itself; the tail
/// (bytes % width) is 0xA5, byte by byte.
template <typename Word>
__global__ void fillKernel(Word *words, uint64_t count, Word pattern,
                           uint8_t *tail, uint64_t tailBytes) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += uint64_t(gridDim.x) * blockDim.x)
    words[i] = pattern;
  if (blockIdx.x == 0 && threadIdx.x < tailBytes)
    tail[threadIdx.x] = 0xA5;
}

__global__ void accumulateKernel(float *target, const float *source,
                                 uint64_t count) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += uint64_t(gridDim.x) * blockDim.x)
    target[i] += source[i];
}

__global__ void roundToBf16Kernel(uint16_t *target, const float *source,
                                  uint64_t count) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += uint64_t(gridDim.x) * blockDim.x)
    target[i] = zplan::floatToBf16(source[i]);
}

__global__ void accumulateBf16Kernel(float *target, const uint16_t *source,
                                     uint64_t count) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < count;
       i += uint64_t(gridDim.x) * blockDim.x)
    target[i] += zplan::bf16ToFloat(source[i]);
}

template <typename Word>
cudaError_t fill(void *data, uint64_t bytes, uint64_t pattern,
                 cudaStream_t stream) {
  uint64_t count = bytes / sizeof(Word);
  auto *tail = static_cast<uint8_t *>(data) + count * sizeof(Word);
  fillKernel<Word><<<blocksFor(count), kThreads, 0, stream>>>(
      static_cast<Word *>(data), count, static_cast<Word>(pattern), tail,
      bytes % sizeof(Word));
  return cudaGetLastError();
}

} // namespace

cudaError_t zplan::cuda::fillPattern(void *data, uint64_t bytes,
                                     uint64_t pattern, uint32_t width,
                                     cudaStream_t stream) {
  if (bytes == 0)
    return cudaSuccess;
  // Buffers are 64-byte aligned (kMemoryAlignment), so word stores are
  // aligned; a width-1 pattern is a memset.
  switch (width) {
  case 2:
    return fill<uint16_t>(data, bytes, pattern, stream);
  case 4:
    return fill<uint32_t>(data, bytes, pattern, stream);
  case 8:
    return fill<uint64_t>(data, bytes, pattern, stream);
  default:
    return cudaMemsetAsync(data, static_cast<int>(pattern & 0xFF), bytes,
                           stream);
  }
}

cudaError_t zplan::cuda::accumulate(float *target, const float *source,
                                    uint64_t count, cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  accumulateKernel<<<blocksFor(count), kThreads, 0, stream>>>(target, source,
                                                              count);
  return cudaGetLastError();
}

cudaError_t zplan::cuda::roundToBf16(uint16_t *target, const float *source,
                                     uint64_t count, cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  roundToBf16Kernel<<<blocksFor(count), kThreads, 0, stream>>>(target, source,
                                                               count);
  return cudaGetLastError();
}

cudaError_t zplan::cuda::accumulateBf16(float *target, const uint16_t *source,
                                        uint64_t count, cudaStream_t stream) {
  if (count == 0)
    return cudaSuccess;
  accumulateBf16Kernel<<<blocksFor(count), kThreads, 0, stream>>>(
      target, source, count);
  return cudaGetLastError();
}
