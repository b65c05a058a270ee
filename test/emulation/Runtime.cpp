//===- Runtime.cpp - the SIMT emulator behind Prelude.h -------------------===//
//
// One block at a time; its threads are fibers on this OS thread. A fiber
// runs until it finishes or waits (block barrier, warp exchange); the
// scheduler then resumes the next runnable one, and releases a barrier when
// every live thread it covers waits at it. Fibers are created once (up to
// 1024, CUDA's block limit) and reused by every block: a switch is a
// _setjmp/_longjmp pair, not a kernel call, so a launch of a few thousand
// threads costs milliseconds.
//
// Compiled without _FORTIFY_SOURCE: its longjmp check refuses jumps between
// stacks, which is what a fiber switch is. Under AddressSanitizer (the
// default build of this test, CMakeLists.txt) each switch is announced with
// __sanitizer_{start,finish}_switch_fiber, so ASan knows which stack runs.
//
//===----------------------------------------------------------------------===//

#include "test/emulation/Prelude.h"

#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <sys/mman.h>
#include <ucontext.h>
#include <unordered_map>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif
#include <vector>

namespace emu {

Dim threadIndex, blockIndex, blockDimension, gridDimension;

namespace {

constexpr unsigned kMaxThreads = 1024;
constexpr size_t kStackBytes = 256 * 1024;
constexpr size_t kStaticSharedLimit = 48 * 1024;

enum class State { Runnable, AtBarrier, AtWarp, Done };

struct Fiber {
  jmp_buf context;
  ucontext_t start;
  char *stack = nullptr;
  bool started = false;
  State state = State::Done;
  Dim index;
  uint64_t exchange = 0;
  void *fakeStack = nullptr; // ASan's bookkeeping while switched out
};

struct Scheduler {
  Fiber fibers[kMaxThreads];
  unsigned count = 0; // threads in the running block
  unsigned current = 0;
  jmp_buf scheduler;
  void *schedulerFakeStack = nullptr;
  const void *schedulerStack = nullptr;
  size_t schedulerStackBytes = 0;
  void (*body)(void *) = nullptr;
  void *context = nullptr;
  std::vector<char> dynamic;
  size_t dynamicBytes = 0;
  /// cudaFuncAttributeMaxDynamicSharedMemorySize by kernel, keyed by the
  /// kernel's source text ("cachedAttention<Index>": the launch site's and
  /// cudaFuncSetAttribute's first argument), as the attribute persists.
  std::unordered_map<std::string, int> maxDynamicShared;
  /// Counts blocks run; a static shared variable last poisoned in an
  /// earlier block is poisoned again when the running one declares it.
  uint64_t blockEpoch = 0;
  std::unordered_map<void *, uint64_t> poisonedIn;
  /// The static shared memory the running block declared (a lower bound of
  /// nvcc's allocation, which counts branches not taken too).
  size_t staticSharedBytes = 0;
  const char *site = "";
  /// The order threads are resumed in, shuffled before every pass: a
  /// kernel correct only in one order (a missing barrier) differs.
  std::vector<unsigned> order;
  /// $ZPLAN_EMULATION_SEED picks another order (to hunt a race).
  std::mt19937 shuffle{
      std::getenv("ZPLAN_EMULATION_SEED")
          ? unsigned(std::atoi(std::getenv("ZPLAN_EMULATION_SEED")))
          : 20261201u};
  cudaError_t lastError = cudaSuccess;
};

Scheduler &scheduler() {
  static auto *s = new Scheduler; // fibers' stacks live for the process
  return *s;
}

// Fiber switches as ASan must hear of them (no-ops without ASan).
void leaving(void **fakeStack, const void *stack, size_t bytes) {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_start_switch_fiber(fakeStack, stack, bytes);
#else
  (void)fakeStack, (void)stack, (void)bytes;
#endif
}
void arrivedInFiber(Fiber &f) {
#if defined(__SANITIZE_ADDRESS__)
  Scheduler &s = scheduler();
  __sanitizer_finish_switch_fiber(f.fakeStack, &s.schedulerStack,
                                  &s.schedulerStackBytes);
#else
  (void)f;
#endif
}
void arrivedInScheduler() {
#if defined(__SANITIZE_ADDRESS__)
  __sanitizer_finish_switch_fiber(scheduler().schedulerFakeStack, nullptr,
                                  nullptr);
#endif
}

void yieldToScheduler() {
  Scheduler &s = scheduler();
  Fiber &f = s.fibers[s.current];
  if (!_setjmp(f.context)) {
    leaving(&f.fakeStack, s.schedulerStack, s.schedulerStackBytes);
    _longjmp(s.scheduler, 1);
  }
  arrivedInFiber(f);
}

void fiberMain(int index) {
  Scheduler &s = scheduler();
  arrivedInFiber(s.fibers[index]);
  for (;;) {
    s.body(s.context);
    s.fibers[index].state = State::Done;
    yieldToScheduler();
  }
}

void resume(unsigned t) {
  Scheduler &s = scheduler();
  Fiber &f = s.fibers[t];
  s.current = t;
  threadIndex = f.index;
  if (_setjmp(s.scheduler)) {
    arrivedInScheduler();
    return;
  }
  if (f.started) {
    leaving(&s.schedulerFakeStack, f.stack, kStackBytes);
    _longjmp(f.context, 1);
  }
  f.started = true;
  f.stack = static_cast<char *>(
      mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (f.stack == MAP_FAILED) {
    std::fprintf(stderr, "emulation: cannot map a fiber stack\n");
    std::abort();
  }
  getcontext(&f.start);
  f.start.uc_stack.ss_sp = f.stack;
  f.start.uc_stack.ss_size = kStackBytes;
  f.start.uc_link = nullptr;
  makecontext(&f.start, reinterpret_cast<void (*)()>(fiberMain), 1,
              static_cast<int>(t));
  leaving(&s.schedulerFakeStack, f.stack, kStackBytes);
  setcontext(&f.start);
}

/// Runs the current block to completion.
void runBlock() {
  Scheduler &s = scheduler();
  unsigned warps = (s.count + 31) / 32;
  ++s.blockEpoch;
  s.staticSharedBytes = 0;
  std::memset(s.dynamic.data(), 0xff, s.dynamicBytes);
  s.order.resize(s.count);
  for (unsigned t = 0; t < s.count; ++t) {
    s.fibers[t].state = State::Runnable;
    s.order[t] = t;
  }
  for (;;) {
    bool ran = false;
    std::shuffle(s.order.begin(), s.order.end(), s.shuffle);
    for (unsigned t : s.order)
      if (s.fibers[t].state == State::Runnable) {
        resume(t);
        ran = true;
      }
    // Release warps whose live threads all wait at the exchange, and the
    // block when every live thread waits at __syncthreads.
    bool released = false, allDone = true, allAtBarrier = true;
    for (unsigned w = 0; w < warps; ++w) {
      unsigned end = std::min(s.count, 32 * (w + 1)), waiting = 0, live = 0;
      for (unsigned t = 32 * w; t < end; ++t) {
        State state = s.fibers[t].state;
        live += state != State::Done;
        waiting += state == State::AtWarp;
        allDone &= state == State::Done;
        allAtBarrier &= state == State::Done || state == State::AtBarrier;
      }
      if (live && waiting == live) {
        for (unsigned t = 32 * w; t < end; ++t)
          if (s.fibers[t].state == State::AtWarp)
            s.fibers[t].state = State::Runnable;
        released = true;
      }
    }
    if (allDone) {
      // A device refuses these at compile or launch time.
      size_t total = s.staticSharedBytes + s.dynamicBytes;
      if (s.staticSharedBytes > kStaticSharedLimit ||
          total > size_t(227 * 1024)) {
        std::fprintf(stderr,
                     "emulation: %s uses %zu bytes of static and %zu of "
                     "dynamic shared memory: more than a block may have "
                     "(48 KiB static, 227 KiB in all)\n",
                     s.site, s.staticSharedBytes, s.dynamicBytes);
        std::abort();
      }
      return;
    }
    if (allAtBarrier) {
      for (unsigned t = 0; t < s.count; ++t)
        if (s.fibers[t].state == State::AtBarrier)
          s.fibers[t].state = State::Runnable;
      released = true;
    }
    if (!released && !ran) {
      std::fprintf(stderr,
                   "emulation: deadlock in %s, block (%u,%u,%u): some "
                   "threads wait at __syncthreads while others wait at a "
                   "warp shuffle (a barrier not every thread reaches)\n",
                   s.site, blockIndex.x, blockIndex.y, blockIndex.z);
      std::abort();
    }
  }
}

} // namespace

cudaError_t runGrid(Dim grid, Dim block, size_t dynamicBytes,
                    void (*body)(void *), void *context) {
  Scheduler &s = scheduler();
  uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (threads == 0 || threads > kMaxThreads || block.z > 64 || grid.x == 0 ||
      grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 ||
      grid.x > 0x7fffffffu)
    return cudaErrorInvalidConfiguration;
  if (dynamicBytes > kStaticSharedLimit) {
    const char *kernel = std::strchr(s.site, ' ');
    auto allowed = s.maxDynamicShared.find(kernel ? kernel + 1 : "");
    if (allowed == s.maxDynamicShared.end() ||
        dynamicBytes > size_t(allowed->second))
      return cudaErrorInvalidValue;
  }
  s.body = body;
  s.context = context;
  s.count = static_cast<unsigned>(threads);
  // Poisoned at each block (runBlock): a kernel that reads shared memory
  // it never wrote sees NaN patterns, as it would see garbage on a device.
  s.dynamic.resize(dynamicBytes + 16);
  s.dynamicBytes = dynamicBytes;
  blockDimension = block;
  gridDimension = grid;
  for (unsigned t = 0; t < threads; ++t)
    s.fibers[t].index = {t % block.x, (t / block.x) % block.y,
                         unsigned(t / (uint64_t(block.x) * block.y))};
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        blockIndex = {x, y, z};
        runBlock();
      }
  return cudaSuccess;
}

namespace {
/// The launch sites run by this process, appended to the file named by
/// $ZPLAN_EMULATION_LAUNCHES at exit (ctest runs each case in a process).
struct LaunchSites {
  std::set<std::string> sites;
  ~LaunchSites() {
    const char *path = std::getenv("ZPLAN_EMULATION_LAUNCHES");
    if (!path || sites.empty())
      return;
    std::string lines;
    for (const std::string &site : sites)
      lines += site + "\n";
    if (FILE *file = std::fopen(path, "a")) {
      std::fwrite(lines.data(), 1, lines.size(), file);
      std::fclose(file);
    }
  }
};
LaunchSites launchSites;
} // namespace

void recordLaunchSite(const char *site) {
  scheduler().site = site;
  launchSites.sites.insert(site);
}

void recordLaunchError(cudaError_t error) {
  if (error != cudaSuccess)
    scheduler().lastError = error;
}

cudaError_t takeLastError() {
  cudaError_t error = scheduler().lastError;
  scheduler().lastError = cudaSuccess;
  return error;
}

void *dynamicSharedBuffer() { return scheduler().dynamic.data(); }

void poisonShared(void *variable, size_t bytes) {
  Scheduler &s = scheduler();
  uint64_t &epoch = s.poisonedIn[variable];
  if (epoch == s.blockEpoch)
    return;
  epoch = s.blockEpoch;
  s.staticSharedBytes += bytes;
  std::memset(variable, 0xff, bytes);
}

void syncThreads() {
  Scheduler &s = scheduler();
  s.fibers[s.current].state = State::AtBarrier;
  yieldToScheduler();
}

int laneId() { return scheduler().current % 32; }

uint64_t warpExchange(uint64_t bits, int source) {
  Scheduler &s = scheduler();
  unsigned self = s.current, base = self - self % 32;
  s.fibers[self].exchange = bits;
  s.fibers[self].state = State::AtWarp;
  yieldToScheduler();
  unsigned from = base + unsigned(source);
  uint64_t result = source >= 0 && source < 32 && from < s.count &&
                            s.fibers[from].state != State::Done
                        ? s.fibers[from].exchange
                        : bits;
  s.fibers[self].state = State::AtWarp;
  yieldToScheduler();
  return result;
}

cudaError_t memsetAsync(void *target, int value, size_t bytes, cudaStream_t) {
  if (bytes) // CUDA accepts a null pointer for 0 bytes; memset does not
    std::memset(target, value, bytes);
  return cudaSuccess;
}

cudaError_t memcpyAsync(void *target, const void *source, size_t bytes,
                        cudaMemcpyKind, cudaStream_t) {
  if (bytes)
    std::memmove(target, source, bytes);
  return cudaSuccess;
}

cudaError_t setAttribute(const char *arguments, cudaFuncAttribute attribute,
                         int value) {
  if (attribute == cudaFuncAttributeMaxDynamicSharedMemorySize) {
    // An H100/H200 allows 227 KiB per block.
    if (value < 0 || value > 227 * 1024)
      return cudaErrorInvalidValue;
    // The kernel is the text before the last two top-level commas (the
    // preprocessor spells it with single spaces, as transform.py does).
    std::string text = arguments;
    std::vector<size_t> commas;
    int depth = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      depth += text[i] == '<' || text[i] == '(';
      depth -= text[i] == '>' || text[i] == ')';
      if (text[i] == ',' && depth == 0)
        commas.push_back(i);
    }
    if (commas.size() < 2)
      return cudaErrorInvalidValue;
    scheduler().maxDynamicShared[text.substr(0, commas[commas.size() - 2])] =
        value;
  }
  return cudaSuccess;
}

const char *errorString(cudaError_t error) {
  switch (error) {
  case cudaSuccess:
    return "no error";
  case cudaErrorInvalidConfiguration:
    return "invalid configuration argument";
  case cudaErrorInvalidValue:
    return "invalid argument";
  default:
    return "unknown error (emulated)";
  }
}

const char *cublasStatusString(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS:
    return "the operation completed successfully";
  case CUBLAS_STATUS_INVALID_VALUE:
    return "an unsupported value or parameter was passed to the function";
  case CUBLAS_STATUS_NOT_SUPPORTED:
    return "the functionality requested is not supported";
  default:
    return "unknown cuBLAS status (emulated)";
  }
}

} // namespace emu
