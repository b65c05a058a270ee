//===- MatmulBias.cu - matmul's bias broadcast into its result ------------===//
//
// nn.matmul with a bias writes the bias, broadcast to the result's shape,
// into the result first; the GEMM then accumulates onto it (beta = 1), as
// the CPU kernel does, so a Linear layer is one GEMM pass over its output.
// One thread per result element in a grid-stride loop: the result is
// written coalesced and the bias (usually [N], a few KB) is read through
// the cache.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/MatmulBias.h"

#include "runtime/cuda/DeviceSupport.cuh"
#include "runtime/cuda/StridedIndex.cuh"

namespace zplan::cuda {

namespace {

template <typename T>
__global__ void broadcastBias(const T *__restrict__ bias, StridedIndex index,
                              T *__restrict__ result, int64_t count) {
  ZPLAN_GRID_STRIDE(i, count) { result[i] = bias[index.offset(i)]; }
}

} // namespace

template <typename T>
Status writeMatmulBias(const KernelCall &call,
                       const std::vector<int64_t> &strides) {
  const TensorRef &bias = call.host.operands[2], &result = call.host.results[0];
  int64_t count = result.numElements();
  if (count == 0)
    return Status::success();
  StridedIndex index;
  if (!makeStridedIndex(result.shape, strides, index))
    return call.error("bias of shape " + cpu::detail::formatShape(bias.shape) +
                      " broadcasts over more than " +
                      std::to_string(StridedIndex::kMaxRank) +
                      " dimensions, more than the CUDA kernel supports");
  constexpr unsigned kThreads = 256;
  broadcastBias<T>
      <<<gridFor(count, kThreads, call.device), kThreads, 0,
         call.device.stream>>>(bias.as<T>(), index, result.as<T>(), count);
  return launched(call);
}

template Status writeMatmulBias<float>(const KernelCall &,
                                       const std::vector<int64_t> &);
template Status writeMatmulBias<double>(const KernelCall &,
                                        const std::vector<int64_t> &);

} // namespace zplan::cuda
