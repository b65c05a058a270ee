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
#include "runtime/cpu/Parallel.h"
#include "runtime/ops/Attributes.h"
#include "runtime/ops/Checks.h"
#include "runtime/ops/KernelCall.h"
#include "runtime/ops/Shapes.h"
#include "runtime/ops/StridedWalk.h"
#include "runtime/ops/TypeDispatch.h"
#include "runtime/support/Bfloat16.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
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

/// Decides the BLAS thread count unless setKernelThreads() already did: one
/// thread (ranks share cores), unless the environment names a count.
void chooseDefaultBlasThreads();

//===----------------------------------------------------------------------===//
// Strided walks on the kernel threads (ops::StridedWalk, Parallel.h)
//===----------------------------------------------------------------------===//

/// ops::forEachRun with the walk split across the kernel threads: by its
/// outermost merged dimension, or, when the walk is one run, into pieces
/// of that run. `fn` sees the same elements at the same offsets as
/// forEachRun's, in runs that may be cut shorter: it must treat each
/// element on its own (elementwise ops, copies), as they all do.
template <size_t N, typename Fn>
void parallelForEachRun(const std::vector<int64_t> &shape,
                        const std::array<std::vector<int64_t>, N> &strides,
                        const std::array<int64_t, N> &bases, Fn &&fn) {
  StridedWalk<N> walk(shape, strides);
  if (walk.isEmpty())
    return;
  const std::vector<int64_t> &extents = walk.mergedExtents();
  if (extents.size() <= 1) {
    int64_t count = extents.empty() ? 1 : extents[0];
    std::array<int64_t, N> step{};
    for (size_t i = 0; i < N && !extents.empty(); ++i)
      step[i] = walk.mergedSteps(i)[0];
    parallelFor(count, grainFor(1), [&](int64_t begin, int64_t end) {
      std::array<int64_t, N> at;
      for (size_t i = 0; i < N; ++i)
        at[i] = bases[i] + begin * step[i];
      fn(begin, at, step, end - begin);
    });
    return;
  }
  std::vector<int64_t> innerShape(extents.begin() + 1, extents.end());
  std::array<std::vector<int64_t>, N> innerStrides;
  for (size_t i = 0; i < N; ++i)
    innerStrides[i].assign(walk.mergedSteps(i).begin() + 1,
                           walk.mergedSteps(i).end());
  StridedWalk<N> inner(innerShape, innerStrides);
  int64_t perOuter = product(innerShape);
  parallelFor(extents[0], grainFor(perOuter), [&](int64_t begin, int64_t end) {
    for (int64_t outer = begin; outer < end; ++outer) {
      std::array<int64_t, N> at;
      for (size_t i = 0; i < N; ++i)
        at[i] = bases[i] + outer * walk.mergedSteps(i)[0];
      inner.run(at, [&](int64_t out, const std::array<int64_t, N> &in,
                        const std::array<int64_t, N> &step, int64_t count) {
        fn(outer * perOuter + out, in, step, count);
      });
    }
  });
}

//===----------------------------------------------------------------------===//
// Strided copies
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
  int64_t matrices = 1;
  for (size_t d = 0; d + 2 < rank; ++d)
    matrices *= shape[d];
  // One item per band of kTile result rows of one matrix, on the kernel
  // threads; each band is written by one thread.
  int64_t bands = (rows + kTile - 1) / kTile;
  parallelFor(matrices * bands, grainFor(kTile * columns),
              [&](int64_t begin, int64_t end) {
                for (int64_t item = begin; item < end; ++item) {
                  int64_t m = item / bands, i0 = item % bands * kTile;
                  int64_t i1 = std::min(i0 + kTile, rows);
                  // Matrix m's first element: its outer indices, last fastest.
                  int64_t offset = base;
                  for (int64_t d = static_cast<int64_t>(rank) - 3, rest = m;
                       d >= 0; --d) {
                    offset += rest % shape[d] * strides[d];
                    rest /= shape[d];
                  }
                  const T *in = input + offset;
                  T *out = output + m * rows * columns;
                  for (int64_t j0 = 0; j0 < columns; j0 += kTile) {
                    int64_t j1 = std::min(j0 + kTile, columns);
                    for (int64_t i = i0; i < i1; ++i)
                      for (int64_t j = j0; j < j1; ++j)
                        out[i * columns + j] = in[j * stride + i];
                  }
                }
              });
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
  parallelForEachRun<1>(
      shape, {strides}, {base},
      [&](int64_t out, const std::array<int64_t, 1> &in,
          const std::array<int64_t, 1> &step, int64_t count) {
        const T *source = input + in[0];
        T *target = output + out;
        if (step[0] == 1) {
          // libc's copy, wider than the loop's vectors on the baseline
          // target (attention's head swaps move runs of a head's 64
          // floats); memmove, as an elementwise op may run in place.
          std::memmove(target, source, sizeof(T) * static_cast<size_t>(count));
        } else {
          for (int64_t j = 0; j < count; ++j)
            target[j] = source[j * step[0]];
        }
      });
}

/// exp(x) for a softmax's shifted score x = score - max <= 0, in x's type:
/// exactly std::exp(x), but 0 without calling it below the point where exp
/// is 0 anyway (-104 for f32, -746 for double: checked over every f32 from
/// -104 down). A masked score (a float's lowest, as exporters write masks)
/// otherwise takes libm's slow underflow path: it was a third of a
/// forward's attention softmax time. (Contiguous f32 rows take
/// VectorMath.h's expShiftedSum instead: this is for double rows and
/// strided f32 softmax lines.)
template <typename T> T softmaxExp(T x) {
  constexpr T kZeroBelow = std::is_same_v<T, float> ? T(-104) : T(-746);
  return x < kZeroBelow ? T(0) : std::exp(x);
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
