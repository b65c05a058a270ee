//===- Watchdog.h - a deadline for every collective
//------------------------===//
//
// A rank that stops (SIGSTOP, a debugger, a hung device) or never reaches a
// collective leaves every other rank blocked in it forever: nothing in MPI
// times out. The watchdog is a thread beside the one that issues the
// collectives. Each collective runs inside a Scope; when one has run for
// `noticeAfter` (a second, or a quarter of the deadline if that is less) the
// watchdog announces to the other ranks that this rank is waiting in
// collective number k (the ranks issue the same collectives in the same
// order, so the numbers agree); when it reaches the deadline, the watchdog
// collects the other ranks' announcements, prints one line naming the
// collective, the ranks that had not arrived (the ones that announced no
// wait in k) and how long it waited, and ends the job. Every waiting rank
// does the same, so every live rank exits non-zero within the deadline and
// a second or two.
//
// The watchdog only sleeps on a condition variable: it costs nothing while
// collectives complete. How the communicator sends and receives the
// announcements and ends the job are its hooks (MpiCommunicator: point to
// point on a duplicate of MPI_COMM_WORLD, and MPI_Abort).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_COMM_WATCHDOG_H
#define ZPLAN_RUNTIME_COMM_WATCHDOG_H

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace zplan::comm {

class Watchdog {
public:
  struct Hooks {
    /// Tells every other rank that this one waits in collective `sequence`.
    /// Null: announcements are not possible (the line then says so).
    std::function<void(uint64_t sequence)> announce;
    /// The ranks that announced a wait in collective `sequence`.
    std::function<std::vector<int>(uint64_t sequence)> arrived;
    /// Ends every rank's process with exit code 1; does not return.
    std::function<void()> abortAll;
  };

  Watchdog(int rank, int size, Hooks hooks);
  /// Stops the thread.
  ~Watchdog();
  Watchdog(const Watchdog &) = delete;
  Watchdog &operator=(const Watchdog &) = delete;

  /// The deadline (0: none) and the tool that prints the line ("zrun").
  void setTimeout(double seconds, std::string tool);
  void setContext(std::string text);
  /// What setTimeout() set.
  std::pair<double, std::string> timeoutSetting();

  /// One collective, from construction to destruction.
  class Scope {
  public:
    Scope(Watchdog &watchdog, std::string name);
    ~Scope();
    Scope(const Scope &) = delete;
    Scope &operator=(const Scope &) = delete;

  private:
    Watchdog &watchdog;
  };

  /// The line printed when collective `what` (number `sequence`) has waited
  /// `waited` seconds past a deadline of `timeout`, with `arrived` the
  /// ranks known to wait in it too (nullopt: unknown).
  static std::string
  timeoutMessage(const std::string &tool, int rank, int size,
                 const std::string &what, uint64_t sequence, double timeout,
                 double waited, const std::optional<std::vector<int>> &arrived);

private:
  void run();

  const int rank, size;
  Hooks hooks;
  std::mutex mutex;
  std::condition_variable changed;
  double timeout = 0;
  std::string tool = "zrun";
  std::string context;
  /// The collective in progress: its number (from 1) and name, and when it
  /// started; 0 when none is.
  uint64_t sequence = 0, active = 0;
  std::string activeName;
  std::chrono::steady_clock::time_point started;
  bool stopping = false;
  std::thread thread;
};

} // namespace zplan::comm

#endif // ZPLAN_RUNTIME_COMM_WATCHDOG_H
