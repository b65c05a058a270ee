//===- Parallel.h - the CPU kernels' own threads (private) ----------------===//
//
// `zrun --threads T` gives each rank T threads, and the kernels that make up
// a step split their work over them here, in contiguous chunks
// (parallelFor): the GEMMs (each thread a one-thread GEMM on its block of
// the result, Matmul.cpp), attention's (batch, head) entries, the loss
// over the vocabulary, the norms, softmax, the elementwise ops, copies and
// transposes, the optimizers, decode's f32 GEMV (VectorMath.h). (The rest
// -- embedding, gather, the KV cache's -- run on the caller's thread.)
// OpenBLAS's own pool stays at one thread: two pools on the same cores
// competed. With one thread nothing changes: the body runs inline, on the
// caller's thread.
//
// Every kernel that uses parallelFor computes each output element exactly as
// its one-thread loop does, and keeps every sum across chunks in the
// one-thread order (a per-row value is stored and the rows summed after, or
// the work is split along the dimension the sum does not run over): the
// results are the same bits whatever T is. CpuKernelThreadsTest runs each
// split kernel at 1 and 3 threads and compares bytes; test/train/threads.test
// compares whole training runs and generations.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_PARALLEL_H
#define ZPLAN_RUNTIME_CPU_PARALLEL_H

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace zplan::cpu::detail {

/// The threads parallelFor splits work over (the caller's included): the
/// last setKernelThreads() count, 1 before any.
int kernelThreads();

/// Sets kernelThreads() (through cpu::setKernelThreads).
void setKernelPoolThreads(int threads);

/// The type-erased form of parallelFor.
void runParallel(int64_t count, int64_t grain,
                 void (*call)(void *body, int64_t begin, int64_t end),
                 void *body);

/// Calls body(begin, end) over contiguous chunks that cover [0, count)
/// once, one chunk per thread and at most count / grain chunks (a chunk of
/// fewer than `grain` items is not worth waking a thread for), and returns
/// when every chunk is done. The caller's thread runs the first chunk. A
/// call made while another is running (from inside a chunk, or from a
/// second thread) runs inline.
template <typename Body>
void parallelFor(int64_t count, int64_t grain, Body &&body) {
  using Plain = std::remove_reference_t<Body>;
  runParallel(
      count, grain,
      [](void *erased, int64_t begin, int64_t end) {
        (*static_cast<Plain *>(erased))(begin, end);
      },
      const_cast<void *>(static_cast<const void *>(&body)));
}

/// Items of `itemCost` elements each that make a chunk worth a thread:
/// about 16K elements of simple work (a few microseconds, against the few
/// microseconds a wake-up costs).
inline int64_t grainFor(int64_t itemCost) {
  constexpr int64_t kChunkElements = 16 * 1024;
  return itemCost >= kChunkElements
             ? 1
             : kChunkElements / std::max<int64_t>(itemCost, 1);
}

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_PARALLEL_H
