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

#include "runtime/cuda/Strided.cuh"

namespace zplan::cuda {

template <typename T>
Status writeMatmulBias(const KernelCall &call,
                       const std::vector<int64_t> &strides) {
  const TensorRef &bias = call.host.operands[2], &result = call.host.results[0];
  // The strided read of the elementwise and movement kernels: result[i] =
  // bias[offset of i], the bias's broadcast dimensions merged away (a [N]
  // bias under [B, S, N] is one modulo per element).
  StridedLayout<1> layout;
  if (Status status =
          makeStridedLayout<1>(call, result.shape, {strides}, {0}, layout);
      !status.ok())
    return status;
  return launchStrided(call, layout,
                       StridedReadBody<T>{bias.as<T>(), result.as<T>()});
}

template Status writeMatmulBias<float>(const KernelCall &,
                                       const std::vector<int64_t> &);
template Status writeMatmulBias<double>(const KernelCall &,
                                        const std::vector<int64_t> &);
// bf16 (its bits): the bias of a matmul with a bf16 result, copied as is.
template Status writeMatmulBias<uint16_t>(const KernelCall &,
                                          const std::vector<int64_t> &);

} // namespace zplan::cuda
