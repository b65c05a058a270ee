//===- Progress.h - what `zrun train` prints while it trains -------------===//
//
// Rank 0 prints one line per logged optimizer step,
//   step 12/100  loss 3.4521  lr 3.00e-04  12,345 tok/s  ETA 1m05s
// and a summary at the end; `--loss-log FILE` gets `step<TAB>loss<TAB>lr`
// per step with %.9g, for scripts and tests to compare runs. Throughput is
// the mean over this invocation (tokens of every rank since it started,
// over the wall time since it started), and the ETA extrapolates it; a
// resumed run counts from its own start. The clock is injected, so that a
// test can fix every number a line prints.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_PROGRESS_H
#define ZPLAN_RUNTIME_TRAIN_PROGRESS_H

#include <cstdint>
#include <functional>
#include <string>

namespace zplan::train {

/// Seconds on a monotonic clock.
using Clock = std::function<double()>;

/// std::chrono::steady_clock, in seconds.
Clock steadyClock();

/// "12,345".
std::string withThousands(uint64_t value);
/// "45s", "1m05s", "2h03m" (rounded to the second).
std::string durationText(double seconds);
/// One `--loss-log` line: "<step>\t<loss %.9g>\t<lr %.9g>\n".
std::string lossLogLine(uint64_t step, double loss, double lr);

class Progress {
public:
  /// A run that trains steps firstStep + 1 .. totalSteps (1-based;
  /// firstStep is the resumed checkpoint's step, 0 for a fresh run); the
  /// clock is read now as the start.
  Progress(uint64_t firstStep, uint64_t totalSteps, Clock clock);

  /// Records optimizer step `step` (1-based, just completed), its loss and
  /// the tokens it consumed over all ranks, and returns its line (no
  /// newline), whether or not the caller prints it.
  std::string stepDone(uint64_t step, double loss, double lr, uint64_t tokens);

  /// "trained steps 1-100 (100 steps): 409,600 tokens in 1m23s,
  /// 4,935 tok/s, final loss 2.1234"; "trained no step" before any.
  std::string summary() const;

private:
  uint64_t firstStep;
  uint64_t totalSteps;
  Clock clock;
  double start;
  uint64_t lastStep;
  uint64_t tokens = 0;
  double lastLoss = 0.0;
  double lastTime;
};

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_PROGRESS_H
