//===- AsyncWatchTest.cpp - the deadline of enqueued collectives ----------===//
//
// comm::AsyncWatch with completion checks and hooks the test controls (the
// NCCL communicator's are events and ncclCommAbort, which need a GPU): a
// collective that never completes ends the job past the deadline and is
// named; ones that complete leave in order and end nothing; the deadline
// counts from the predecessor's completion and is read at every poll; an
// asynchronous error ends the job at once.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/AsyncWatch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

using namespace zplan::comm;
using namespace std::chrono_literals;

namespace {

struct Recorded {
  std::atomic<double> timeout{0};
  std::atomic<int> aborted{0};
  std::atomic<bool> failed{false};
};

AsyncWatch::Hooks recording(Recorded &recorded) {
  AsyncWatch::Hooks hooks;
  hooks.timeout = [&] {
    return std::pair<double, std::string>(recorded.timeout, "zrun");
  };
  hooks.asyncError = [&]() -> std::string {
    return recorded.failed ? "remote process exited or there was a network "
                             "error"
                           : "";
  };
  hooks.abortAll = [&] { ++recorded.aborted; };
  return hooks;
}

/// A collective whose completion the test sets.
std::pair<std::shared_ptr<std::atomic<bool>>, std::function<bool()>>
controlled() {
  auto done = std::make_shared<std::atomic<bool>>(false);
  return {done, [done] { return done->load(); }};
}

/// Waits up to `limit` for `condition`; the tests assert behaviour, never
/// times, so the limit is generous.
template <typename F> bool eventually(F condition, double limit = 10.0) {
  auto end =
      std::chrono::steady_clock::now() + std::chrono::duration<double>(limit);
  while (std::chrono::steady_clock::now() < end) {
    if (condition())
      return true;
    std::this_thread::sleep_for(5ms);
  }
  return condition();
}

TEST(AsyncWatch, ACollectiveThatNeverCompletesEndsTheJob) {
  Recorded recorded;
  AsyncWatch watch(1, 4, recording(recorded), 10ms);
  recorded.timeout = 0.3;
  auto [firstDone, first] = controlled();
  auto [secondDone, second] = controlled();
  EXPECT_EQ(watch.issued("program 'p' instruction #3 'all_gather'", first), 1u);
  EXPECT_EQ(watch.issued("program 'p' instruction #9 'reduce_scatter'", second),
            2u);
  *firstDone = true;
  EXPECT_TRUE(eventually([&] { return recorded.aborted > 0; }));
  EXPECT_EQ(watch.pending(), 1u); // the second, which never completed
  EXPECT_EQ(recorded.aborted.load(), 1);
}

TEST(AsyncWatch, CompletedCollectivesLeaveInOrderAndEndNothing) {
  Recorded recorded;
  AsyncWatch watch(0, 2, recording(recorded), 10ms);
  recorded.timeout = 0.5;
  for (int i = 0; i < 50; ++i)
    watch.issued("all-gather", [] { return true; });
  EXPECT_TRUE(eventually([&] { return watch.pending() == 0; }));
  // The first is slow, the second done already: it waits behind the first.
  auto [slowDone, slow] = controlled();
  watch.issued("slow", slow);
  watch.issued("quick", [] { return true; });
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(watch.pending(), 2u);
  *slowDone = true;
  EXPECT_TRUE(eventually([&] { return watch.pending() == 0; }));
  EXPECT_EQ(recorded.aborted.load(), 0);
}

TEST(AsyncWatch, TheDeadlineCountsFromThePredecessorsCompletion) {
  // Issued together, completing one after another, each within the
  // deadline of the one before: a stream busy for longer than the deadline
  // in all is no hang.
  Recorded recorded;
  AsyncWatch watch(0, 2, recording(recorded), 10ms);
  recorded.timeout = 1.0;
  std::vector<std::shared_ptr<std::atomic<bool>>> done;
  for (int i = 0; i < 4; ++i) {
    auto [flag, completed] = controlled();
    done.push_back(flag);
    watch.issued("collective " + std::to_string(i), completed);
  }
  for (auto &flag : done) {
    std::this_thread::sleep_for(300ms);
    *flag = true;
  }
  EXPECT_TRUE(eventually([&] { return watch.pending() == 0; }));
  EXPECT_EQ(recorded.aborted.load(), 0);
}

TEST(AsyncWatch, AnAsynchronousErrorEndsTheJobAtOnce) {
  Recorded recorded;
  AsyncWatch watch(0, 2, recording(recorded), 10ms);
  recorded.timeout = 600;
  auto [done, completed] = controlled();
  watch.issued("all-gather", completed);
  recorded.failed = true;
  EXPECT_TRUE(eventually([&] { return recorded.aborted > 0; }));
}

TEST(AsyncWatch, WithoutATimeoutAStuckCollectiveEndsNothing) {
  Recorded recorded;
  AsyncWatch watch(0, 2, recording(recorded), 10ms);
  auto [done, completed] = controlled();
  watch.issued("all-gather", completed);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(recorded.aborted.load(), 0);
  EXPECT_EQ(watch.pending(), 1u);
  // A deadline set later applies to the collective already waiting.
  recorded.timeout = 0.1;
  EXPECT_TRUE(eventually([&] { return recorded.aborted > 0; }));
}

} // namespace
