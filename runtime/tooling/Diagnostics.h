//===- Diagnostics.h - zrun's one error line, on N ranks ------------------===//
//
// Every zrun failure the user sees is one line, `zrun: error: MESSAGE`, on
// stderr (DESIGN.md, "Command line"). mpirun merges the ranks' stderr, so the
// line is written with one write() and cannot interleave with another
// rank's.
//
// A command goes through phases (check, load, run, finish). A failure in a
// phase before or after the runs is collected on every rank, the ranks
// agree that one of them failed, the lowest failing rank prints its line,
// and every rank exits with status 1: no rank is left waiting and the
// message is not repeated N times (agree()). During the runs a rank cannot
// wait for the others to agree (they may be blocked in a collective it will
// never join), so an error there prints one line and aborts every rank
// (abortRun()).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_DIAGNOSTICS_H
#define ZPLAN_RUNTIME_TOOLING_DIAGNOSTICS_H

#include "runtime/comm/Communicator.h"
#include "runtime/support/Status.h"

#include <string>

namespace zplan::tooling {

/// Prints `zrun: error: MESSAGE` as one write.
void printError(const std::string &message);

/// Collective: every rank passes its status; true when all succeeded.
/// Otherwise the lowest failing rank prints its message (naming the rank
/// when not every rank failed) and every rank gets false.
bool agree(comm::Communicator &communicator, const Status &status);

/// "[rank 2] message" when there are several ranks.
std::string withRank(const comm::Communicator &communicator,
                     const std::string &message);

/// Prints `status` once (rank 0 first) and aborts every rank: for failures
/// while ranks may be blocked in a collective, where they cannot agree.
[[noreturn]] void abortRun(comm::Communicator &communicator,
                           const Status &status);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_DIAGNOSTICS_H
