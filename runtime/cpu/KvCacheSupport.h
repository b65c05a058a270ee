//===- KvCacheSupport.h - the KV-cache ops' rules both backends read ------===//
//
// nn.cache_append and nn.cached_attention check their operands alike on the
// CPU (KvCache.cpp) and on CUDA (runtime/cuda/KvCache.cu): these are the
// checks of everything but the positions' values, which only the CPU can
// read before it runs (a device kernel reports an out-of-range position
// instead). Defined in KvCache.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_KVCACHESUPPORT_H
#define ZPLAN_RUNTIME_CPU_KVCACHESUPPORT_H

#include "runtime/cpu/KernelSupport.h"

namespace zplan::cpu::detail {

/// cache_append(cache [B, H, L, D], new [B, H, S, D], positions [B, S]) ->
/// the cache itself: arity, types, shapes and that the result is the
/// cache's own storage.
Status checkCacheAppend(const KernelCall &call);

/// cached_attention(query [B, H, S, D], key [B, H, L, D],
/// value [B, H, L, Dv], positions [B, S]; scale) -> [B, H, S, Dv]: arity,
/// types, shapes, and the scale attribute.
Status checkCachedAttention(const KernelCall &call, float &scale);

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_KVCACHESUPPORT_H
