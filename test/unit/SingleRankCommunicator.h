//===- SingleRankCommunicator.h - a world of one rank, without MPI -------===//
//
// The training library's collective calls (checkpoint save and load) are
// tested on one rank without MPI, so that a test can fork a child and kill
// it part-way (MPI forbids forking). With one rank every collective is a
// copy, which this communicator does.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_TEST_UNIT_SINGLERANKCOMMUNICATOR_H
#define ZPLAN_TEST_UNIT_SINGLERANKCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <cstdlib>
#include <cstring>

namespace zplan::testing {

class SingleRankCommunicator final : public comm::Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status allGather(const void *send, void *receive, uint64_t countPerRank,
                   ElementType type) override {
    std::memmove(receive, send, countPerRank * elementTypeInfo(type).bytes);
    return Status::success();
  }
  Status reduceScatter(const void *send, void *receive, uint64_t countPerRank,
                       ElementType type) override {
    std::memmove(receive, send, countPerRank * elementTypeInfo(type).bytes);
    return Status::success();
  }
  using Communicator::allReduce;
  Status allReduce(void *, uint64_t, ElementType) override {
    return Status::success();
  }
  Status broadcast(void *, uint64_t, int) override { return Status::success(); }
  Status barrier() override { return Status::success(); }
  Status gatherText(std::string_view text,
                    std::vector<std::string> &all) override {
    all.assign(1, std::string(text));
    return Status::success();
  }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }
};

} // namespace zplan::testing

#endif // ZPLAN_TEST_UNIT_SINGLERANKCOMMUNICATOR_H
