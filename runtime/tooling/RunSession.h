//===- RunSession.h - zrun PLAN run, on one rank
//---------------------------===//
//
// `run` goes through four phases, each ending in an agreement among the
// ranks: check (arguments, plan, inputs, outputs: no memory beyond the plan
// and the inputs), load (weights, arena, executor), run, and finish (stage
// every output file and the trace, then rename them all into place). A
// failure in check, load or finish is collected on every rank, the ranks
// agree that one of them failed, the lowest failing rank prints its one
// line, and every rank exits with status 1: no rank is left waiting and the
// message is not repeated N times. During the runs a rank cannot wait for
// the others to agree (they may be blocked in a collective it will never
// join), so an error there prints one line and aborts every rank.
//
// Files: a run writes its outputs and its trace all or none. No output may
// be a file the run reads (the plan, the weights, an input) or another
// output, compared as files (device and inode), not as spellings.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_RUNSESSION_H
#define ZPLAN_RUNTIME_TOOLING_RUNSESSION_H

#include "runtime/Memory.h"
#include "runtime/comm/Communicator.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/tooling/Arguments.h"
#include "runtime/tooling/Npy.h"

namespace zplan::tooling {

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

/// Reads the .npy file `path` for program input `binding`, checking its
/// shape and element type against the buffer it fills.
Status readInput(const plan::Plan &plan, const plan::Binding &binding,
                 const std::string &path, npy::Array &array);

/// Fails, naming it and the program's inputs, on an `--input` that names no
/// input of `program`.
Status checkInputNames(const plan::Program &program,
                       const std::vector<FileBinding> &inputs);

/// Reads every input of `program` from its `--input` file, in the program's
/// order; fails on a missing one (naming its shape and type) or one not
/// bound to an arena buffer.
Status readProgramInputs(const plan::Plan &plan, const plan::Program &program,
                         const std::vector<FileBinding> &inputs,
                         std::vector<npy::Array> &arrays);

/// Collective: rank 0 prints every rank's `--stats` line (peak RSS, arena,
/// shards, persistent groups, training state; for a plan that generates, its
/// generation state and the bytes held now and at peak); false when the ranks
/// could not gather them (the error is printed).
bool printStats(comm::Communicator &communicator, const RankMemory &memory);

/// `zrun PLAN run` on this rank of `communicator`; returns the exit status.
int runPlan(const Arguments &arguments, comm::Communicator &communicator);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_RUNSESSION_H
