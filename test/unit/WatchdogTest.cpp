//===- WatchdogTest.cpp - the collective deadline, without MPI ------------===//
//
// comm::Watchdog with hooks that record: a collective past its deadline is
// announced, then ends the job (abortAll) with the ranks that announced; one
// that completes in time does neither; the line names the collective, the
// missing ranks and the wait. test/python/watchdog.test stops real ranks.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Watchdog.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

using namespace zplan::comm;

namespace {

struct Recorded {
  std::atomic<uint64_t> announced{0};
  std::atomic<int> aborted{0};
};

Watchdog::Hooks recording(Recorded &recorded) {
  Watchdog::Hooks hooks;
  hooks.announce = [&](uint64_t sequence) { recorded.announced = sequence; };
  // Ranks 1 and 3 of 4 announced the same wait; rank 2 never did.
  hooks.arrived = [](uint64_t) { return std::vector<int>{1, 3}; };
  hooks.abortAll = [&] { ++recorded.aborted; };
  return hooks;
}

void sleepFor(double seconds) {
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

TEST(Watchdog, ACollectivePastItsDeadlineIsAnnouncedThenEndsTheJob) {
  Recorded recorded;
  Watchdog watchdog(0, 4, recording(recorded));
  watchdog.setTimeout(0.4, "zrun");
  {
    Watchdog::Scope first(watchdog, "barrier"); // collective #1, in time
  }
  watchdog.setContext("program 'p' instruction #7 'all_gather'");
  {
    Watchdog::Scope second(watchdog, "all-gather of 8 B per rank");
    sleepFor(1.0);
  }
  EXPECT_EQ(recorded.announced.load(), 2u);
  EXPECT_EQ(recorded.aborted.load(), 1);
}

TEST(Watchdog, CollectivesInTimeOrWithoutADeadlineEndNothing) {
  Recorded recorded;
  Watchdog watchdog(1, 2, recording(recorded));
  watchdog.setTimeout(0.5, "zplan");
  for (int i = 0; i < 100; ++i)
    Watchdog::Scope quick(watchdog, "all-reduce of 1 f32");
  EXPECT_EQ(recorded.announced.load(), 0u);
  {
    // Past a quarter of the deadline a wait is announced, and that is all.
    Watchdog::Scope slowButInTime(watchdog, "barrier");
    sleepFor(0.3);
  }
  EXPECT_EQ(recorded.announced.load(), 101u);
  Recorded other;
  Watchdog none(0, 2, recording(other));
  {
    Watchdog::Scope long_(none, "barrier"); // no setTimeout: no watchdog
    sleepFor(0.3);
  }
  EXPECT_EQ(other.announced.load(), 0u);
  EXPECT_EQ(recorded.aborted.load() + other.aborted.load(), 0);
}

TEST(Watchdog, TheLineNamesTheCollectiveTheMissingRanksAndTheWait) {
  EXPECT_EQ(Watchdog::timeoutMessage("zrun", 0, 4,
                                     "program 'p' instruction #7 'all_gather'",
                                     12, 3.0, 3.04, std::vector<int>{1, 3}),
            "zrun: error: [rank 0] collective #12, program 'p' instruction "
            "#7 'all_gather', did not complete within --collective-timeout "
            "3.0 s (waited 3.0 s): rank 2 did not arrive; ending every rank");
  EXPECT_EQ(Watchdog::timeoutMessage("zplan", 1, 4, "barrier", 3, 5, 5.1,
                                     std::vector<int>{}),
            "zplan: error: [rank 1] collective #3, barrier, did not complete "
            "within --collective-timeout 5.0 s (waited 5.1 s): ranks 0, 2, 3 "
            "did not arrive; ending every rank");
  EXPECT_NE(
      Watchdog::timeoutMessage("zrun", 0, 2, "barrier", 1, 1, 1, std::nullopt)
          .find("which ranks did not arrive is unknown"),
      std::string::npos);
}

} // namespace
