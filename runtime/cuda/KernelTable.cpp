//===- KernelTable.cpp - compute opcodes to CUDA entry points -------------===//
//
// The CUDA twin of runtime/cpu/Kernels.cpp's table -- both are built from
// runtime/plan/ComputeKernels.def, so CUDA has an entry point for every
// opcode the CPU has (test/gpu/CudaCoverageTest.cpp checks the tables) --
// and the shared host pieces of every entry point (launch and library
// error checks, grid sizes, the texts of device-reported errors).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/CudaKernels.h"

#include "runtime/plan/KernelTable.h"
#include "runtime/plan/Opcodes.h"

#include <algorithm>
#include <array>
#include <utility>

using namespace zplan;
using namespace zplan::cuda;

KernelFunction zplan::cuda::findKernel(plan::Opcode opcode) {
  static const plan::KernelTable<KernelFunction> table({
#define ZPLAN_COMPUTE_KERNEL(opcode, function) {plan::opcode, function},
#include "runtime/plan/ComputeKernels.def"
  });
  return table.find(opcode);
}

const char *zplan::cuda::kernelErrorText(KernelError error) {
  switch (error) {
  case KernelError::None:
    return "no error";
  case KernelError::IndexOutOfRange:
    return "an index is outside the table it selects from";
  case KernelError::LabelOutOfRange:
    return "a label is outside [0, classes) and is not ignore_index";
  case KernelError::PositionOutOfRange:
    return "a cache position is outside [0, max_seq_len)";
  case KernelError::HyperParameterOutOfRange:
    return "hyper bias corrections [6] and [7] must be in (0, 1] "
           "(1 - beta^t, t >= 1)";
  case KernelError::DivisionByZero:
    return "integer division by zero";
  }
  return "an unknown device-side error";
}

Status zplan::cuda::launched(const KernelCall &call) {
  return checkCuda(call, cudaGetLastError(), "kernel launch");
}

Status zplan::cuda::checkCuda(const KernelCall &call, cudaError_t status,
                              const char *what) {
  if (status == cudaSuccess)
    return Status::success();
  return call.error(std::string(what) +
                    " failed: " + cudaGetErrorString(status));
}

Status zplan::cuda::checkCublas(const KernelCall &call, cublasStatus_t status,
                                const char *what) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return Status::success();
  return call.error(std::string(what) +
                    " failed: " + cublasGetStatusString(status));
}

unsigned zplan::cuda::gridFor(int64_t count, unsigned threads,
                              const DeviceContext &device) {
  int64_t needed = (count + threads - 1) / threads;
  // A few waves of full occupancy; a grid-stride loop covers the rest.
  int64_t cap = std::max(1, device.properties.multiProcessorCount) * 32;
  return static_cast<unsigned>(std::clamp<int64_t>(needed, 1, cap));
}
