//===- KernelSupport.h - shared pieces of the CPU kernels (private) -------===//
//
// What every kernel family needs and no caller of Kernels.h should see: the
// call a kernel receives, attribute look-up by name with the defaults the nn
// dialect declares, operand/shape checks that phrase their errors alike
// ("<op>: <what was wrong>"), element-type dispatch, and one strided walker
// that elementwise broadcasting, transpose, slice and expand all share.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_KERNELSUPPORT_H
#define ZPLAN_RUNTIME_CPU_KERNELSUPPORT_H

#include "runtime/cpu/Kernels.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zplan::cpu::detail {

using zplan::Status;

/// One instruction being run: its op and attributes, and its tensors.
struct KernelCall {
  const plan::Instruction &instruction;
  const std::vector<TensorRef> &operands;
  const std::vector<TensorRef> &results;

  /// The op's name, for messages.
  std::string op() const;
  /// "<op>: <message>".
  Status error(const std::string &message) const;
};

/// A kernel: reads call.operands, writes call.results.
using KernelFunction = Status (*)(const KernelCall &call);

/// The kernel of compute opcode `opcode`; null when the CPU has none. One
/// array index: the table is built once, keyed by opcode.
KernelFunction findKernel(plan::Opcode opcode);

/// Decides the BLAS thread count unless setBlasThreads() already did: one
/// thread (ranks share cores), unless the environment names a count.
void chooseDefaultBlasThreads();

//===----------------------------------------------------------------------===//
// Attributes (plan::Attribute: ints for integers, bools and i64 arrays;
// floats; text for strings)
//===----------------------------------------------------------------------===//

/// The attribute called `name`, or nullptr.
const plan::Attribute *findAttribute(const KernelCall &call,
                                     std::string_view name);
/// A required scalar integer (or bool) attribute.
Status intAttribute(const KernelCall &call, std::string_view name,
                    int64_t &value);
/// A scalar integer (or bool) attribute, `fallback` when absent.
int64_t intAttributeOr(const KernelCall &call, std::string_view name,
                       int64_t fallback);
/// A required integer-array attribute (may hold no entries).
Status intsAttribute(const KernelCall &call, std::string_view name,
                     std::vector<int64_t> &values);
/// A required scalar float attribute.
Status floatAttribute(const KernelCall &call, std::string_view name,
                      double &value);
/// A string attribute, `fallback` when absent.
std::string textAttributeOr(const KernelCall &call, std::string_view name,
                            const std::string &fallback);

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

/// "[2, 16, 64]".
std::string formatShape(const std::vector<int64_t> &shape);
/// "f32", "i64", "i1", ...: the element-type table's (MLIR) names.
const char *dataTypeName(ElementType type);
/// Bytes per element, from the element-type table.
int64_t elementBytes(ElementType type);

/// Operand count in [minimum, maximum] and exactly `results` results.
Status expectArity(const KernelCall &call, size_t minimum, size_t maximum,
                   size_t results = 1);
/// `tensor` (called `what` in the message) has element type `type`.
Status expectType(const KernelCall &call, const char *what,
                  const TensorRef &tensor, ElementType type);
/// `tensor` (called `what`) has shape `shape`.
Status expectShape(const KernelCall &call, const char *what,
                   const TensorRef &tensor, const std::vector<int64_t> &shape);
/// `tensor` (called `what`) has the element type and shape of `like`.
Status expectLike(const KernelCall &call, const char *what,
                  const TensorRef &tensor, const TensorRef &like);
/// `tensor` (called `what`) is f32 or f64: the training kernels' gradients
/// and logits, checked before anything else about them.
Status expectFloatType(const KernelCall &call, const char *what,
                       const TensorRef &tensor);

/// The bytes per element of `type` (of the tensor called `what`), for a
/// kernel that moves elements as bytes; an error when the CPU backend has
/// no such type.
Status movableElementBytes(const KernelCall &call, const char *what,
                           ElementType type, int64_t &bytes);

/// Row-major element strides of `shape`.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape);
/// Element strides with which an operand of `shape` is read when it
/// broadcasts (numpy rules) to `target`: aligned to target's rank, 0 along
/// broadcast dimensions. False when it does not broadcast to `target`.
bool broadcastStrides(const std::vector<int64_t> &shape,
                      const std::vector<int64_t> &target,
                      std::vector<int64_t> &strides);
/// The numpy broadcast of `a` and `b`; false when they do not broadcast.
bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b,
                     std::vector<int64_t> &result);
int64_t product(const std::vector<int64_t> &shape, size_t begin = 0,
                size_t end = SIZE_MAX);

//===----------------------------------------------------------------------===//
// Element types
//===----------------------------------------------------------------------===//

template <typename T> struct TypeTag {
  using type = T;
};

/// Calls fn(TypeTag<T>{}) for the C++ type of `type` among f32, f64, i64,
/// i32, i8, u8 and bool (stored as uint8_t, 0 or 1); fn returns a Status.
/// Anything else (f16, bf16) is an error naming the op and `what`.
template <typename Fn>
Status dispatchType(const KernelCall &call, const char *what, ElementType type,
                    Fn &&fn) {
  switch (type) {
  case ElementType::F32:
    return fn(TypeTag<float>{});
  case ElementType::F64:
    return fn(TypeTag<double>{});
  case ElementType::I64:
    return fn(TypeTag<int64_t>{});
  case ElementType::I32:
    return fn(TypeTag<int32_t>{});
  case ElementType::I8:
    return fn(TypeTag<int8_t>{});
  case ElementType::U8:
  case ElementType::Bool:
    return fn(TypeTag<uint8_t>{});
  default:
    return call.error(std::string(what) + " has element type " +
                      dataTypeName(type) + ", which the CPU backend lacks");
  }
}

/// As dispatchType, for f32 and f64 only.
template <typename Fn>
Status dispatchFloatType(const KernelCall &call, const char *what,
                         ElementType type, Fn &&fn) {
  switch (type) {
  case ElementType::F32:
    return fn(TypeTag<float>{});
  case ElementType::F64:
    return fn(TypeTag<double>{});
  default:
    return call.error(std::string(what) + " has element type " +
                      dataTypeName(type) + ", expected f32 or f64");
  }
}

/// Calls fn(TypeTag<T>{}) with an unsigned integer type as wide as one
/// element of `type`: for kernels that only move elements around.
template <typename Fn>
Status dispatchBySize(const KernelCall &call, const char *what,
                      ElementType type, Fn &&fn) {
  switch (elementBytes(type)) {
  case 1:
    return fn(TypeTag<uint8_t>{});
  case 2:
    return fn(TypeTag<uint16_t>{});
  case 4:
    return fn(TypeTag<uint32_t>{});
  case 8:
    return fn(TypeTag<uint64_t>{});
  default:
    return call.error(std::string(what) + " has element type " +
                      dataTypeName(type) + ", which the CPU backend lacks");
  }
}

//===----------------------------------------------------------------------===//
// Strided walks
//===----------------------------------------------------------------------===//

/// Walks a contiguous output of `shape` while `N` inputs are read with their
/// own element strides (aligned to shape's rank: 0 to broadcast, negative
/// to walk backwards). Dimensions that every tensor walks jointly
/// contiguously are merged when the walk is built, so the innermost run is
/// as long as possible: run(bases, fn) then calls fn(outputOffset,
/// inputOffsets, innerStrides, count) for `count` consecutive outputs,
/// input i being read at inputOffsets[i] + j * innerStrides[i] for
/// j < count (offsets start at bases). Build once, run many times.
template <size_t N> class StridedWalk {
public:
  StridedWalk(const std::vector<int64_t> &shape,
              const std::array<std::vector<int64_t>, N> &strides) {
    // Drop unit dimensions; merge d into the dimension before it where
    // every input (and the contiguous output) steps over that dimension
    // exactly one run of d.
    for (size_t d = 0; d < shape.size(); ++d) {
      if (shape[d] == 0) {
        empty = true;
        return;
      }
      if (shape[d] == 1)
        continue;
      bool merge = !extents.empty();
      for (size_t i = 0; i < N && merge; ++i)
        merge = steps[i].back() == strides[i][d] * shape[d];
      if (merge) {
        extents.back() *= shape[d];
        for (size_t i = 0; i < N; ++i)
          steps[i].back() = strides[i][d];
        continue;
      }
      extents.push_back(shape[d]);
      for (size_t i = 0; i < N; ++i)
        steps[i].push_back(strides[i][d]);
    }
  }

  /// The merged walk, for a backend that indexes it itself (the CUDA
  /// kernels): isEmpty() when some extent is 0; the merged extents,
  /// outermost first (none when every extent is 1), and input i's steps.
  bool isEmpty() const { return empty; }
  const std::vector<int64_t> &mergedExtents() const { return extents; }
  const std::vector<int64_t> &mergedSteps(size_t i) const { return steps[i]; }

  template <typename Fn>
  void run(const std::array<int64_t, N> &bases, Fn &&fn) const {
    if (empty)
      return;
    std::array<int64_t, N> inner;
    int64_t count = 1;
    if (extents.empty()) {
      inner.fill(0);
    } else {
      count = extents.back();
      for (size_t i = 0; i < N; ++i)
        inner[i] = steps[i].back();
    }
    size_t outerRank = extents.empty() ? 0 : extents.size() - 1;
    if (outerRank == 0) {
      fn(int64_t(0), bases, inner, count);
      return;
    }
    // The odometer over the outer dimensions; no allocation for the ranks
    // tensors have in practice.
    int64_t local[8] = {};
    std::vector<int64_t> heap;
    int64_t *index = local;
    if (outerRank > 8) {
      heap.assign(outerRank, 0);
      index = heap.data();
    }
    std::array<int64_t, N> offsets = bases;
    int64_t output = 0;
    while (true) {
      fn(output, offsets, inner, count);
      output += count;
      size_t d = outerRank;
      while (true) {
        --d;
        for (size_t i = 0; i < N; ++i)
          offsets[i] += steps[i][d];
        if (++index[d] < extents[d])
          break;
        for (size_t i = 0; i < N; ++i)
          offsets[i] -= steps[i][d] * extents[d];
        index[d] = 0;
        if (d == 0)
          return;
      }
    }
  }

private:
  bool empty = false;
  std::vector<int64_t> extents;
  std::array<std::vector<int64_t>, N> steps;
};

/// A StridedWalk built and run once.
template <size_t N, typename Fn>
void forEachRun(const std::vector<int64_t> &shape,
                const std::array<std::vector<int64_t>, N> &strides,
                const std::array<int64_t, N> &bases, Fn &&fn) {
  StridedWalk<N>(shape, strides).run(bases, fn);
}

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
