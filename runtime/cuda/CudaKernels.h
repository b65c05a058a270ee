//===- CudaKernels.h - the CUDA kernels behind CudaBackend (private) ------===//
//
// One entry point per compute opcode, the CUDA twin of the CPU reference
// kernels (runtime/cpu/Kernels.h): same operands, attributes, shapes,
// element types and semantics, checked against them by
// test/gpu/KernelDiffTest.cpp on a GPU. An entry point runs on the host: it
// reads the attributes and checks shapes with the ops layer's shared
// validation, the CPU kernels' too (runtime/ops: ops::intAttribute,
// expectShape, checkMatmul, ...: the messages are the same on both
// backends), then *issues* its kernels (or cuBLAS calls) on
// `call.device.stream` and returns without synchronizing. It never
// allocates device memory: scratch comes from shared memory or from the
// backend's fixed workspace.
//
// What the CPU kernels find wrong in the *data* (an embedding index out of
// range, a label outside the vocabulary) a device kernel cannot return: it
// reports it with reportKernelError() into the backend's error word, and
// the backend turns the first report into "<op>: <reason>" when the queues
// synchronize (CudaBackend.cpp), so the run still fails with the op named.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_CUDAKERNELS_H
#define ZPLAN_RUNTIME_CUDA_CUDAKERNELS_H

#include "runtime/ops/Attributes.h"
#include "runtime/ops/Checks.h"
#include "runtime/ops/KernelCall.h"
#include "runtime/ops/Shapes.h"
#include "runtime/ops/TypeDispatch.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace zplan::cuda {

using zplan::Status;

/// Why a device kernel failed, as reported into the error word; the text
/// the backend prints for each is kernelErrorText().
enum class KernelError : uint32_t {
  None = 0,
  /// An index (embedding id, gather index) outside its table.
  IndexOutOfRange = 1,
  /// A cross-entropy label outside [0, classes) that is not ignore_index.
  LabelOutOfRange = 2,
  /// A KV-cache position outside [0, max_seq_len).
  PositionOutOfRange = 3,
  /// adamw's hyper-parameter bias corrections outside (0, 1].
  HyperParameterOutOfRange = 4,
  /// An integer div whose divisor element is 0.
  DivisionByZero = 5,
};

/// "an index is outside its table", ...
const char *kernelErrorText(KernelError error);

/// What every kernel of one rank shares: created once by CudaBackend.
struct DeviceContext {
  /// The compute stream: every kernel is issued on it.
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  /// Device scratch of workspaceBytes for cuBLAS and any kernel that
  /// needs more than shared memory; used by one kernel at a time (they are
  /// all on `stream`).
  void *workspace = nullptr;
  size_t workspaceBytes = 0;
  /// The first error a device kernel reported: (opcode << 8) | KernelError,
  /// 0 for none (device memory, one word).
  uint32_t *errorWord = nullptr;
  /// The device's properties (shared memory per block, SM count).
  cudaDeviceProp properties{};
};

/// One instruction being issued: the call every backend's checks take (op,
/// attributes, tensors with device addresses) and the device it runs on.
struct KernelCall {
  const ops::KernelCall &host;
  DeviceContext &device;

  std::string op() const { return host.op(); }
  /// "<op>: <message>".
  Status error(const std::string &message) const { return host.error(message); }
  /// The word device kernels pass to reportKernelError():
  /// (opcode << 8), to be or'ed with a KernelError.
  uint32_t errorTag() const {
    return static_cast<uint32_t>(host.instruction.opcode()) << 8;
  }
};

/// A kernel entry point.
using KernelFunction = Status (*)(const KernelCall &call);

/// The entry point of compute opcode `opcode`; null when CUDA has none.
KernelFunction findKernel(plan::Opcode opcode);

/// The launch's error (cudaGetLastError) as a Status naming the op, so that
/// an entry point ends with `return launched(call);`.
Status launched(const KernelCall &call);
/// `status` (a CUDA runtime result) as a Status naming the op and `what`.
Status checkCuda(const KernelCall &call, cudaError_t status, const char *what);
/// `status` (a cuBLAS result) as a Status naming the op and `what`.
Status checkCublas(const KernelCall &call, cublasStatus_t status,
                   const char *what);

/// Blocks of `threads` for a grid-stride loop over `count` elements: enough
/// to fill the device, never more than the loop needs (at least 1).
unsigned gridFor(int64_t count, unsigned threads, const DeviceContext &device);

//===----------------------------------------------------------------------===//
// Entry points, one family per file (the CPU's families)
//===----------------------------------------------------------------------===//

// One per compute opcode (ComputeKernels.def), each in the file of its
// family, as on the CPU (Elementwise.cpp there is Elementwise.cu here; the
// reductions have Reductions.cu; GEMMs are cuBLAS calls in Matmul.cpp;
// cached_attention is the fused decode kernel).
#define ZPLAN_COMPUTE_KERNEL(opcode, function)                                 \
  Status function(const KernelCall &call);
#include "runtime/plan/ComputeKernels.def"

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_CUDAKERNELS_H
