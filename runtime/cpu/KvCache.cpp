//===- KvCache.cpp - the static KV cache of generation: append, attend ----===//
//
// The two kernels of generation's static KV cache (nn.cache_append,
// nn.cached_attention). The cache of one attention layer is [B, H, L, D];
// sequence b's token at absolute position p lives in slot p. A query at
// position p sees exactly slots 0..p: the slots past it may hold nothing
// yet (zero at load) or a longer earlier sequence's keys, so the attention
// kernel never reads them -- not even to multiply them by a zero
// probability, which would turn a stale non-finite value into NaN.
//
// Per (b, h, s) the visible prefix is one contiguous block of rows of the
// cache, so the scores and the weighted sum are two BLAS matrix-vector
// products over exactly that block (decode: S = 1, one row per sequence,
// where a GEMM would not pay). Probabilities are formed as in Attention.cpp:
// the maximum subtracted, the sum kept in double. Every position is checked
// here before anything is written; the other checks are the ops layer's
// (runtime/ops/KvCacheOps.h), shared with the CUDA kernels.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/IndexingSupport.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/ops/KvCacheOps.h"
#include "runtime/support/Bfloat16.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>

namespace zplan::cpu::detail {

namespace {

/// Every positions[b, s] in [0, extent): the message names the element and
/// its (b, s).
Status checkPositions(const KernelCall &call, const TensorRef &positions,
                      int64_t sequence, int64_t extent) {
  int64_t count = positions.numElements();
  for (int64_t i = 0; i < count; ++i) {
    int64_t position = indexAt(positions, i);
    if (position < 0 || position >= extent)
      return call.error("position " + std::to_string(position) + " of row " +
                        std::to_string(i / sequence) + ", token " +
                        std::to_string(i % sequence) +
                        " is outside the cache's " + std::to_string(extent) +
                        " slots [0, " + std::to_string(extent) + ")");
  }
  return Status::success();
}

} // namespace

Status runCacheAppend(const KernelCall &call) {
  if (Status status = checkCacheAppend(call); !status.ok())
    return status;
  const TensorRef &cache = call.operands[0], &entries = call.operands[1],
                  &positions = call.operands[2];
  int64_t batch = cache.shape[0], heads = cache.shape[1],
          slots = cache.shape[2], width = cache.shape[3];
  int64_t sequence = entries.shape[2];
  // Every position checked before anything is written.
  if (Status status = checkPositions(call, positions, sequence, slots);
      !status.ok())
    return status;

  int64_t rowBytes = width * elementBytes(cache.dtype);
  auto *target = static_cast<uint8_t *>(cache.data);
  const auto *source = static_cast<const uint8_t *>(entries.data);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < sequence; ++s) {
      int64_t slot = indexAt(positions, b * sequence + s);
      for (int64_t h = 0; h < heads; ++h)
        std::memcpy(target + ((b * heads + h) * slots + slot) * rowBytes,
                    source + ((b * heads + h) * sequence + s) * rowBytes,
                    rowBytes);
    }
  return Status::success();
}

Status runCachedAttention(const KernelCall &call) {
  float scale;
  if (Status status = checkCachedAttention(call, scale); !status.ok())
    return status;
  const TensorRef &query = call.operands[0], &key = call.operands[1],
                  &value = call.operands[2], &positions = call.operands[3],
                  &result = call.results[0];
  int64_t batch = query.shape[0], heads = query.shape[1],
          sequence = query.shape[2], width = query.shape[3];
  int64_t slots = key.shape[2], valueWidth = value.shape[3];
  if (Status status = checkPositions(call, positions, sequence, slots);
      !status.ok())
    return status;
  for (int64_t extent : {slots, width, valueWidth})
    if (extent > INT_MAX)
      return call.error("extent " + std::to_string(extent) +
                        " exceeds the BLAS integer range");
  if (product(result.shape) == 0)
    return Status::success();

  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(slots))
    scratch.resize(slots);
  float *scores = scratch.data();
  // A bf16 cache (mixed precision) is widened to f32, exactly, one (b, h)
  // slab of its visible rows at a time, for the same BLAS calls.
  bool widen = key.dtype == ElementType::BF16;
  thread_local std::vector<float> wideKeys, wideValues;
  const float *q = query.as<float>();
  float *out = result.as<float>();
  int ld = std::max(static_cast<int>(width), 1);
  int ldv = std::max(static_cast<int>(valueWidth), 1);
  for (int64_t b = 0; b < batch; ++b) {
    // The rows any of row b's queries sees: slots 0 .. its last position.
    int64_t rows = 0;
    if (widen)
      for (int64_t s = 0; s < sequence; ++s)
        rows = std::max(rows, indexAt(positions, b * sequence + s) + 1);
    for (int64_t h = 0; h < heads; ++h) {
      const float *keys, *values;
      if (widen) {
        wideKeys.resize(rows * width);
        wideValues.resize(rows * valueWidth);
        widenBf16(key.as<uint16_t>() + (b * heads + h) * slots * width,
                  rows * width, wideKeys.data());
        widenBf16(value.as<uint16_t>() + (b * heads + h) * slots * valueWidth,
                  rows * valueWidth, wideValues.data());
        keys = wideKeys.data();
        values = wideValues.data();
      } else {
        keys = key.as<float>() + (b * heads + h) * slots * width;
        values = value.as<float>() + (b * heads + h) * slots * valueWidth;
      }
      for (int64_t s = 0; s < sequence; ++s) {
        // Slots 0..position: a contiguous block of rows, nothing past it.
        int visible =
            static_cast<int>(indexAt(positions, b * sequence + s)) + 1;
        const float *row = q + ((b * heads + h) * sequence + s) * width;
        float *target = out + ((b * heads + h) * sequence + s) * valueWidth;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, visible,
                    static_cast<int>(width), scale, keys, ld, row, 1, 0.0f,
                    scores, 1);
        double sum =
            expShiftedSum(scores, visible, maxOf(scores, visible), scores);
        auto inverse = static_cast<float>(1.0 / sum);
        cblas_sgemv(CblasRowMajor, CblasTrans, visible,
                    static_cast<int>(valueWidth), inverse, values, ldv, scores,
                    1, 0.0f, target, 1);
      }
    }
  }
  return Status::success();
}

} // namespace zplan::cpu::detail
