//===- KvCache.cu - the static KV cache of generation: append, attend -----===//
//
// The CUDA twins of runtime/cpu/KvCache.cpp (nn.cache_append,
// nn.cached_attention), checked by the functions the CPU calls too
// (runtime/ops/KvCacheOps.h). The cache of one layer is [B, H, L, D]; sequence
// b's token at absolute position p lives in slot p. The host cannot read the
// positions (device memory), so a position outside [0, L) is reported by
// the kernel (KernelError::PositionOutOfRange, the backend names the op at
// synchronize) and its row is skipped. Unlike the CPU, which checks every
// position before writing, cache_append still writes the rows whose
// positions are valid: the run fails either way.
//
// cached_attention is the fused decode kernel: one block per (b, h, query
// row s) -- in decode S = 1, so one block per (batch, head) -- reading the
// row's own position and attending over exactly slots 0..position, never
// past them (a stale slot may hold anything, even a non-finite value that
// a zero weight would turn into NaN). The visible slots are walked in
// chunks whose scores sit in shared memory: the warps compute four scores
// each at a time (lanes across D, coalesced key rows), the block takes the
// chunk's maximum and exponentials (the sum in double, as the CPU's), and
// each warp folds its share of slots into its own accumulator row in
// shared memory (lanes across Dv, coalesced value rows), rescaled when the
// running maximum grows (online softmax). The warps' rows are summed at
// the end. Any L fits: only a chunk of scores is ever held.
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/DeviceSupport.cuh"
#include "runtime/ops/KvCacheOps.h"
#include "runtime/support/Bfloat16.h"

#include <algorithm>
#include <climits>

namespace zplan::cuda {

namespace {

/// A position of row b, token s, or -1 when it is outside [0, slots)
/// (reported into the error word).
template <typename Index>
__device__ inline int64_t readPosition(const Index *positions, int64_t at,
                                       int64_t slots, uint32_t *errorWord,
                                       uint32_t tag) {
  int64_t position = positions[at];
  if (position < 0 || position >= slots) {
    reportKernelError(errorWord, tag, KernelError::PositionOutOfRange);
    return -1;
  }
  return position;
}

/// One thread per element of new [B, H, S, D]: copied to cache slot
/// positions[b, s] of (b, h). Consecutive threads copy consecutive
/// elements of a row (coalesced on both sides).
template <typename T, typename Index>
__global__ void cacheAppend(T *__restrict__ cache,
                            const T *__restrict__ entries,
                            const Index *__restrict__ positions, int64_t heads,
                            int64_t sequence, int64_t slots, int64_t width,
                            int64_t count, uint32_t *errorWord, uint32_t tag) {
  ZPLAN_GRID_STRIDE(i, count) {
    int64_t column = i % width, row = i / width;
    int64_t s = row % sequence, bh = row / sequence;
    int64_t b = bh / heads;
    int64_t slot =
        readPosition(positions, b * sequence + s, slots, errorWord, tag);
    if (slot >= 0)
      cache[(bh * slots + slot) * width + column] = entries[i];
  }
}

constexpr int kDecodeThreads = 256;
constexpr int kDecodeWarps = kDecodeThreads / 32;
/// Consecutive slots one warp scores together.
constexpr int kSlotsPerWarp = 4;

/// Shared memory of the decode kernel, in floats: the query row, a chunk of
/// scores, and one accumulator row per warp.
struct DecodeLayout {
  int64_t width = 0, valueWidth = 0, chunk = 0;
  size_t bytes() const {
    return (width + chunk + kDecodeWarps * valueWidth) * sizeof(float);
  }
};

/// One cache element as f32: the cache is f32, or bf16 under mixed
/// precision (widened exactly as it is read).
__device__ inline float widen(float x) { return x; }
__device__ inline float widen(uint16_t x) { return bf16ToFloat(x); }

template <typename Index, typename Cache>
__global__ __launch_bounds__(kDecodeThreads) void cachedAttention(
    const float *__restrict__ query, const Cache *__restrict__ key,
    const Cache *__restrict__ value, const Index *__restrict__ positions,
    float *__restrict__ out, int64_t heads, int64_t sequence, int64_t slots,
    DecodeLayout layout, float scale, uint32_t *errorWord, uint32_t tag) {
  extern __shared__ float shared[];
  __shared__ double sumScratch[32];
  __shared__ float maxScratch[32];
  int64_t width = layout.width, valueWidth = layout.valueWidth;
  float *queryRow = shared;
  float *scores = queryRow + width;
  float *accumulators = scores + layout.chunk;
  int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  // Block (b, h, s) attends with query row blockIdx.x of [B * H * S, D].
  int64_t row = blockIdx.x;
  int64_t s = row % sequence, bh = row / sequence, b = bh / heads;
  int64_t position =
      readPosition(positions, b * sequence + s, slots, errorWord, tag);
  if (position < 0) // the whole block leaves, before any barrier
    return;
  int64_t visible = position + 1;
  const Cache *keys = key + bh * slots * width;
  const Cache *values = value + bh * slots * valueWidth;
  for (int64_t x = threadIdx.x; x < width; x += kDecodeThreads)
    queryRow[x] = query[row * width + x];
  for (int64_t x = threadIdx.x; x < kDecodeWarps * valueWidth;
       x += kDecodeThreads)
    accumulators[x] = 0.0f;
  __syncthreads();

  float runningMax = -INFINITY;
  double runningSum = 0;
  for (int64_t first = 0; first < visible; first += layout.chunk) {
    int64_t count =
        visible - first < layout.chunk ? visible - first : layout.chunk;
    // Scores: a warp per slot, its lanes across D, kSlotsPerWarp slots at
    // a time so that each lane has that many independent loads in flight
    // before the warp reductions (decode is bound by these reads).
    for (int64_t j0 = warp * kSlotsPerWarp; j0 < count;
         j0 += kDecodeWarps * kSlotsPerWarp) {
      float dots[kSlotsPerWarp] = {};
      for (int64_t x = lane; x < width; x += 32) {
        float q = queryRow[x];
#pragma unroll
        for (int u = 0; u < kSlotsPerWarp; ++u)
          if (j0 + u < count)
            dots[u] =
                fmaf(q, widen(keys[(first + j0 + u) * width + x]), dots[u]);
      }
#pragma unroll
      for (int u = 0; u < kSlotsPerWarp; ++u) {
        float dot = warpSum(dots[u]);
        if (lane == 0 && j0 + u < count)
          scores[j0 + u] = scale * dot;
      }
    }
    __syncthreads();
    float localMax = -INFINITY;
    for (int64_t j = threadIdx.x; j < count; j += kDecodeThreads)
      localMax = fmaxf(localMax, scores[j]);
    float newMax = fmaxf(runningMax, blockMax(localMax, maxScratch));
    // No finite score yet: weights 0 (exp(-inf - -inf) would be NaN); the
    // row is NaN at the end if it stays so, as the CPU's.
    bool none = newMax == -INFINITY;
    float rescale = none ? 1.0f : expf(runningMax - newMax);
    double localSum = 0;
    for (int64_t j = threadIdx.x; j < count; j += kDecodeThreads) {
      float weight = none ? 0.0f : expf(scores[j] - newMax);
      scores[j] = weight;
      localSum += weight;
    }
    // blockSum synchronizes before it reads: the weights are visible after.
    runningSum = runningSum * rescale + blockSum(localSum, sumScratch);
    runningMax = newMax;
    // Each warp folds its slots (j = warp mod 8) into its own accumulator
    // row; lanes across Dv read value rows coalesced.
    float *mine = accumulators + warp * valueWidth;
    for (int64_t c = lane; c < valueWidth; c += 32) {
      float sum = mine[c] * rescale;
#pragma unroll 4
      for (int64_t j = warp; j < count; j += kDecodeWarps)
        sum = fmaf(scores[j], widen(values[(first + j) * valueWidth + c]), sum);
      mine[c] = sum;
    }
    __syncthreads(); // the next chunk overwrites the scores
  }

  float inverse =
      runningMax == -INFINITY ? NAN : static_cast<float>(1.0 / runningSum);
  for (int64_t c = threadIdx.x; c < valueWidth; c += kDecodeThreads) {
    float sum = 0.0f;
    for (int w = 0; w < kDecodeWarps; ++w)
      sum += accumulators[w * valueWidth + c];
    out[row * valueWidth + c] = sum * inverse;
  }
}

/// Calls fn(TypeTag<Index>{}) for the positions' index type (checked to be
/// i64 or i32 by the CPU's checks).
template <typename Fn>
Status dispatchIndex(const TensorRef &positions, Fn &&fn) {
  if (positions.dtype == ElementType::I64)
    return fn(ops::TypeTag<int64_t>{});
  return fn(ops::TypeTag<int32_t>{});
}

} // namespace

Status runCacheAppend(const KernelCall &call) {
  if (Status status = ops::checkCacheAppend(call.host); !status.ok())
    return status;
  const TensorRef &cache = call.host.operands[0],
                  &entries = call.host.operands[1],
                  &positions = call.host.operands[2];
  int64_t heads = cache.shape[1], slots = cache.shape[2],
          width = cache.shape[3], sequence = entries.shape[2];
  int64_t count = entries.numElements();
  if (count == 0)
    return Status::success();
  return ops::dispatchBySize(
      call.host, "cache", cache.dtype, [&](auto element) {
        using T = typename decltype(element)::type;
        return dispatchIndex(positions, [&](auto index) {
          using Index = typename decltype(index)::type;
          constexpr unsigned kThreads = 256;
          cacheAppend<T, Index><<<gridFor(count, kThreads, call.device),
                                  kThreads, 0, call.device.stream>>>(
              cache.as<T>(), entries.as<T>(), positions.as<Index>(), heads,
              sequence, slots, width, count, call.device.errorWord,
              call.errorTag());
          return launched(call);
        });
      });
}

Status runCachedAttention(const KernelCall &call) {
  float scale;
  if (Status status = ops::checkCachedAttention(call.host, scale); !status.ok())
    return status;
  const TensorRef &query = call.host.operands[0], &key = call.host.operands[1],
                  &value = call.host.operands[2],
                  &positions = call.host.operands[3],
                  &result = call.host.results[0];
  int64_t heads = query.shape[1], sequence = query.shape[2];
  int64_t slots = key.shape[2];
  if (result.numElements() == 0)
    return Status::success();
  int64_t blocks = query.shape[0] * heads * sequence;
  if (blocks > INT_MAX)
    return call.error("needs " + std::to_string(blocks) +
                      " thread blocks, more than one launch holds");

  // Scores are held a chunk of slots at a time: a few thousand cover a
  // whole cache of usual length in one pass.
  DecodeLayout layout;
  layout.width = query.shape[3];
  layout.valueWidth = value.shape[3];
  layout.chunk = std::clamp<int64_t>(slots, 1, 2048);
  constexpr size_t kDefaultShared = 48 * 1024 - 512; // less the static scratch
  size_t bytes = layout.bytes();
  size_t limit = call.device.properties.sharedMemPerBlockOptin - 512;
  if (bytes > limit)
    return call.error("query width " + std::to_string(layout.width) +
                      " and value width " + std::to_string(layout.valueWidth) +
                      " need " + std::to_string(bytes) +
                      " bytes of shared memory, more than the device's " +
                      std::to_string(limit));
  auto launch = [&](auto index, auto cache) -> Status {
    using Index = typename decltype(index)::type;
    using Cache = typename decltype(cache)::type;
    if (bytes > kDefaultShared)
      if (Status status = checkCuda(
              call,
              cudaFuncSetAttribute(cachedAttention<Index, Cache>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize,
                                   static_cast<int>(bytes)),
              "cudaFuncSetAttribute");
          !status.ok())
        return status;
    cachedAttention<Index, Cache>
        <<<static_cast<unsigned>(blocks), kDecodeThreads, bytes,
           call.device.stream>>>(
            query.as<float>(), key.as<Cache>(), value.as<Cache>(),
            positions.as<Index>(), result.as<float>(), heads, sequence, slots,
            layout, scale, call.device.errorWord, call.errorTag());
    return launched(call);
  };
  // A bf16 cache (mixed precision) is widened as it is read.
  bool bf16 = key.dtype == ElementType::BF16;
  return dispatchIndex(positions, [&](auto index) {
    if (bf16)
      return launch(index, ops::TypeTag<uint16_t>{});
    return launch(index, ops::TypeTag<float>{});
  });
}

} // namespace zplan::cuda
