//===- KvCacheOps.h - the KV-cache ops' checks ----------------------------===//
//
// Shared validation for every backend to call: nn.cache_append and
// nn.cached_attention check their operands alike on every backend. These
// are the checks of everything but the positions' values, which only the
// CPU can read before it runs (runtime/cpu/KvCache.cpp); a device kernel
// reports an out-of-range position instead (runtime/cuda/KvCache.cu).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_KVCACHEOPS_H
#define ZPLAN_RUNTIME_OPS_KVCACHEOPS_H

#include "runtime/ops/KernelCall.h"

namespace zplan::ops {

/// cache_append(cache [B, H, L, D], new [B, H, S, D], positions [B, S]) ->
/// the cache itself: arity, types, shapes and that the result is the
/// cache's own storage.
Status checkCacheAppend(const KernelCall &call);

/// cached_attention(query [B, H, S, D], key [B, H, L, D],
/// value [B, H, L, Dv], positions [B, S]; scale) -> [B, H, S, Dv]: arity,
/// types (query and result f32; key and value f32, or both bf16: a mixed-
/// precision cache), shapes, and the scale attribute.
Status checkCachedAttention(const KernelCall &call, float &scale);

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_KVCACHEOPS_H
