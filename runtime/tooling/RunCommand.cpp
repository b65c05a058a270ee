//===- RunCommand.cpp - zrun PLAN run -------------------------------------===//

#include "runtime/tooling/RunCommand.h"

#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/session/Session.h"
#include "runtime/tooling/Diagnostics.h"
#include "runtime/tooling/Files.h"
#include "runtime/tooling/Npy.h"
#include "runtime/tooling/ProgramInputs.h"
#include "runtime/tooling/Stats.h"
#include "runtime/tooling/TraceFile.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

using namespace zplan;
using namespace zplan::tooling;

namespace {

/// One rank's state for `run`, built phase by phase.
struct Run {
  Run(const Arguments &arguments, comm::Communicator &communicator)
      : arguments(arguments), communicator(communicator) {}

  const Arguments &arguments;
  comm::Communicator &communicator;
  std::unique_ptr<session::Session> session;
  const plan::Program *program = nullptr;
  /// Input arrays, in the program's input order.
  std::vector<npy::Array> inputs;
  /// Rank 0: the outputs and the trace, staged until all are written.
  StagedFiles staged;
};

//===----------------------------------------------------------------------===//
// Open and check
//===----------------------------------------------------------------------===//

Status openRun(Run &run) {
  const Arguments &arguments = run.arguments;
  session::SessionOptions options;
  options.backend = arguments.backend;
  options.check = arguments.check;
  options.threads = arguments.threads;
  options.offloadDir = arguments.offloadDir;
  options.nvmeIo = arguments.nvmeIo;
  options.trace = !arguments.tracePath.empty();
  return session::Session::open(arguments.planPath, run.communicator, options,
                                run.session);
}

/// The files the run reads (the plan, its weights, the inputs) and writes
/// (the outputs, the trace).
Status checkFiles(const Run &run) {
  const Arguments &arguments = run.arguments;
  const plan::Plan &plan = run.session->plan();
  std::vector<NamedFile> read = {{"the plan file", arguments.planPath}};
  if (!plan.weights_file().empty())
    read.push_back(
        {"the weights file", plan::weightsPath(arguments.planPath, plan)});
  for (const FileBinding &input : arguments.inputs)
    read.push_back({"input " + inQuotes(input.name), input.path});
  std::vector<NamedFile> written;
  for (const FileBinding &output : arguments.outputs)
    written.push_back({"output " + inQuotes(output.name), output.path});
  if (!arguments.tracePath.empty())
    written.push_back({"the trace", arguments.tracePath});
  return checkOverwritesNothing(read, written);
}

Status checkRun(Run &run) {
  const Arguments &arguments = run.arguments;
  const plan::Plan &plan = run.session->plan();
  ZR_RETURN_IF_ERROR(plan::selectProgram(plan, arguments.program, run.program));
  const plan::Program &program = *run.program;
  ZR_RETURN_IF_ERROR(checkInputNames(program, arguments.inputs));
  for (const FileBinding &output : arguments.outputs)
    if (!plan::findBinding(program.outputs(), output.name))
      return failure("--output ", inQuotes(output.name), " names no output ",
                     "of program ", inQuotes(program.name()),
                     " (its outputs: ", namesOf(program.outputs()), ")");
  ZR_RETURN_IF_ERROR(checkFiles(run));
  ZR_RETURN_IF_ERROR(
      readProgramInputs(plan, program, arguments.inputs, run.inputs));
  ZR_RETURN_IF_ERROR(
      run.session->checkRun(program, asProgramInputs(program, run.inputs)));
  for (const FileBinding &output : arguments.outputs) {
    const plan::Buffer &buffer = plan::bufferOf(
        plan, plan::findBinding(program.outputs(), output.name)->buffer());
    if (npy::descrOf(buffer.dtype()).empty())
      return failure("program output ", inQuotes(output.name), " is ",
                     plan::typeName(buffer.dtype()),
                     ", which a .npy file cannot hold");
  }
  // Only rank 0 writes files; only it checks where they go.
  if (run.communicator.rank() == 0) {
    for (const FileBinding &output : arguments.outputs)
      ZR_RETURN_IF_ERROR(
          checkWritable(output.path, "output " + inQuotes(output.name)));
    if (!arguments.tracePath.empty())
      ZR_RETURN_IF_ERROR(checkWritable(arguments.tracePath, "the trace"));
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Finish
//===----------------------------------------------------------------------===//

/// Rank 0: stages every requested output.
Status stageOutputs(Run &run) {
  const plan::Plan &plan = run.session->plan();
  for (const FileBinding &output : run.arguments.outputs) {
    // checkRun() made sure every --output names one.
    const plan::Binding &binding =
        *plan::findBinding(run.program->outputs(), output.name);
    const plan::Buffer &buffer = plan::bufferOf(plan, binding.buffer());
    std::vector<uint8_t> values;
    ZR_RETURN_IF_ERROR(run.session->readOutput(binding, values));
    std::string encoded;
    if (Status status = npy::encodeNpy(buffer.dtype(), plan::shapeOf(buffer),
                                       values.data(), values.size(), encoded);
        !status.ok())
      return failure("output ", inQuotes(output.name), ": ", status.message());
    ZR_RETURN_IF_ERROR(run.staged.stage(output.path, encoded,
                                        "output " + inQuotes(output.name) +
                                            " to " + inQuotes(output.path)));
  }
  return Status::success();
}

/// Writes every file of the run, or none: a failure at any step drops
/// what was staged (StagedFiles' destructor) before it reaches its path.
bool finishRun(Run &run) {
  comm::Communicator &communicator = run.communicator;
  bool rankZero = communicator.rank() == 0;
  if (!agree(communicator, rankZero ? stageOutputs(run) : Status::success()))
    return false;
  if (!run.arguments.tracePath.empty() &&
      !agree(communicator, stageTrace(communicator, run.session->traceEvents(),
                                      run.arguments.tracePath, run.staged)))
    return false;
  return agree(communicator,
               rankZero ? run.staged.commitAll() : Status::success());
}

} // namespace

int zplan::tooling::runPlan(const Arguments &arguments,
                            comm::Communicator &communicator) {
  Run run(arguments, communicator);
  if (!agree(communicator, openRun(run)))
    return 1;
  if (!agree(communicator, checkRun(run)))
    return 1;

  std::vector<session::ProgramInput> inputs =
      asProgramInputs(*run.program, run.inputs);
  if (Status status = communicator.barrier(); !status.ok())
    abortRun(communicator, status);
  double lastSeconds = 0;
  for (int64_t repetition = 0; repetition < arguments.repeat; ++repetition) {
    if (repetition > 0)
      if (Status status = communicator.barrier(); !status.ok())
        abortRun(communicator, status);
    auto start = std::chrono::steady_clock::now();
    if (Status status = run.session->run(*run.program, inputs); !status.ok())
      abortRun(communicator, status);
    lastSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }

  if (!finishRun(run))
    return 1;
  if (arguments.repeatGiven && communicator.rank() == 0) {
    char line[64];
    std::snprintf(line, sizeof(line), "zrun: run time %.9f s\n", lastSeconds);
    std::cout << line << std::flush;
  }
  if (arguments.stats && !printStats(communicator, run.session->rankMemory()))
    return 1;
  return 0;
}
