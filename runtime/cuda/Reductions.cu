//===- Reductions.cu - reduce_mean, reduce_sum, reduce_max on CUDA --------===//
//
// The CUDA twin of the reductions of runtime/cpu/Normalization.cpp: the
// same checks and layout (readReduction: kept dimensions walk the result,
// reduced ones are walked per result element), the same accumulators
// (floats sum in double, integers in wrapping uint64; max lets NaN win)
// and the same final step (finishSum), from runtime/ops/ReductionOps.h. Only
// the order of the additions differs (a tree instead of a running sum).
//
// Which threads share a result element depends on where the reduced
// elements lie, so that loads stay coalesced:
// - the input's innermost dimension is reduced (a row sum): a warp per
//   result element, its lanes reading consecutive elements; a whole block
//   per element when there are too few elements to fill the device with
//   warps and each is long (a sum of everything);
// - otherwise (a column sum, e.g. a bias gradient over [B, S, H] -> [H]):
//   a block of 32 x 16 threads takes 32 consecutive result elements, x
//   reading consecutive elements of the kept innermost dimension, the 16
//   rows of y splitting the reduced elements; the 16 partial results meet
//   in shared memory.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Strided.cuh"
#include "runtime/ops/ReductionOps.h"

#include <algorithm>

namespace zplan::cuda {

using ops::Reduction;

namespace {

/// The partial result of reduction R over elements of type T, and how two
/// partial results combine.
template <typename T, Reduction R> struct Accumulator {
  using Value =
      std::conditional_t<R == Reduction::Max, T, ops::ReductionSum<T>>;

  __device__ static Value identity() {
    if constexpr (R == Reduction::Max)
      return ops::reductionLowest<T>();
    else
      return Value(0);
  }
  __device__ static Value combine(Value a, Value b) {
    if constexpr (R == Reduction::Max)
      return ops::maxKeepingNan(a, b);
    else
      return a + b;
  }
  __device__ static Value add(Value a, T element) {
    return combine(a, static_cast<Value>(element));
  }
  __device__ static T finish(Value value, int64_t count) {
    if constexpr (R == Reduction::Max)
      return value;
    else
      return ops::finishSum<T>(value, R == Reduction::Mean, count);
  }
};

/// __shfl_xor_sync has no 8-bit overloads: those travel as int.
template <typename V> __device__ V shuffleXor(V value, int offset) {
  if constexpr (sizeof(V) < sizeof(int))
    return static_cast<V>(
        __shfl_xor_sync(0xffffffffu, static_cast<int>(value), offset));
  else
    return __shfl_xor_sync(0xffffffffu, value, offset);
}

template <typename A>
__device__ typename A::Value warpCombine(typename A::Value value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value = A::combine(value, shuffleXor(value, offset));
  return value;
}

/// What every reduction kernel reads: the input, the result, and where the
/// elements of result element o lie (kept.locate(o) + reduced.locate(r)).
template <typename T> struct ReductionArgs {
  const T *input;
  T *output;
  StridedLayout<1> kept, reduced;
};

template <typename T>
__device__ int64_t keptBase(const ReductionArgs<T> &args, int64_t o) {
  int64_t offset[1];
  args.kept.locate(o, offset);
  return offset[0];
}

template <typename T>
__device__ int64_t reducedOffset(const ReductionArgs<T> &args, int64_t r) {
  int64_t offset[1];
  args.reduced.locate(r, offset);
  return offset[0];
}

constexpr unsigned kWarpsPerBlock = 8;

/// A warp per result element: lanes stride over its reduced elements.
template <typename T, Reduction R>
__global__ void reduceByWarp(ReductionArgs<T> args) {
  using A = Accumulator<T, R>;
  int lane = threadIdx.x % 32;
  int64_t warps = int64_t(gridDim.x) * kWarpsPerBlock;
  int64_t count = args.reduced.count;
  for (int64_t o = blockIdx.x * int64_t(kWarpsPerBlock) + threadIdx.x / 32;
       o < args.kept.count; o += warps) {
    int64_t base = keptBase(args, o);
    typename A::Value value = A::identity();
    for (int64_t r = lane; r < count; r += 32)
      value = A::add(value, args.input[base + reducedOffset(args, r)]);
    value = warpCombine<A>(value);
    if (lane == 0)
      args.output[o] = A::finish(value, count);
  }
}

constexpr unsigned kBlockThreads = 1024;

/// A block per result element, for few long reductions.
template <typename T, Reduction R>
__global__ void reduceByBlock(ReductionArgs<T> args) {
  using A = Accumulator<T, R>;
  __shared__ typename A::Value partial[32];
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  int64_t count = args.reduced.count;
  for (int64_t o = blockIdx.x; o < args.kept.count; o += gridDim.x) {
    int64_t base = keptBase(args, o);
    typename A::Value value = A::identity();
    for (int64_t r = threadIdx.x; r < count; r += blockDim.x)
      value = A::add(value, args.input[base + reducedOffset(args, r)]);
    value = warpCombine<A>(value);
    if (lane == 0)
      partial[warp] = value;
    __syncthreads();
    if (warp == 0) {
      value = lane < int(blockDim.x / 32) ? partial[lane] : A::identity();
      value = warpCombine<A>(value);
      if (lane == 0)
        args.output[o] = A::finish(value, count);
    }
    __syncthreads(); // partial is reused by the next result element
  }
}

constexpr unsigned kColumnWidth = 32, kColumnRows = 16;

/// 32 consecutive result elements per block (x), their reduced elements
/// split over 16 rows of threads (y).
template <typename T, Reduction R>
__global__ void reduceByColumn(ReductionArgs<T> args) {
  using A = Accumulator<T, R>;
  // +1 column: the final pass reads a column, keep it off one bank.
  __shared__ typename A::Value partial[kColumnRows][kColumnWidth + 1];
  int64_t count = args.reduced.count;
  int64_t tiles = (args.kept.count + kColumnWidth - 1) / kColumnWidth;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    int64_t o = tile * kColumnWidth + threadIdx.x;
    typename A::Value value = A::identity();
    if (o < args.kept.count) {
      int64_t base = keptBase(args, o);
      for (int64_t r = threadIdx.y; r < count; r += kColumnRows)
        value = A::add(value, args.input[base + reducedOffset(args, r)]);
    }
    partial[threadIdx.y][threadIdx.x] = value;
    __syncthreads();
    if (threadIdx.y == 0 && o < args.kept.count) {
      for (unsigned row = 1; row < kColumnRows; ++row)
        value = A::combine(value, partial[row][threadIdx.x]);
      args.output[o] = A::finish(value, count);
    }
    __syncthreads(); // partial is reused by the next tile
  }
}

template <typename T, Reduction R>
Status launchReduction(const KernelCall &call, const ReductionArgs<T> &args) {
  const DeviceContext &device = call.device;
  cudaStream_t stream = device.stream;
  int64_t outputs = args.kept.count;
  // The reduced elements' innermost merged dimension is the input's
  // innermost one exactly when its stride is 1.
  bool rowwise = args.reduced.rank > 0 &&
                 args.reduced.strides[0][args.reduced.rank - 1] == 1;
  if (!rowwise) {
    unsigned blocks =
        gridFor((outputs + kColumnWidth - 1) / kColumnWidth, 1, device);
    reduceByColumn<T, R>
        <<<blocks, dim3(kColumnWidth, kColumnRows), 0, stream>>>(args);
  } else if (outputs < 2 * std::max(1, device.properties.multiProcessorCount) &&
             args.reduced.count >= 8 * kBlockThreads) {
    unsigned blocks = gridFor(outputs, 1, device);
    reduceByBlock<T, R><<<blocks, kBlockThreads, 0, stream>>>(args);
  } else {
    unsigned blocks = gridFor(outputs * 32, kWarpsPerBlock * 32, device);
    reduceByWarp<T, R><<<blocks, kWarpsPerBlock * 32, 0, stream>>>(args);
  }
  return launched(call);
}

Status reduce(const KernelCall &call, Reduction reduction) {
  ops::ReductionLayout layout;
  if (Status status = ops::readReduction(call.host, layout); !status.ok())
    return status;
  const TensorRef &input = call.host.operands[0],
                  &result = call.host.results[0];
  StridedLayout<1> kept, reduced;
  if (Status status = makeStridedLayout<1>(call, layout.keptShape,
                                           {layout.keptStrides}, {0}, kept);
      !status.ok())
    return status;
  if (Status status = makeStridedLayout<1>(
          call, layout.reducedShape, {layout.reducedStrides}, {0}, reduced);
      !status.ok())
    return status;
  if (kept.count == 0)
    return Status::success(); // no result elements
  // An empty reduced walk (count 0) still writes every result element: the
  // identity, finished (0, NaN for a float mean, -inf, lowest).
  return ops::dispatchType(
      call.host, "input", input.dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        ReductionArgs<T> args{input.as<T>(), result.as<T>(), kept, reduced};
        switch (reduction) {
        case Reduction::Mean:
          return launchReduction<T, Reduction::Mean>(call, args);
        case Reduction::Sum:
          return launchReduction<T, Reduction::Sum>(call, args);
        case Reduction::Max:
          return launchReduction<T, Reduction::Max>(call, args);
        }
        return Status::success();
      });
}

} // namespace

Status runReduceMean(const KernelCall &call) {
  return reduce(call, Reduction::Mean);
}

Status runReduceSum(const KernelCall &call) {
  return reduce(call, Reduction::Sum);
}

Status runReduceMax(const KernelCall &call) {
  return reduce(call, Reduction::Max);
}

} // namespace zplan::cuda
