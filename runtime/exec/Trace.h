//===- Trace.h - Chrome/Perfetto traces of a run (zrun --trace) -----------===//
//
// Each rank records one complete event ("ph": "X") per instruction it runs:
// pid = rank, tid 0 = compute queue, tid 1 = comm queue, name = op, args =
// program, instruction index, run, location and group. Recording only writes
// into space reserved before the run (one buffer per queue, each filled by one
// thread), so tracing adds no allocation and no lock to a run. After the
// runs, zrun gathers every rank's events to rank 0 as JSON text and writes
// one file with the run's other outputs (runtime/tooling/RunCommand.cpp)
// that chrome://tracing and ui.perfetto.dev open.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_EXEC_TRACE_H
#define ZPLAN_RUNTIME_EXEC_TRACE_H

#include "runtime/comm/Communicator.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/support/Status.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace zplan {

class TraceRecorder {
public:
  /// One instruction's execution, in nanoseconds since the origin.
  struct Event {
    uint32_t instruction;
    uint32_t run;
    uint64_t startNs;
    uint64_t endNs;
  };

  /// At most this many events are kept per queue; later ones are dropped
  /// (and counted).
  static constexpr size_t kMaxEventsPerQueue = size_t(1) << 20;

  /// Makes room for one more run of a program of `instructions`
  /// instructions on each queue, so that the run itself allocates nothing;
  /// between runs only.
  void prepareRun(size_t instructions);
  /// Makes now time zero. zrun calls it right after a barrier, so that the
  /// ranks' timelines line up.
  void setOrigin() { origin = std::chrono::steady_clock::now(); }

  /// Nanoseconds since the origin.
  uint64_t now() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(
            std::chrono::steady_clock::now() - origin)
            .count());
  }

  /// Records an event of `queue` (COMPUTE or COMM). Only the thread that
  /// runs that queue may call it, during a run.
  void record(plan::Queue queue, uint32_t instruction, uint32_t run,
              uint64_t startNs, uint64_t endNs) {
    std::vector<Event> &events = queue == plan::COMM ? comm : compute;
    if (events.size() < events.capacity())
      events.push_back({instruction, run, startNs, endNs});
    else
      ++dropped[queue == plan::COMM];
  }

  /// This rank's events as JSON objects separated by ",\n" (no brackets),
  /// with metadata events naming the process ("rank R") and threads.
  std::string eventsJson(const plan::Plan &plan, const plan::Program &program,
                         int rank) const;

  uint64_t droppedEvents() const { return dropped[0] + dropped[1]; }
  /// No event recorded (or dropped) yet.
  bool empty() const {
    return compute.empty() && comm.empty() && droppedEvents() == 0;
  }

private:
  std::chrono::steady_clock::time_point origin =
      std::chrono::steady_clock::now();
  std::vector<Event> compute;
  std::vector<Event> comm;
  uint64_t dropped[2] = {0, 0};
};

} // namespace zplan

#endif // ZPLAN_RUNTIME_EXEC_TRACE_H
