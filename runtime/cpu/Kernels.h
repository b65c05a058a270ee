//===- Kernels.h - CPU reference kernels for plan instructions ------------===//
//
// The kernels behind the CPU backend (CpuBackend.h), which resolves each
// compute instruction to one of them once, by opcode; runKernel() resolves
// and runs in one call, for tests and one-off use. The CPU is the reference
// every other backend is checked against: fp32 (and the integer/bool types
// the nn ops take), row-major, results written into caller-provided memory
// (the arena) -- kernels never allocate per call beyond small fixed
// scratch. GEMMs go through BLAS (OpenBLAS); the kernels use one thread per
// rank by default (setKernelThreads).
//
// The opcodes are the nn dialect's ops (runtime/plan/Opcodes.h) and the
// attributes are the ops' (dialects/nn/NNOps.td), as the plan emitter
// writes them: by name (ints for integers, bools and i64 arrays; floats;
// text for strings).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_KERNELS_H
#define ZPLAN_RUNTIME_CPU_KERNELS_H

#include "runtime/Backend.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/support/ElementType.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zplan::cpu {

using zplan::TensorRef;

/// Runs compute instruction `instruction` (its op and attributes) reading
/// `operands` and writing `results`. Operands and results may not alias
/// unless the op is elementwise and they have the same shape. Errors (an
/// op this backend lacks, an index out of range in an embedding) come back
/// as a message naming the op.
Status runKernel(const plan::Instruction &instruction,
                 const std::vector<TensorRef> &operands,
                 const std::vector<TensorRef> &results);

/// Whether runKernel has a kernel for `opcode` (for a plan check before any
/// work).
bool hasKernel(plan::Opcode opcode);

/// Sets the threads each kernel may use (Parallel.h's pool; the GEMMs are
/// split over it too, and OpenBLAS's own threads set to one). 1 by default,
/// for one rank per core.
void setKernelThreads(int threads);

} // namespace zplan::cpu

#endif // ZPLAN_RUNTIME_CPU_KERNELS_H
