//===- InspectCommand.h - zrun PLAN inspect -------------------------------===//
//
// Prints what a plan holds without running it: its header (version, world
// size, arena, weights), its groups, and for each program its bindings and
// one line per instruction. Needs no MPI and reads no weights.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_INSPECTCOMMAND_H
#define ZPLAN_RUNTIME_TOOLING_INSPECTCOMMAND_H

#include "runtime/plan/PlanLoader.h"
#include "runtime/tooling/Arguments.h"

#include <ostream>
#include <string>

namespace zplan::tooling {

/// Writes the summary of `plan` (read from `path`) to `os`; only program
/// `only` when it is not null.
void printInspect(const std::string &path, const plan::Plan &plan,
                  const plan::Program *only, std::ostream &os);

/// `zrun PLAN inspect`: loads and validates the plan, prints it to stdout;
/// returns the exit status.
int runInspect(const Arguments &arguments);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_INSPECTCOMMAND_H
