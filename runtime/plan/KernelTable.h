//===- KernelTable.h - a backend's kernels, indexed by compute opcode -----===//
//
// Every backend resolves a compute instruction to its kernel by one array
// index. The table is built once from the backend's (opcode, entry point)
// pairs, which it writes out from ComputeKernels.def:
//
//   static const plan::KernelTable<KernelFunction> table({
//   #define ZPLAN_COMPUTE_KERNEL(opcode, function) {plan::opcode, function},
//   #include "runtime/plan/ComputeKernels.def"
//   });
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_KERNELTABLE_H
#define ZPLAN_RUNTIME_PLAN_KERNELTABLE_H

#include "runtime/plan/plan.pb.h"

#include <array>
#include <initializer_list>
#include <utility>

namespace zplan::plan {

/// Compute opcodes are numbered below this in plan.proto (communication
/// and bookkeeping opcodes from 100 on); CpuKernels.EveryNnComputeOpHasAKernel
/// notices a compute opcode that is not.
inline constexpr int kComputeOpcodeLimit = 100;

template <typename Function> class KernelTable {
public:
  KernelTable(std::initializer_list<std::pair<Opcode, Function>> kernels) {
    for (const auto &[opcode, function] : kernels)
      if (opcode >= 0 && opcode < kComputeOpcodeLimit)
        byOpcode[opcode] = function;
  }

  /// The kernel of `opcode`; null when the backend has none.
  Function find(Opcode opcode) const {
    if (opcode < 0 || opcode >= kComputeOpcodeLimit)
      return nullptr;
    return byOpcode[opcode];
  }

private:
  std::array<Function, kComputeOpcodeLimit> byOpcode{};
};

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_KERNELTABLE_H
