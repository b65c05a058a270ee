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
// the maximum subtracted, the sum kept in double.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/IndexingSupport.h"
#include "runtime/cpu/KvCacheSupport.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <limits>

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

/// positions is an index tensor of shape [B, S].
Status checkPositionsShape(const KernelCall &call, const TensorRef &positions,
                           int64_t batch, int64_t sequence) {
  if (Status status = checkIndexType(call, "positions", positions);
      !status.ok())
    return status;
  return expectShape(call, "positions", positions, {batch, sequence});
}

Status expectRank4(const KernelCall &call, const char *what,
                   const TensorRef &tensor, const char *layout) {
  if (tensor.shape.size() == 4)
    return Status::success();
  return call.error(std::string(what) + " has shape " +
                    formatShape(tensor.shape) + ", expected rank 4 (" + layout +
                    ")");
}

} // namespace

Status checkCacheAppend(const KernelCall &call) {
  if (Status status = expectArity(call, 3, 3); !status.ok())
    return status;
  const TensorRef &cache = call.operands[0], &entries = call.operands[1],
                  &positions = call.operands[2], &result = call.results[0];
  if (Status status = expectRank4(call, "cache", cache, "[B, H, L, D]");
      !status.ok())
    return status;
  if (Status status = expectFloatType(call, "cache", cache); !status.ok())
    return status;
  int64_t batch = cache.shape[0], heads = cache.shape[1],
          width = cache.shape[3];
  if (Status status = expectType(call, "new", entries, cache.dtype);
      !status.ok())
    return status;
  if (Status status = expectRank4(call, "new", entries, "[B, H, S, D]");
      !status.ok())
    return status;
  int64_t sequence = entries.shape[2];
  if (Status status =
          expectShape(call, "new", entries, {batch, heads, sequence, width});
      !status.ok())
    return status;
  if (Status status = checkPositionsShape(call, positions, batch, sequence);
      !status.ok())
    return status;
  // In place: the result is the cache (the same storage, any view of it).
  if (Status status = expectLike(call, "result", result, cache); !status.ok())
    return status;
  if (result.data != cache.data)
    return call.error("the result is not the cache itself; cache_append "
                      "writes in place");
  return Status::success();
}

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

Status checkCachedAttention(const KernelCall &call, float &scale) {
  if (Status status = expectArity(call, 4, 4); !status.ok())
    return status;
  const TensorRef &query = call.operands[0], &key = call.operands[1],
                  &value = call.operands[2], &positions = call.operands[3],
                  &result = call.results[0];
  const char *names[] = {"query", "key", "value"};
  for (size_t i = 0; i < 3; ++i)
    if (Status status =
            expectType(call, names[i], call.operands[i], ElementType::F32);
        !status.ok())
      return status;
  if (Status status = expectType(call, "result", result, ElementType::F32);
      !status.ok())
    return status;
  if (Status status = expectRank4(call, "query", query, "[B, H, S, D]");
      !status.ok())
    return status;
  if (Status status = expectRank4(call, "key", key, "[B, H, L, D]");
      !status.ok())
    return status;
  if (Status status = expectRank4(call, "value", value, "[B, H, L, Dv]");
      !status.ok())
    return status;
  int64_t batch = query.shape[0], heads = query.shape[1],
          sequence = query.shape[2], width = query.shape[3];
  int64_t slots = key.shape[2], valueWidth = value.shape[3];
  if (Status status =
          expectShape(call, "key", key, {batch, heads, slots, width});
      !status.ok())
    return status;
  if (Status status =
          expectShape(call, "value", value, {batch, heads, slots, valueWidth});
      !status.ok())
    return status;
  if (Status status = expectShape(call, "result", result,
                                  {batch, heads, sequence, valueWidth});
      !status.ok())
    return status;
  if (Status status = checkPositionsShape(call, positions, batch, sequence);
      !status.ok())
    return status;
  double scaleValue;
  if (Status status = floatAttribute(call, "scale", scaleValue); !status.ok())
    return status;
  scale = static_cast<float>(scaleValue);
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
  const float *q = query.as<float>(), *k = key.as<float>(),
              *v = value.as<float>();
  float *out = result.as<float>();
  int ld = std::max(static_cast<int>(width), 1);
  int ldv = std::max(static_cast<int>(valueWidth), 1);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h) {
      const float *keys = k + (b * heads + h) * slots * width;
      const float *values = v + (b * heads + h) * slots * valueWidth;
      for (int64_t s = 0; s < sequence; ++s) {
        // Slots 0..position: a contiguous block of rows, nothing past it.
        int visible =
            static_cast<int>(indexAt(positions, b * sequence + s)) + 1;
        const float *row = q + ((b * heads + h) * sequence + s) * width;
        float *target = out + ((b * heads + h) * sequence + s) * valueWidth;
        cblas_sgemv(CblasRowMajor, CblasNoTrans, visible,
                    static_cast<int>(width), scale, keys, ld, row, 1, 0.0f,
                    scores, 1);
        float maximum = -std::numeric_limits<float>::infinity();
        for (int j = 0; j < visible; ++j)
          maximum = std::max(maximum, scores[j]);
        double sum = 0;
        for (int j = 0; j < visible; ++j) {
          scores[j] = std::exp(scores[j] - maximum);
          sum += scores[j];
        }
        auto inverse = static_cast<float>(1.0 / sum);
        cblas_sgemv(CblasRowMajor, CblasTrans, visible,
                    static_cast<int>(valueWidth), inverse, values, ldv, scores,
                    1, 0.0f, target, 1);
      }
    }
  return Status::success();
}

} // namespace zplan::cpu::detail
