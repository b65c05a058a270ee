//===- Communicator.h - collectives the executor needs, per backend ------===//
//
// The executor moves parameter groups between ranks through this interface
// only: MPI on CPU (MpiCommunicator), NCCL on CUDA later. Every collective is
// blocking, is called in the same order on every rank (the plan is
// rank-independent, so the order is the plan's), and reports failure as a
// Status whose message names the call, the source line and the rank.
//
// Collectives take the element type of what they move (ElementType.h), so
// that a backend's library can use its own types (MPI datatypes, NCCL's
// ncclDataType_t) and sum in the right arithmetic.
//
// Threading: a communicator is used by one thread at a time. zrun's comm
// thread issues the program's collectives while a run is in progress; the
// main thread issues the rest (barriers, gathering traces and stats) only
// between runs.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_COMM_COMMUNICATOR_H
#define ZPLAN_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/support/ElementType.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zplan::comm {

/// The deadline of a collective when the user sets none (zrun
/// --collective-timeout, zplan.set_collective_timeout), in seconds: long
/// enough for any collective of a healthy job, short of DeepSpeed's 30
/// minutes.
inline constexpr double kDefaultCollectiveTimeout = 300;

class Communicator {
public:
  virtual ~Communicator() = default;

  /// This rank, in [0, size()).
  virtual int rank() const = 0;
  /// The number of ranks.
  virtual int size() const = 0;

  /// Every rank contributes `countPerRank` elements of `type` at `send`;
  /// every rank receives size() * countPerRank elements at `receive`, rank
  /// r's at element r * countPerRank. `send` is either outside `receive`
  /// or exactly this rank's slice of it (in place: the mixed-precision
  /// gather rounds its shard into that slice first). Any element type
  /// (nothing is computed).
  virtual Status allGather(const void *send, void *receive,
                           uint64_t countPerRank, ElementType type) = 0;

  /// Sums `send` (size() * countPerRank elements of `type`) over the ranks
  /// and leaves rank r the sum of elements [r * countPerRank, (r + 1) *
  /// countPerRank) at `receive`. At least f32, f64, i32, i64 and bf16 (each
  /// addition rounded to bf16); another type the communicator cannot sum
  /// is an error naming it.
  virtual Status reduceScatter(const void *send, void *receive,
                               uint64_t countPerRank, ElementType type) = 0;

  /// Sums `count` elements of `type` at `data` over the ranks, in place
  /// (types as reduceScatter()).
  virtual Status allReduce(void *data, uint64_t count, ElementType type) = 0;
  /// allReduce() of f32 values (the flags and counters the CLI agrees on).
  Status allReduce(float *data, uint64_t count) {
    return allReduce(data, count, ElementType::F32);
  }

  /// Copies `bytes` bytes at `data` on rank `root` to `data` on every rank.
  virtual Status broadcast(void *data, uint64_t bytes, int root) = 0;

  virtual Status barrier() = 0;

  /// Collects every rank's `text` on rank 0, in rank order (`all` is left
  /// empty on the other ranks). For traces and reports, not for tensors.
  virtual Status gatherText(std::string_view text,
                            std::vector<std::string> &all) = 0;

  /// Ends every rank's process with `code`, from any rank, within seconds;
  /// the way out when a rank fails while the others may be blocked in a
  /// collective.
  [[noreturn]] virtual void abort(int code) = 0;

  /// The deadline of every collective from now on, in seconds (0: none).
  /// A collective that has not completed when it passes ends the job: this
  /// rank prints one line, "`tool`: error: ...", naming the collective (its
  /// context below), the ranks that had not arrived and how long it
  /// waited, and aborts every rank. A communicator without a watchdog
  /// ignores it.
  virtual void setCollectiveTimeout(double seconds, std::string tool) {
    (void)seconds;
    (void)tool;
  }
  /// The deadline setCollectiveTimeout() set, and its tool; (0, "zrun")
  /// for a communicator without a watchdog. A communicator layered on this
  /// one (NCCL's, which watches its own kernels) follows it.
  virtual std::pair<double, std::string> collectiveTimeout() const {
    return {0.0, "zrun"};
  }
  /// What the collectives issued from now on are for, for that message
  /// ("program 'train_micro_step' instruction #12 'all_gather' (group 3)");
  /// empty: the collective's own name alone.
  virtual void setCollectiveContext(std::string context) { (void)context; }
};

/// Names the collectives issued during its lifetime for the watchdog's
/// line (Communicator::setCollectiveContext), and clears the name after.
class CollectiveContext {
public:
  CollectiveContext(Communicator &communicator, std::string text)
      : communicator(communicator) {
    communicator.setCollectiveContext(std::move(text));
  }
  ~CollectiveContext() { communicator.setCollectiveContext(""); }
  CollectiveContext(const CollectiveContext &) = delete;
  CollectiveContext &operator=(const CollectiveContext &) = delete;

private:
  Communicator &communicator;
};

} // namespace zplan::comm

#endif // ZPLAN_RUNTIME_COMM_COMMUNICATOR_H
