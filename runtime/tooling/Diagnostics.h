//===- Diagnostics.h - zrun's one error line
//-------------------------------===//
//
// Every zrun failure the user sees is one line, `zrun: error: MESSAGE`, on
// stderr (DESIGN.md, "Command line"). mpirun merges the ranks' stderr, so the
// line is written with one write() and cannot interleave with another
// rank's.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_DIAGNOSTICS_H
#define ZPLAN_RUNTIME_TOOLING_DIAGNOSTICS_H

#include <string>

namespace zplan::tooling {

/// Prints `zrun: error: MESSAGE` as one write.
void printError(const std::string &message);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_DIAGNOSTICS_H
