//===- Cli.h - zrun's command line ----------------------------------------===//
//
// The whole of zrun behind one function, so that tools/zrun/zrun.cpp stays a
// thin main (DESIGN.md, "Command line"):
//
//   mpirun -np N zrun PLAN run --input NAME=FILE.npy ...
//       [--output NAME=FILE.npy ...] [--program NAME] [--check]
//       [--trace FILE.json] [--repeat K] [--stats] [--threads T]
//   zrun PLAN inspect [--program NAME]
//
// `run` checks everything it can before any work (the plan, its world size
// against the launcher's, inputs and outputs against the program's
// bindings, a kernel for every op) and fails with one `zrun: error: ...`
// line and a non-zero exit on every rank; no output file is written. An
// error during a run (a --check finding, a failed collective) prints one
// line on the failing rank and aborts every rank. Outputs are written by
// rank 0, complete or not at all.
//
// `inspect` needs no MPI: it prints the plan's header, groups and program,
// one line per instruction.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CLI_H
#define ZPLAN_RUNTIME_CLI_H

namespace zplan {

/// Runs zrun with `argv`; returns the process exit status.
int zrunMain(int argc, char **argv);

} // namespace zplan

#endif // ZPLAN_RUNTIME_CLI_H
