//===- TraceFile.h - zrun --trace: every rank's events in one file --------===//
//
// Each rank records its own events (runtime/exec/Trace.h); the file the user
// opens in chrome://tracing or ui.perfetto.dev holds all ranks', gathered to
// rank 0 as JSON text, staged with the command's other outputs so that it
// appears only when all of them do.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_TRACEFILE_H
#define ZPLAN_RUNTIME_TOOLING_TRACEFILE_H

#include "runtime/comm/Communicator.h"
#include "runtime/tooling/Files.h"

#include <string>

namespace zplan::tooling {

/// Collective: gathers every rank's `events` (Session::traceEvents()) to
/// rank 0, which stages the trace file at `path` in `staged`.
Status stageTrace(comm::Communicator &communicator, const std::string &events,
                  const std::string &path, StagedFiles &staged);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_TRACEFILE_H
