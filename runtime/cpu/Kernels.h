//===- Kernels.h - CPU reference kernels for plan instructions ------------===//
//
// One entry point runs any compute instruction of a plan on the CPU. This
// backend is the reference every other backend is checked against: fp32
// (and the integer/bool types the nn ops take), row-major, results written
// into caller-provided memory (the arena) -- kernels never allocate per
// call beyond small fixed scratch. GEMMs go through BLAS (OpenBLAS, one
// thread per rank by default).
//
// The op names and attributes are the nn dialect's (dialects/nn/NNOps.td),
// as the plan emitter writes them: the op name without "nn.", attributes by
// name (ints for integers, bools and i64 arrays; floats; text for strings).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_KERNELS_H
#define ZPLAN_RUNTIME_CPU_KERNELS_H

#include "runtime/plan/PlanLoader.h"
#include "runtime/support/ElementType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zplan::cpu {

/// A tensor in memory: where, what shape, which element type.
struct TensorRef {
  void *data = nullptr;
  std::vector<int64_t> shape;
  ElementType dtype = ElementType::F32;

  int64_t numElements() const;
  template <typename T> T *as() const { return static_cast<T *>(data); }
};

/// Runs compute instruction `instruction` (its op and attributes) reading
/// `operands` and writing `results`. Operands and results may not alias
/// unless the op is elementwise and they have the same shape. Errors (an
/// op this backend lacks, an index out of range in an embedding) come back
/// as a message naming the op.
plan::Status runKernel(const plan::Instruction &instruction,
                       const std::vector<TensorRef> &operands,
                       const std::vector<TensorRef> &results);

/// Whether runKernel has a kernel for `opcode` (for a plan check before any
/// work).
bool hasKernel(plan::Opcode opcode);

/// Sets the BLAS thread count (OpenBLAS); 1 by default for one rank per core.
void setBlasThreads(int threads);

} // namespace zplan::cpu

#endif // ZPLAN_RUNTIME_CPU_KERNELS_H
