//===- Cli.h - zrun's command line ----------------------------------------===//
//
// The whole of zrun behind one function, so that tools/zrun/zrun.cpp stays a
// thin main (DESIGN.md, "Command line"):
//
//   mpirun -np N zrun PLAN run --input NAME=FILE.npy ...
//       [--output NAME=FILE.npy ...] [--program NAME] [--check]
//       [--trace FILE.json] [--repeat K] [--stats] [--threads T]
//   zrun PLAN inspect [--program NAME]
//   mpirun -np N zrun PLAN generate --prompt P.npy --output T.npy ...
//
// This is the tooling layer above the session (runtime/session), which holds
// no command-line code: Arguments.h parses, each command has its file
// (RunCommand.h, TrainCommand.h -- train and gradients --, GenerateCommand.h,
// InspectCommand.h, ExportCommand.h), Npy.h and Files.h read and write the
// user's files. Every command checks everything it can before any work and
// fails with one `zrun: error: ...` line and a non-zero exit on every rank;
// its outputs appear complete, all of them, or none.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_CLI_H
#define ZPLAN_RUNTIME_TOOLING_CLI_H

namespace zplan {

/// Runs zrun with `argv`; returns the process exit status.
int zrunMain(int argc, char **argv);

} // namespace zplan

#endif // ZPLAN_RUNTIME_TOOLING_CLI_H
