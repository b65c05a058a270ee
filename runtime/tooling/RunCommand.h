//===- RunCommand.h - zrun PLAN run ---------------------------------------===//
//
// `run` runs one program (by default the infer program) on the inputs the
// user names, one `--input NAME=FILE.npy` each, and writes the outputs they
// ask for. It goes through four phases, each ending in an agreement among
// the ranks (Diagnostics.h): open (the session: plan, backend, memory),
// check (arguments, inputs, outputs), run (`--repeat` times), and finish
// (stage every output file and the trace, then rename them all into place).
//
// Files: a run writes its outputs and its trace all or none. No output may
// be a file the run reads (the plan, the weights, an input) or another
// output, compared as files (device and inode), not as spellings.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_RUNCOMMAND_H
#define ZPLAN_RUNTIME_TOOLING_RUNCOMMAND_H

#include "runtime/comm/Communicator.h"
#include "runtime/tooling/Arguments.h"

namespace zplan::tooling {

/// `zrun PLAN run` on this rank of `communicator`; returns the exit status.
int runPlan(const Arguments &arguments, comm::Communicator &communicator);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_RUNCOMMAND_H
