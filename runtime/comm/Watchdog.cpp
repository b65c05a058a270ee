//===- Watchdog.cpp - a deadline for every collective
//----------------------===//
//
// See Watchdog.h. Tests: test/unit/WatchdogTest.cpp (the message), and
// test/python/watchdog.test (a stopped rank under zrun train and generate and
// in a Python loop, on 2 and 4 ranks).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Watchdog.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

using namespace zplan::comm;

Watchdog::Watchdog(int rank, int size, Hooks hooks)
    : rank(rank), size(size), hooks(std::move(hooks)) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  if (thread.joinable())
    thread.join();
}

void Watchdog::setTimeout(double seconds, std::string toolName) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    timeout = seconds;
    tool = std::move(toolName);
    if (timeout > 0 && !thread.joinable())
      thread = std::thread([this] { run(); });
  }
  changed.notify_all();
}

std::pair<double, std::string> Watchdog::timeoutSetting() {
  std::lock_guard<std::mutex> lock(mutex);
  return {timeout, tool};
}

void Watchdog::setContext(std::string text) {
  std::lock_guard<std::mutex> lock(mutex);
  context = std::move(text);
}

Watchdog::Scope::Scope(Watchdog &watchdog, std::string name)
    : watchdog(watchdog) {
  {
    std::lock_guard<std::mutex> lock(watchdog.mutex);
    watchdog.active = ++watchdog.sequence;
    watchdog.activeName = watchdog.context.empty()
                              ? std::move(name)
                              : watchdog.context + " (" + name + ")";
    watchdog.started = std::chrono::steady_clock::now();
  }
  watchdog.changed.notify_all();
}

Watchdog::Scope::~Scope() {
  {
    std::lock_guard<std::mutex> lock(watchdog.mutex);
    watchdog.active = 0;
  }
  watchdog.changed.notify_all();
}

std::string
Watchdog::timeoutMessage(const std::string &tool, int rank, int size,
                         const std::string &what, uint64_t sequence,
                         double timeout, double waited,
                         const std::optional<std::vector<int>> &arrived) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(1);
  os << tool << ": error: [rank " << rank << "] collective #" << sequence
     << ", " << what << ", did not complete within --collective-timeout "
     << timeout << " s (waited " << waited << " s): ";
  if (!arrived) {
    os << "which ranks did not arrive is unknown";
  } else {
    std::vector<int> missing;
    for (int r = 0; r < size; ++r)
      if (r != rank &&
          std::find(arrived->begin(), arrived->end(), r) == arrived->end())
        missing.push_back(r);
    if (missing.empty()) {
      os << "every rank arrived, and it still did not complete";
    } else {
      os << (missing.size() == 1 ? "rank " : "ranks ");
      for (size_t i = 0; i < missing.size(); ++i)
        os << (i ? ", " : "") << missing[i];
      os << " did not arrive";
    }
  }
  os << "; ending every rank";
  return os.str();
}

void Watchdog::run() {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    if (active == 0 || timeout <= 0) {
      changed.wait(lock);
      continue;
    }
    uint64_t watched = active;
    auto deadline = started + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(timeout));
    auto notice =
        started +
        std::chrono::duration_cast<Clock::duration>(
            std::chrono::duration<double>(std::min(1.0, timeout / 4)));
    // Announce this rank's wait once it is a long one.
    if (!changed.wait_until(lock, notice,
                            [&] { return stopping || active != watched; })) {
      if (hooks.announce) {
        lock.unlock();
        hooks.announce(watched);
        lock.lock();
      }
    }
    if (stopping || active != watched)
      continue;
    if (changed.wait_until(lock, deadline,
                           [&] { return stopping || active != watched; }))
      continue;
    // The deadline passed with the same collective still in progress.
    double waited =
        std::chrono::duration<double>(Clock::now() - started).count();
    std::string what = activeName;
    double limit = timeout;
    std::string toolName = tool;
    lock.unlock();
    std::optional<std::vector<int>> arrived;
    if (hooks.announce && hooks.arrived)
      arrived = hooks.arrived(watched);
    std::string line = timeoutMessage(toolName, rank, size, what, watched,
                                      limit, waited, arrived);
    std::fprintf(stderr, "%s\n", line.c_str());
    std::fflush(stderr);
    hooks.abortAll();
    return;
  }
}
