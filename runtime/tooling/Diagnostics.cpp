//===- Diagnostics.cpp - zrun's one error line, on N ranks ----------------===//

#include "runtime/tooling/Diagnostics.h"

#include "runtime/comm/Agreement.h"

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <unistd.h>

using namespace zplan;
using namespace zplan::tooling;

void zplan::tooling::printError(const std::string &message) {
  std::string line = "zrun: error: " + message + "\n";
  const char *cursor = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t written = ::write(STDERR_FILENO, cursor, left);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return;
    cursor += written;
    left -= static_cast<size_t>(written);
  }
}

std::string zplan::tooling::withRank(const comm::Communicator &communicator,
                                     const std::string &message) {
  if (communicator.size() == 1 || message.rfind("[rank ", 0) == 0)
    return message;
  return "[rank " + std::to_string(communicator.rank()) + "] " + message;
}

/// Prints one line and ends every rank: for errors a rank cannot agree on.
///
/// Every rank runs the same instructions, so a schedule bug or a failed
/// collective usually fails on all of them at once. Ranks other than 0 wait
/// a moment before they print, so that rank 0's abort usually ends them
/// first and the user reads one line, not N; a failure on one rank alone
/// still ends every rank within seconds.
[[noreturn]] void zplan::tooling::abortRun(comm::Communicator &communicator,
                                           const Status &status) {
  if (communicator.rank() != 0)
    std::this_thread::sleep_for(std::chrono::seconds(1));
  printError(withRank(communicator, status.message()));
  communicator.abort(1);
  std::_Exit(1); // abort() does not return; say so to the compiler.
}

bool zplan::tooling::agree(comm::Communicator &communicator,
                           const Status &status) {
  comm::Failures failures;
  if (Status shared = comm::shareFailures(communicator, !status.ok(), failures);
      !shared.ok()) {
    printError(withRank(communicator, shared.message()));
    communicator.abort(1);
  }
  if (failures.count == 0)
    return true;
  if (communicator.rank() == failures.first)
    printError(failures.count == communicator.size()
                   ? status.message()
                   : withRank(communicator, status.message()));
  return false;
}
