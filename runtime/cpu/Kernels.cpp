//===- Kernels.cpp - opcode -> CPU kernel, and the kernel threads ---------===//
//
// The dispatch table from compute opcodes (runtime/plan/Opcodes.h) to the
// kernel families in this directory, and the thread setting (BLAS's, and
// the kernels' own pool, Parallel.h). The
// attribute and shape helpers the kernels share with every backend are the
// ops layer's (runtime/ops).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/Parallel.h"

#include "runtime/plan/KernelTable.h"
#include "runtime/plan/Opcodes.h"

#include <cblas.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <utility>

namespace zplan::cpu {

using namespace detail;

namespace {

/// Set once the thread count is decided: by setKernelThreads(), or by the
/// first kernel call (1 thread, unless the environment names a count).
std::atomic<bool> blasThreadsChosen{false};

} // namespace

void detail::chooseDefaultBlasThreads() {
  if (blasThreadsChosen.exchange(true))
    return;
  // OpenBLAS otherwise starts one thread per core, and ranks share cores.
  if (!std::getenv("OPENBLAS_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS"))
    openblas_set_num_threads(1);
}

KernelFunction detail::findKernel(plan::Opcode opcode) {
  static const plan::KernelTable<KernelFunction> table({
#define ZPLAN_COMPUTE_KERNEL(opcode, function) {plan::opcode, function},
#include "runtime/plan/ComputeKernels.def"
  });
  return table.find(opcode);
}

Status runKernel(const plan::Instruction &instruction,
                 const std::vector<TensorRef> &operands,
                 const std::vector<TensorRef> &results) {
  KernelFunction function = findKernel(instruction.opcode());
  if (!function)
    return Status::error(plan::opcodeName(instruction.opcode()) +
                         ": no CPU kernel for this op");
  chooseDefaultBlasThreads();
  return function(KernelCall{instruction, operands, results});
}

bool hasKernel(plan::Opcode opcode) { return findKernel(opcode) != nullptr; }

void setKernelThreads(int threads) {
  // The GEMMs are split across the pool's threads, each a one-thread BLAS
  // call (Matmul.cpp): OpenBLAS's own pool would only compete for the
  // same cores.
  blasThreadsChosen = true;
  openblas_set_num_threads(1);
  setKernelPoolThreads(threads);
}

} // namespace zplan::cpu
