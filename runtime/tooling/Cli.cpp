//===- Cli.cpp - zrun's command line --------------------------------------===//
//
// Chooses how a command reports: `inspect`, `export` and usage errors need
// no MPI, unless mpirun launched this process; `run` starts MPI and goes
// through the ranks' agreement (Diagnostics.h) even for a usage error, so
// that N ranks print one line. `export` reads every rank's checkpoint file
// itself: launched on more than one rank it refuses, once, rather than
// writing one model N times.
//
//===----------------------------------------------------------------------===//

#include "runtime/tooling/Cli.h"

#include "runtime/comm/Launcher.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/cpu/BlasCore.h"
#include "runtime/generate/GenerateOptions.h"
#include "runtime/tooling/Arguments.h"
#include "runtime/tooling/Diagnostics.h"
#include "runtime/tooling/ExportCommand.h"
#include "runtime/tooling/GenerateCommand.h"
#include "runtime/tooling/InspectCommand.h"
#include "runtime/tooling/RunCommand.h"
#include "runtime/tooling/TrainCommand.h"
#include "runtime/train/TrainOptions.h"

#include <cstdlib>
#include <iostream>
#include <memory>
#include <new>

using namespace zplan;
using namespace zplan::tooling;

/// The command, on the ranks MPI started, once they agree that the
/// arguments parsed.
static int runCommand(const Arguments &arguments, const Status &parsed,
                      comm::MpiCommunicator &communicator) {
  int exitCode = 1;
  if (agree(communicator, parsed)) {
    if (arguments.command == "train")
      exitCode = trainPlan(arguments, communicator);
    else if (arguments.command == "gradients")
      exitCode = writeGradients(arguments, communicator);
    else if (arguments.command == "generate")
      exitCode = generateTokens(arguments, communicator);
    else if (arguments.command == "export") {
      Status single =
          communicator.size() == 1
              ? Status::success()
              : failure("'export' runs as one process (it reads every "
                        "rank's checkpoint file); run it without mpirun, "
                        "not on ",
                        communicator.size(), " ranks");
      if (agree(communicator, single))
        exitCode = exportPlan(arguments);
    } else
      exitCode = runPlan(arguments, communicator);
  }
  return exitCode;
}

int zplan::zrunMain(int argc, char **argv) {
  // First of all, before MPI or any thread: OpenBLAS reads its core type
  // only when it loads (runtime/cpu/BlasCore.h).
  cpu::runWithBetterBlasCore(argv);
  // A train plan's own defaults (zcc --ds-config) join the words as flags
  // before they are parsed, and checked as if typed; a flag given wins.
  std::vector<std::string> planDefaults;
  std::vector<std::string> words = withPlanTrainDefaults(
      std::vector<std::string>(argv + 1, argv + argc), planDefaults);
  std::vector<char *> wordPointers = {argv[0]};
  for (std::string &word : words)
    wordPointers.push_back(word.data());
  Arguments arguments;
  Status parsed = parseArguments(static_cast<int>(wordPointers.size()),
                                 wordPointers.data(), arguments);
  arguments.planDefaults = planDefaults;
  if (arguments.help) {
    std::cout << kUsage << train::kTrainUsage << "generate:\n"
              << generate::kGenerateUsage << "\nBLAS: OpenBLAS's "
              << cpu::blasCoreName()
              << " kernels (OPENBLAS_CORETYPE chooses others); f32 GEMMs: "
              << cpu::f32GemmName()
              << " kernel (ZPLAN_GEMM=openblas: OpenBLAS's)\n";
    return 0;
  }
  // Only `run` starts MPI: a usage error outside it, or inspect, needs none,
  // unless mpirun launched this process. Then a rank that exits non-zero
  // gets mpirun to kill the others, perhaps before the one chosen to print
  // has printed: agree through MPI, as `run` does, so that the line is
  // printed before any rank exits.
  bool launchedByMpirun = comm::launchedRank().launcher != nullptr;
  bool needsMpi = arguments.command == "run" || arguments.command == "train" ||
                  arguments.command == "gradients" ||
                  arguments.command == "generate";
  if (!parsed.ok() && !needsMpi && !launchedByMpirun) {
    printError(parsed.message());
    return 1;
  }
  if (parsed.ok() && arguments.command == "inspect")
    return runInspect(arguments);
  if (parsed.ok() && arguments.command == "export" && !launchedByMpirun)
    return exportPlan(arguments);

  std::unique_ptr<comm::MpiCommunicator> communicator;
  if (Status status = comm::MpiCommunicator::create(&argc, &argv, communicator);
      !status.ok()) {
    printError("cannot start MPI: " + status.message());
    return 1;
  }
  // From the first collective on, the agreement on the arguments included:
  // a rank that never arrives ends the job instead of hanging it.
  communicator->setCollectiveTimeout(arguments.collectiveTimeout, "zrun");
  // Usage errors go through agree() too, so that N ranks print one line.
  // A host allocation that fails (a memory limit: ulimit -v, a cgroup) is
  // an error line, not an abort. The other ranks may wait in a collective
  // this rank will never join: it exits at once, and mpirun ends them.
  int exitCode = 1;
  try {
    exitCode = runCommand(arguments, parsed, *communicator);
  } catch (const std::bad_alloc &) {
    printError("out of host memory: an allocation failed (a memory limit, "
               "or more than the machine has; zrun --stats and zcc --dump "
               "memory show what each rank holds)");
    std::_Exit(1);
  }
  communicator.reset(); // MPI_Finalize, after the executor's thread ended.
  return exitCode;
}
