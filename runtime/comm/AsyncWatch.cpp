//===- AsyncWatch.cpp - a deadline for collectives that complete later ----===//
//
// See AsyncWatch.h. Tests: test/unit/AsyncWatchTest.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/AsyncWatch.h"

#include "runtime/comm/Watchdog.h"

#include <algorithm>
#include <cstdio>
#include <optional>

using namespace zplan::comm;

AsyncWatch::AsyncWatch(int rank, int size, Hooks hooks,
                       std::chrono::milliseconds pollEvery)
    : rank(rank), size(size), hooks(std::move(hooks)), pollEvery(pollEvery),
      thread([this] { run(); }) {}

AsyncWatch::~AsyncWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  if (thread.joinable())
    thread.join();
}

uint64_t AsyncWatch::issued(std::string name, std::function<bool()> completed) {
  std::lock_guard<std::mutex> lock(mutex);
  queue.push_back(
      Pending{++sequence, std::move(name), std::move(completed), Clock::now()});
  return sequence;
}

size_t AsyncWatch::pending() {
  std::lock_guard<std::mutex> lock(mutex);
  return queue.size();
}

void AsyncWatch::run() {
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    changed.wait_for(lock, pollEvery, [&] { return stopping; });
    if (stopping)
      break;
    // Completed collectives leave in issue order (one stream runs them).
    // The checks run unlocked: a device query must not hold up the thread
    // that issues the next collective. Only this thread pops.
    while (!queue.empty()) {
      std::function<bool()> completed = queue.front().completed;
      lock.unlock();
      bool done = completed();
      lock.lock();
      if (!done)
        break;
      queue.pop_front();
      lastCompletion = Clock::now();
    }
    lock.unlock();
    std::string error = hooks.asyncError ? hooks.asyncError() : "";
    auto [timeout, tool] =
        hooks.timeout ? hooks.timeout() : std::pair<double, std::string>();
    lock.lock();
    std::string line;
    if (!error.empty()) {
      line = tool + ": error: [rank " + std::to_string(rank) +
             "] the communicator failed: " + error + "; ending every rank";
    } else if (timeout > 0 && !queue.empty()) {
      const Pending &oldest = queue.front();
      double waited =
          std::chrono::duration<double>(
              Clock::now() - std::max(oldest.issuedAt, lastCompletion))
              .count();
      // NCCL does not say which peers a kernel waits for.
      if (waited >= timeout)
        line = Watchdog::timeoutMessage(tool, rank, size, oldest.name,
                                        oldest.sequence, timeout, waited,
                                        std::nullopt);
    }
    if (line.empty())
      continue;
    lock.unlock();
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    hooks.abortAll();
    return;
  }
}
