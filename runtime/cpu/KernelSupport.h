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

#include <algorithm>
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

/// stridedCopy where the input is contiguous along the result's
/// second-to-last dimension and strided along its last (a transpose of the
/// last two dimensions: a Linear gradient's X^T, attention's head swaps):
/// copied in kTile x kTile tiles, so that a tile's input and output lines
/// stay in cache. Walking the result in order reads one element per input
/// cache line instead (the transposes were 7% of a training step); the
/// tile's size and order are the fastest measured on a 512 x 8192 and a
/// 512 x 256 transpose (16: a power-of-two stride puts a taller tile's
/// input lines in one cache set). The same element lands in the same place
/// either way. False (nothing written) for any other layout or a small one.
template <typename T>
bool tiledTransposeCopy(const T *input, int64_t base,
                        const std::vector<int64_t> &strides,
                        const std::vector<int64_t> &shape, T *output) {
  constexpr int64_t kTile = 16;
  size_t rank = shape.size();
  if (rank < 2 || strides[rank - 2] != 1 || strides[rank - 1] == 1)
    return false;
  int64_t rows = shape[rank - 2], columns = shape[rank - 1];
  int64_t stride = strides[rank - 1];
  if (rows < kTile || columns < kTile)
    return false;
  std::vector<int64_t> index(rank - 2, 0);
  int64_t matrices = 1;
  for (size_t d = 0; d + 2 < rank; ++d)
    matrices *= shape[d];
  int64_t offset = base;
  for (int64_t m = 0; m < matrices; ++m) {
    const T *in = input + offset;
    T *out = output + m * rows * columns;
    for (int64_t i0 = 0; i0 < rows; i0 += kTile) {
      int64_t i1 = std::min(i0 + kTile, rows);
      for (int64_t j0 = 0; j0 < columns; j0 += kTile) {
        int64_t j1 = std::min(j0 + kTile, columns);
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t j = j0; j < j1; ++j)
            out[i * columns + j] = in[j * stride + i];
      }
    }
    // The next matrix: an odometer over the outer dimensions.
    for (size_t d = rank - 2; d-- > 0;) {
      offset += strides[d];
      if (++index[d] < shape[d])
        break;
      offset -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
  return true;
}

/// Copies elements of type T into contiguous `output` of `shape`, reading
/// `input` at element offset `base` with element `strides` (transpose,
/// slice, expand).
template <typename T>
void stridedCopy(const T *input, int64_t base,
                 const std::vector<int64_t> &strides,
                 const std::vector<int64_t> &shape, T *output) {
  if (tiledTransposeCopy(input, base, strides, shape, output))
    return;
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
