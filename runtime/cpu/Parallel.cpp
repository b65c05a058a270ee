//===- Parallel.cpp - the CPU kernels' thread pool ------------------------===//
//
// T - 1 worker threads and the caller. A job is published by bumping a
// generation counter; a worker that sees it runs its chunk and counts down
// `pending`, which the caller waits on. Kernels come back to back, so a
// worker spins briefly (about 50 us) for the next generation before it
// sleeps on the condition variable: a sleeping worker costs a futex wake-up
// per kernel, a spinning one steals the core OpenBLAS's own worker needs
// during a GEMM. Both waits pause (and the caller's yields) instead of
// burning a core: the ranks and OpenBLAS share the same cores.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Parallel.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace zplan::cpu::detail {

namespace {

void pause() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

class KernelPool {
public:
  ~KernelPool() { stop(); }

  int width() const { return static_cast<int>(workers.size()) + 1; }

  void resize(int threads) {
    threads = std::max(threads, 1);
    if (threads == width())
      return;
    stop();
    stopping = false;
    // A worker starts from the generation now current, not from the one it
    // sees when it first runs: a job published in between is still its.
    uint64_t current = generation.load(std::memory_order_acquire);
    for (int index = 1; index < threads; ++index)
      workers.emplace_back([this, index, current] { work(index, current); });
  }

  void run(int64_t count, int64_t grain, void (*call)(void *, int64_t, int64_t),
           void *body) {
    if (count <= 0)
      return;
    int64_t chunks =
        std::min<int64_t>(width(), count / std::max<int64_t>(grain, 1));
    // One job at a time: a call made while one runs (from inside a chunk,
    // or from a second thread) runs inline.
    if (chunks <= 1 || busy.exchange(true, std::memory_order_acquire)) {
      call(body, 0, count);
      return;
    }
    job = Job{call, body, count, static_cast<int>(chunks)};
    pending.store(static_cast<int>(workers.size()), std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> lock(sleep);
      generation.fetch_add(1, std::memory_order_release);
    }
    wake.notify_all();
    runChunk(0);
    for (int spins = 0; pending.load(std::memory_order_acquire) != 0; ++spins) {
      if (spins < 4096)
        pause();
      else
        std::this_thread::yield();
    }
    busy.store(false, std::memory_order_release);
  }

private:
  struct Job {
    void (*call)(void *, int64_t, int64_t) = nullptr;
    void *body = nullptr;
    int64_t count = 0;
    int chunks = 0;
  };

  void runChunk(int index) {
    if (index >= job.chunks)
      return;
    int64_t begin = job.count * index / job.chunks;
    int64_t end = job.count * (index + 1) / job.chunks;
    job.call(job.body, begin, end);
  }

  void work(int index, uint64_t seen) {
    for (;;) {
      uint64_t now = generation.load(std::memory_order_acquire);
      for (int spins = 0; now == seen && spins < kSpins; ++spins) {
        pause();
        now = generation.load(std::memory_order_acquire);
      }
      if (now == seen) {
        std::unique_lock<std::mutex> lock(sleep);
        wake.wait(lock, [&] {
          return stopping || generation.load(std::memory_order_acquire) != seen;
        });
        if (stopping)
          return;
        now = generation.load(std::memory_order_acquire);
      }
      seen = now;
      runChunk(index);
      pending.fetch_sub(1, std::memory_order_release);
    }
  }

  void stop() {
    {
      std::lock_guard<std::mutex> lock(sleep);
      stopping = true;
    }
    wake.notify_all();
    for (std::thread &worker : workers)
      worker.join();
    workers.clear();
  }

  /// About 50 us of pause instructions.
  static constexpr int kSpins = 2000;

  std::vector<std::thread> workers;
  std::atomic<bool> busy{false}; // a job is running
  std::mutex sleep;
  std::condition_variable wake;
  bool stopping = false; // guarded by `sleep`
  std::atomic<uint64_t> generation{0};
  std::atomic<int> pending{0};
  Job job; // written before `generation` is bumped (release)
};

KernelPool &pool() {
  static KernelPool instance;
  return instance;
}

} // namespace

int kernelThreads() { return pool().width(); }

void setKernelPoolThreads(int threads) { pool().resize(threads); }

void runParallel(int64_t count, int64_t grain,
                 void (*call)(void *body, int64_t begin, int64_t end),
                 void *body) {
  pool().run(count, grain, call, body);
}

} // namespace zplan::cpu::detail
