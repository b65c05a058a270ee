//===- KvCacheOps.cpp - the KV-cache ops' checks --------------------------===//
//
// The cache of one attention layer is [B, H, L, D]; the new entries
// [B, H, S, D] and the queries [B, H, S, D] come with positions [B, S]
// (i64 or i32), and cache_append writes the cache in place.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/KvCacheOps.h"

#include "runtime/ops/Attributes.h"
#include "runtime/ops/Checks.h"
#include "runtime/ops/IndexingOps.h"
#include "runtime/support/ShapeText.h"

#include <string>

namespace zplan::ops {

namespace {

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
                    shapeText(tensor.shape) + ", expected rank 4 (" + layout +
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
  // f32 or f64, or bf16 under mixed precision: the rows are moved, not
  // computed.
  if (cache.dtype != ElementType::BF16)
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

Status checkCachedAttention(const KernelCall &call, float &scale) {
  if (Status status = expectArity(call, 4, 4); !status.ok())
    return status;
  const TensorRef &query = call.operands[0], &key = call.operands[1],
                  &value = call.operands[2], &positions = call.operands[3],
                  &result = call.results[0];
  if (Status status = expectType(call, "query", query, ElementType::F32);
      !status.ok())
    return status;
  // The cache is f32, or bf16 under mixed precision (widened as it is
  // read); key and value are one cache's type.
  ElementType cacheType =
      key.dtype == ElementType::BF16 ? ElementType::BF16 : ElementType::F32;
  for (const auto &[name, tensor] :
       {std::pair<const char *, const TensorRef *>{"key", &key},
        std::pair<const char *, const TensorRef *>{"value", &value}})
    if (Status status = expectType(call, name, *tensor, cacheType);
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

} // namespace zplan::ops
