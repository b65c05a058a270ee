//===- AsyncWatch.h - a deadline for collectives that complete later ------===//
//
// The Watchdog (Watchdog.h) times a collective from the call that issues it
// to the call's return, which is right for MPI. NCCL's collectives return
// as soon as they are enqueued on a stream; the wait happens later, in
// whatever synchronizes with that stream, and a peer that stopped leaves
// its kernel spinning on the device forever. An AsyncWatch is told of each
// collective as it is issued, with a way to ask whether it has completed
// (an event recorded after it); a thread polls the oldest pending one and,
// when it has made no progress for the deadline (counted from its issue or
// from the previous collective's completion, whichever is later: one stream
// runs them in order), prints the Watchdog's line naming it and ends the
// job through the abortAll hook (NcclCommunicator: ncclCommAbort, which
// stops the kernels, then MPI_Abort). The same thread reports a
// communicator's asynchronous error (a peer's network failure) at once.
//
// The thread sleeps between polls (`pollEvery`, 100 ms): a deadline of
// seconds or minutes is checked to within that. The deadline is asked of
// the `timeout` hook at every poll, so that it follows the host
// communicator's (zrun --collective-timeout, zplan.set_collective_timeout)
// whenever that is set.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_COMM_ASYNCWATCH_H
#define ZPLAN_RUNTIME_COMM_ASYNCWATCH_H

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace zplan::comm {

class AsyncWatch {
public:
  struct Hooks {
    /// The deadline in seconds (0: none) and the tool that prints the line.
    std::function<std::pair<double, std::string>()> timeout;
    /// Empty while the communicator is healthy; else what went wrong.
    std::function<std::string()> asyncError;
    /// Prints nothing, ends every rank's process non-zero; in tests it may
    /// return, and the watch then stops.
    std::function<void()> abortAll;
  };

  AsyncWatch(
      int rank, int size, Hooks hooks,
      std::chrono::milliseconds pollEvery = std::chrono::milliseconds(100));
  /// Stops the thread; collectives still pending are forgotten.
  ~AsyncWatch();
  AsyncWatch(const AsyncWatch &) = delete;
  AsyncWatch &operator=(const AsyncWatch &) = delete;

  /// A collective named `name` was issued; `completed` says whether it has
  /// finished (it is called on the watch's thread, and until it has said
  /// yes once). Returns its number, from 1.
  uint64_t issued(std::string name, std::function<bool()> completed);

  /// Collectives issued and not yet seen complete.
  size_t pending();

private:
  using Clock = std::chrono::steady_clock;
  struct Pending {
    uint64_t sequence;
    std::string name;
    std::function<bool()> completed;
    Clock::time_point issuedAt;
  };
  void run();

  const int rank, size;
  Hooks hooks;
  const std::chrono::milliseconds pollEvery;
  std::mutex mutex;
  std::condition_variable changed;
  uint64_t sequence = 0;
  std::deque<Pending> queue;
  /// When the oldest pending collective's predecessor completed.
  Clock::time_point lastCompletion = Clock::now();
  bool stopping = false;
  std::thread thread;
};

} // namespace zplan::comm

#endif // ZPLAN_RUNTIME_COMM_ASYNCWATCH_H
