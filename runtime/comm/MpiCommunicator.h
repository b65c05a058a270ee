//===- MpiCommunicator.h - Communicator over Open MPI ---------------------===//
//
// The CPU communicator: MPI_COMM_WORLD, one process per rank. The executor's
// comm thread, not the main thread, issues the collectives of a run; the two
// never call MPI at the same time (see Communicator.h). MPI is initialized
// with MPI_THREAD_MULTIPLE where the library provides it, for the watchdog
// (Watchdog.h), which announces a long wait to the other ranks while the
// comm thread waits in the collective; with MPI_THREAD_SERIALIZED it
// still ends a job past the deadline, without naming the missing ranks.
// Errors are returned, not fatal
// (MPI_ERRORS_RETURN): every call goes through ZR_MPI_CHECK, which turns a
// failure into a Status naming the call, file:line and rank, so that zrun
// prints one line and aborts every rank.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_COMM_MPICOMMUNICATOR_H
#define ZPLAN_RUNTIME_COMM_MPICOMMUNICATOR_H

#include "runtime/comm/Communicator.h"
#include "runtime/comm/Watchdog.h"

#include <mpi.h>

#include <deque>
#include <memory>

namespace zplan::comm {

class MpiCommunicator final : public Communicator {
public:
  /// Initializes MPI (once per process) and returns the world communicator.
  /// Fails when MPI cannot start or lacks MPI_THREAD_SERIALIZED.
  static Status create(int *argc, char ***argv,
                       std::unique_ptr<MpiCommunicator> &out);

  MpiCommunicator(const MpiCommunicator &) = delete;
  MpiCommunicator &operator=(const MpiCommunicator &) = delete;
  /// Finalizes MPI.
  ~MpiCommunicator() override;

  int rank() const override { return rankIndex; }
  int size() const override { return rankCount; }
  Status allGather(const void *send, void *receive, uint64_t countPerRank,
                   ElementType type) override;
  Status reduceScatter(const void *send, void *receive, uint64_t countPerRank,
                       ElementType type) override;
  using Communicator::allReduce;
  Status allReduce(void *data, uint64_t count, ElementType type) override;
  Status broadcast(void *data, uint64_t bytes, int root) override;
  Status barrier() override;
  Status gatherText(std::string_view text,
                    std::vector<std::string> &all) override;
  /// MPI_Abort(MPI_COMM_WORLD, code).
  [[noreturn]] void abort(int code) override;
  void setCollectiveTimeout(double seconds, std::string tool) override;
  void setCollectiveContext(std::string context) override;
  std::pair<double, std::string> collectiveTimeout() const override {
    return watchdog->timeoutSetting();
  }

private:
  MpiCommunicator(int rank, int size, bool threadMultiple);
  /// Point to point on `notices`: the watchdog's announcements.
  void announce(uint64_t sequence);
  std::vector<int> arrived(uint64_t sequence);

  int rankIndex;
  int rankCount;
  bool threadMultiple;
  /// MPI_COMM_WORLD duplicated, so that announcements never match a
  /// collective's messages.
  MPI_Comm notices = MPI_COMM_NULL;
  /// Announced sequence numbers: each send's buffer lives until the end.
  std::deque<uint64_t> announced;
  /// The latest wait each rank announced.
  std::vector<uint64_t> waiting;
  std::unique_ptr<Watchdog> watchdog;
};

} // namespace zplan::comm

#endif // ZPLAN_RUNTIME_COMM_MPICOMMUNICATOR_H
