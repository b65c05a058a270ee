//===- KernelSupport.h - shared pieces of the CPU kernels (private) -------===//
//
// What every CPU kernel family needs and no caller of Kernels.h should see:
// the kernel table, the BLAS thread default, the strided copy transpose,
// slice, expand and the matmul bias share, and the entry points. The call a
// kernel receives, its attribute look-up, operand/shape checks and
// element-type dispatch are the ops layer's (runtime/ops), shared with every
// other backend; this header brings them into cpu::detail, the vocabulary
// the kernels are written in.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_KERNELSUPPORT_H
#define ZPLAN_RUNTIME_CPU_KERNELSUPPORT_H

#include "runtime/cpu/Kernels.h"
#include "runtime/ops/Attributes.h"
#include "runtime/ops/Checks.h"
#include "runtime/ops/KernelCall.h"
#include "runtime/ops/Shapes.h"
#include "runtime/ops/StridedWalk.h"
#include "runtime/ops/TypeDispatch.h"
#include "runtime/support/Bfloat16.h"

#include <array>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace zplan::cpu::detail {

using zplan::Status;
// The CPU kernels are written in the ops layer's terms (KernelCall,
// expectShape, dispatchType, ...), as every backend's are.
using namespace zplan::ops;

/// A kernel: reads call.operands, writes call.results.
using KernelFunction = Status (*)(const KernelCall &call);

/// The kernel of compute opcode `opcode`; null when the CPU has none. One
/// array index: the table is built once, keyed by opcode.
KernelFunction findKernel(plan::Opcode opcode);

/// Decides the BLAS thread count unless setBlasThreads() already did: one
/// thread (ranks share cores), unless the environment names a count.
void chooseDefaultBlasThreads();

//===----------------------------------------------------------------------===//
// Strided copies (ops::StridedWalk)
//===----------------------------------------------------------------------===//

/// Copies elements of type T into contiguous `output` of `shape`, reading
/// `input` at element offset `base` with element `strides` (transpose,
/// slice, expand).
template <typename T>
void stridedCopy(const T *input, int64_t base,
                 const std::vector<int64_t> &strides,
                 const std::vector<int64_t> &shape, T *output) {
  forEachRun<1>(shape, {strides}, {base},
                [&](int64_t out, const std::array<int64_t, 1> &in,
                    const std::array<int64_t, 1> &step, int64_t count) {
                  const T *source = input + in[0];
                  T *target = output + out;
                  if (step[0] == 1) {
                    for (int64_t j = 0; j < count; ++j)
                      target[j] = source[j];
                  } else {
                    for (int64_t j = 0; j < count; ++j)
                      target[j] = source[j * step[0]];
                  }
                });
}

/// Slab `index` (`elements` consecutive elements) of `input` as T, the type
/// a kernel computes in: in place, or, for a bf16 input read by an f32
/// kernel (mixed precision: the loss ops' logits a row at a time,
/// attention's q, k and v a (batch, head) entry at a time), widened into
/// scratch -- exactly what an f32 cast of the whole tensor would hold
/// there, without that copy.
template <typename T> class WidenedSlabs {
public:
  WidenedSlabs(const TensorRef &input, int64_t elements)
      : input(input), elements(elements) {}

  const T *operator()(int64_t index) {
    if constexpr (std::is_same_v<T, float>) {
      if (input.dtype == ElementType::BF16) {
        scratch.resize(static_cast<size_t>(elements));
        widenBf16(input.as<uint16_t>() + index * elements, elements,
                  scratch.data());
        return scratch.data();
      }
    }
    return input.as<T>() + index * elements;
  }

private:
  const TensorRef &input;
  int64_t elements;
  std::vector<T> scratch;
};

//===----------------------------------------------------------------------===//
// Kernel entry points, one family per file
//===----------------------------------------------------------------------===//

// One per compute opcode, in the file of its family (ComputeKernels.def).
// The training ops' kernels update operands in place where the op says so:
// the optimizers have no results and update their operands; cache_append
// writes its cache operand (its result is that same storage).
#define ZPLAN_COMPUTE_KERNEL(opcode, function)                                 \
  Status function(const KernelCall &call);
#include "runtime/plan/ComputeKernels.def"

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_KERNELSUPPORT_H
