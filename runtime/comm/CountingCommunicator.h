//===- CountingCommunicator.h - a communicator that counts what it gathers ===//
//
// `zrun generate --stats` reports the bytes gathered per decode step as
// counted during the run, beside what the plan's decode program declares,
// so that a claim like "0 bytes per token with everything resident" is
// measured, not only planned. This wraps the rank's communicator, forwards
// every call, and adds up the bytes every all-gather delivers to this rank
// (the whole gathered buffer, its own shard included, as the plan's
// reports count them).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_COMM_COUNTINGCOMMUNICATOR_H
#define ZPLAN_RUNTIME_COMM_COUNTINGCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <atomic>
#include <cstdlib>
#include <utility>

namespace zplan::comm {

class CountingCommunicator final : public comm::Communicator {
public:
  explicit CountingCommunicator(comm::Communicator &inner) : inner(inner) {}

  /// Bytes all-gathered since construction or the last reset().
  uint64_t gatheredBytes() const { return gathered.load(); }
  void reset() { gathered.store(0); }

  int rank() const override { return inner.rank(); }
  int size() const override { return inner.size(); }
  Status allGather(const void *send, void *receive, uint64_t countPerRank,
                   ElementType type) override {
    // The comm thread counts; the main thread reads between runs.
    gathered.fetch_add(countPerRank * static_cast<uint64_t>(size()) *
                       elementTypeInfo(type).bytes);
    return inner.allGather(send, receive, countPerRank, type);
  }
  Status reduceScatter(const void *send, void *receive, uint64_t countPerRank,
                       ElementType type) override {
    return inner.reduceScatter(send, receive, countPerRank, type);
  }
  Status allReduce(void *data, uint64_t count, ElementType type) override {
    return inner.allReduce(data, count, type);
  }
  using comm::Communicator::allReduce;
  Status broadcast(void *data, uint64_t bytes, int root) override {
    return inner.broadcast(data, bytes, root);
  }
  Status barrier() override { return inner.barrier(); }
  Status gatherText(std::string_view text,
                    std::vector<std::string> &all) override {
    return inner.gatherText(text, all);
  }
  [[noreturn]] void abort(int code) override {
    inner.abort(code);
    std::_Exit(code); // abort() does not return; say so to the compiler.
  }
  void setCollectiveTimeout(double seconds, std::string tool) override {
    inner.setCollectiveTimeout(seconds, std::move(tool));
  }
  std::pair<double, std::string> collectiveTimeout() const override {
    return inner.collectiveTimeout();
  }
  void setCollectiveContext(std::string context) override {
    inner.setCollectiveContext(std::move(context));
  }

private:
  comm::Communicator &inner;
  std::atomic<uint64_t> gathered{0};
};

} // namespace zplan::comm

#endif // ZPLAN_RUNTIME_COMM_COUNTINGCOMMUNICATOR_H
