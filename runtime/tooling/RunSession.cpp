//===- RunSession.cpp - zrun PLAN run, on one rank
//-------------------------===//

#include "runtime/tooling/RunSession.h"

#include "runtime/Executor.h"
#include "runtime/Memory.h"
#include "runtime/Trace.h"
#include "runtime/comm/Agreement.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/session/RankDevice.h"
#include "runtime/tooling/Diagnostics.h"
#include "runtime/tooling/Files.h"
#include "runtime/tooling/Npy.h"
#include "runtime/tooling/PlanQueries.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <sstream>
#include <sys/resource.h>
#include <thread>

using namespace zplan;
using namespace zplan::tooling;

namespace {

/// One rank's state for `run`, built phase by phase.
struct RunSession {
  RunSession(const Arguments &arguments, comm::Communicator &communicator)
      : arguments(arguments), communicator(communicator) {}

  const Arguments &arguments;
  comm::Communicator &communicator;
  /// The backend (--backend) and the executor's collectives.
  std::unique_ptr<RankDevice> device;
  plan::Plan plan;
  const plan::Program *program = nullptr;
  /// Input arrays, in the program's input order.
  std::vector<npy::Array> inputs;
  std::unique_ptr<RankMemory> memory;
  TraceRecorder trace;
  std::unique_ptr<Executor> executor;
  /// Rank 0: the outputs and the trace, staged until all are written.
  StagedFiles staged;
};

} // namespace

std::string zplan::tooling::withRank(const comm::Communicator &communicator,
                                     const std::string &message) {
  if (communicator.size() == 1 || message.rfind("[rank ", 0) == 0)
    return message;
  return "[rank " + std::to_string(communicator.rank()) + "] " + message;
}

/// Prints one line and ends every rank: for errors a rank cannot agree on.
///
/// Every rank runs the same instructions, so a schedule bug or a failed
/// collective usually fails on all of them at once. Ranks other than 0 wait
/// a moment before they print, so that rank 0's abort usually ends them
/// first and the user reads one line, not N; a failure on one rank alone
/// still ends every rank within seconds.
[[noreturn]] void zplan::tooling::abortRun(comm::Communicator &communicator,
                                           const Status &status) {
  if (communicator.rank() != 0)
    std::this_thread::sleep_for(std::chrono::seconds(1));
  printError(withRank(communicator, status.message()));
  communicator.abort(1);
  std::_Exit(1); // abort() does not return; say so to the compiler.
}

namespace {

//===----------------------------------------------------------------------===//
// Phase 1: check
//===----------------------------------------------------------------------===//

/// No file the run writes may be a file it reads, or another file it
/// writes: rename() would replace the input (a run that reads logits.npy
/// and writes logits.npy destroys its own input), and two outputs on one
/// file leave only the last. Compared as files, not as spellings.
Status checkOutputsOverwriteNothing(const Arguments &arguments,
                                    const plan::Plan &plan) {
  struct Named {
    std::string what; // "the plan file", "input 'ids'", "output 'logits'"
    std::string path;
    FileIdentity identity;
  };
  std::vector<Named> read;
  read.push_back({"the plan file", arguments.planPath,
                  FileIdentity::of(arguments.planPath)});
  if (!plan.weights_file().empty()) {
    std::string weights = plan::weightsPath(arguments.planPath, plan);
    read.push_back({"the weights file", weights, FileIdentity::of(weights)});
  }
  for (const FileBinding &input : arguments.inputs)
    read.push_back({"input " + inQuotes(input.name), input.path,
                    FileIdentity::of(input.path)});

  std::vector<Named> written;
  for (const FileBinding &output : arguments.outputs)
    written.push_back({"output " + inQuotes(output.name), output.path,
                       FileIdentity::of(output.path)});
  if (!arguments.tracePath.empty())
    written.push_back({"the trace", arguments.tracePath,
                       FileIdentity::of(arguments.tracePath)});

  for (size_t index = 0; index < written.size(); ++index) {
    const Named &output = written[index];
    for (const Named &input : read)
      if (output.identity.sameAs(input.identity))
        return failure(output.what, " would overwrite ", input.what, ": ",
                       inQuotes(output.path), " is ", inQuotes(input.path));
    for (size_t other = 0; other < index; ++other)
      if (output.identity.sameAs(written[other].identity))
        return failure(output.what, " and ", written[other].what,
                       " are both written to ", inQuotes(output.path),
                       output.path == written[other].path
                           ? ""
                           : " (as " + inQuotes(written[other].path) + ")");
  }
  return Status::success();
}

/// Reads program input `binding` from `path`; refuses a file whose header
/// declares another shape or dtype before reading its data.
} // namespace

Status zplan::tooling::readInput(const plan::Plan &plan,
                                 const plan::Binding &binding,
                                 const std::string &path, npy::Array &array) {
  const plan::Buffer &buffer = bufferOf(plan, binding.buffer());
  std::string expected =
      npy::shapeText(shapeOf(buffer)) + " " + typeName(buffer.dtype());
  auto checkDeclaration = [&](const npy::Array &declared) -> Status {
    if (declared.shape != shapeOf(buffer) || declared.dtype != buffer.dtype())
      return failure("input ", inQuotes(binding.name()), " from ",
                     inQuotes(path), " is ", npy::shapeText(declared.shape),
                     " ", typeName(declared.dtype), ", the program expects ",
                     expected);
    return Status::success();
  };
  if (Status status = npy::readNpy(path, array, checkDeclaration);
      !status.ok()) {
    if (status.message().rfind("input ", 0) == 0)
      return status;
    return failure("input ", inQuotes(binding.name()), ": ", status.message());
  }
  return Status::success();
}

namespace {

/// Everything that can be checked before touching weights.
} // namespace

/// "'a', 'b'", or "none".
static std::string
namesOf(const google::protobuf::RepeatedPtrField<plan::Binding> &bindings) {
  std::string names;
  for (const plan::Binding &binding : bindings)
    names += (names.empty() ? "" : ", ") + inQuotes(binding.name());
  return names.empty() ? std::string("none") : names;
}

Status zplan::tooling::checkInputNames(const plan::Program &program,
                                       const std::vector<FileBinding> &inputs) {
  for (const FileBinding &input : inputs)
    if (!findBinding(program.inputs(), input.name))
      return failure("--input ", inQuotes(input.name), " names no input of ",
                     "program ", inQuotes(program.name()),
                     " (its inputs: ", namesOf(program.inputs()), ")");
  return Status::success();
}

Status zplan::tooling::readProgramInputs(const plan::Plan &plan,
                                         const plan::Program &program,
                                         const std::vector<FileBinding> &inputs,
                                         std::vector<npy::Array> &arrays) {
  for (const plan::Binding &binding : program.inputs()) {
    auto given = std::find_if(
        inputs.begin(), inputs.end(),
        [&](const FileBinding &input) { return input.name == binding.name(); });
    const plan::Buffer &buffer = bufferOf(plan, binding.buffer());
    if (given == inputs.end())
      return failure("missing --input ", binding.name(), "=FILE.npy for ",
                     "program input ", inQuotes(binding.name()), " (",
                     npy::shapeText(shapeOf(buffer)), " ",
                     typeName(buffer.dtype()), ")");
    if (buffer.kind() != plan::Buffer::ARENA)
      return failure("program input ", inQuotes(binding.name()),
                     " is bound to buffer ", buffer.id(), " ",
                     inQuotes(buffer.name()),
                     ", which is not an arena buffer zrun can fill");
    npy::Array array;
    ZR_RETURN_IF_ERROR(readInput(plan, binding, given->path, array));
    arrays.push_back(std::move(array));
  }
  return Status::success();
}

namespace {

Status checkRun(RunSession &session) {
  const Arguments &arguments = session.arguments;
  plan::Plan &plan = session.plan;
  ZR_RETURN_IF_ERROR(plan::loadPlan(arguments.planPath, plan));
  ZR_RETURN_IF_ERROR(plan::validatePlan(
      plan, static_cast<uint32_t>(session.communicator.size())));
  ZR_RETURN_IF_ERROR(selectProgram(plan, arguments.program, session.program));
  const plan::Program &program = *session.program;
  ZR_RETURN_IF_ERROR(checkProgramSupported(plan, program));

  ZR_RETURN_IF_ERROR(checkInputNames(program, arguments.inputs));
  for (const FileBinding &output : arguments.outputs)
    if (!findBinding(program.outputs(), output.name))
      return failure("--output ", inQuotes(output.name), " names no output ",
                     "of program ", inQuotes(program.name()),
                     " (its outputs: ", namesOf(program.outputs()), ")");
  ZR_RETURN_IF_ERROR(checkOutputsOverwriteNothing(arguments, plan));
  ZR_RETURN_IF_ERROR(
      readProgramInputs(plan, program, arguments.inputs, session.inputs));

  for (const plan::Binding &binding : program.outputs()) {
    const plan::Buffer &buffer = bufferOf(plan, binding.buffer());
    bool requested =
        std::any_of(arguments.outputs.begin(), arguments.outputs.end(),
                    [&](const FileBinding &output) {
                      return output.name == binding.name();
                    });
    if (requested && npy::descrOf(buffer.dtype()).empty())
      return failure("program output ", inQuotes(binding.name()), " is ",
                     typeName(buffer.dtype()),
                     ", which a .npy file cannot hold");
  }
  // Only rank 0 writes files; only it checks where they go.
  if (session.communicator.rank() == 0) {
    for (const FileBinding &output : arguments.outputs)
      ZR_RETURN_IF_ERROR(
          checkWritable(output.path, "output " + inQuotes(output.name)));
    if (!arguments.tracePath.empty())
      ZR_RETURN_IF_ERROR(checkWritable(arguments.tracePath, "the trace"));
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Phase 2: load
//===----------------------------------------------------------------------===//

/// This rank's weights, the arena, the executor.
Status loadRun(RunSession &session) {
  comm::Communicator &communicator = session.communicator;
  ZR_RETURN_IF_ERROR(RankDevice::open(session.arguments.backend, communicator,
                                      session.device));
  // checkRun() found a kernel for every instruction: every backend has the
  // same ones (runtime/plan/ComputeKernels.def).
  Backend &backend = session.device->backend();
  ZR_RETURN_IF_ERROR(RankMemory::load(
      session.arguments.planPath, session.plan,
      static_cast<uint32_t>(communicator.rank()), backend, session.memory));
  ExecutorOptions options;
  options.check = session.arguments.check;
  if (!session.arguments.tracePath.empty()) {
    // Every run's events, up to a cap (24 MiB per queue) that a long
    // --repeat would pass; the rest are counted as dropped.
    constexpr int64_t kMaxEventsPerQueue = int64_t(1) << 20;
    session.trace.reserve(static_cast<size_t>(
        std::min(kMaxEventsPerQueue, session.program->instructions_size() *
                                         session.arguments.repeat)));
    options.trace = &session.trace;
  }
  return Executor::create(session.plan, *session.program, *session.memory,
                          session.device->collectives(), options,
                          session.executor);
}

//===----------------------------------------------------------------------===//
// Phase 4: finish
//===----------------------------------------------------------------------===//

/// Rank 0: stages every requested output.
Status stageOutputs(RunSession &session) {
  const plan::Program &program = *session.program;
  for (const FileBinding &output : session.arguments.outputs) {
    // checkRun() made sure every --output names one.
    const plan::Binding &binding = *findBinding(program.outputs(), output.name);
    const plan::Buffer &buffer = bufferOf(session.plan, binding.buffer());
    uint64_t bytes = elementCount(buffer) * plan::dataTypeSize(buffer.dtype());
    std::vector<uint8_t> values(bytes);
    ZR_RETURN_IF_ERROR(
        session.memory->read(binding.buffer(), values.data(), bytes));
    std::string encoded;
    if (Status status = npy::encodeNpy(buffer.dtype(), shapeOf(buffer),
                                       values.data(), bytes, encoded);
        !status.ok())
      return failure("output ", inQuotes(output.name), ": ", status.message());
    ZR_RETURN_IF_ERROR(session.staged.stage(
        output.path, encoded,
        "output " + inQuotes(output.name) + " to " + inQuotes(output.path)));
  }
  return Status::success();
}

/// Collective: gathers every rank's trace events to rank 0, which stages
/// the trace file.
Status stageTrace(RunSession &session) {
  std::vector<std::string> all;
  ZR_RETURN_IF_ERROR(session.communicator.gatherText(
      session.trace.eventsJson(session.plan, *session.program,
                               session.communicator.rank()),
      all));
  if (session.communicator.rank() != 0)
    return Status::success();
  std::string text = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t rank = 0; rank < all.size(); ++rank)
    text += (rank ? ",\n" : "") + all[rank];
  text += "\n]}\n";
  const std::string &path = session.arguments.tracePath;
  return session.staged.stage(path, text, "the trace to " + inQuotes(path));
}

/// Writes every file of the run, or none: a failure at any step drops
/// what was staged (StagedFiles' destructor) before it reaches its path.
bool finishRun(RunSession &session) {
  comm::Communicator &communicator = session.communicator;
  bool rankZero = communicator.rank() == 0;
  if (!agree(communicator,
             rankZero ? stageOutputs(session) : Status::success()))
    return false;
  if (!session.arguments.tracePath.empty() &&
      !agree(communicator, stageTrace(session)))
    return false;
  return agree(communicator,
               rankZero ? session.staged.commitAll() : Status::success());
}

/// Collective: rank 0 prints every rank's memory line.
} // namespace

bool zplan::tooling::printStats(comm::Communicator &communicator,
                                const RankMemory &memory) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  std::ostringstream line;
  line << "zrun: rank " << communicator.rank() << ": peak RSS "
       << static_cast<uint64_t>(usage.ru_maxrss) * 1024 << " B, arena "
       << memory.arenaBytes() << " B, shards " << memory.shardBytes()
       << " B, persistent " << memory.persistentBytes() << " B";
  if (uint64_t state = memory.stateSection().bytes())
    line << ", training state " << state << " B";
  // Only a plan that generates allocates and frees memory after load (its
  // generation state, Memory.h): what it holds now and held at most.
  if (uint64_t generation = memory.generationBytes())
    line << ", generation state " << generation << " B, held "
         << memory.heldBytes() << " B, peak " << memory.peakBytes() << " B";
  line << "\n";
  // Every rank's backend first, then every rank's memory: rank order in
  // each block.
  std::vector<std::string> backends, lines;
  Status status = communicator.gatherText(
      "zrun: rank " + std::to_string(communicator.rank()) + ": backend " +
          memory.backend().description() + "\n",
      backends);
  if (status.ok())
    status = communicator.gatherText(line.str(), lines);
  if (!agree(communicator, status))
    return false;
  for (const std::string &text : backends)
    std::cout << text;
  for (const std::string &text : lines)
    std::cout << text;
  std::cout << std::flush;
  return true;
}

bool zplan::tooling::agree(comm::Communicator &communicator,
                           const Status &status) {
  comm::Failures failures;
  if (Status shared = comm::shareFailures(communicator, !status.ok(), failures);
      !shared.ok()) {
    printError(withRank(communicator, shared.message()));
    communicator.abort(1);
  }
  if (failures.count == 0)
    return true;
  if (communicator.rank() == failures.first)
    printError(failures.count == communicator.size()
                   ? status.message()
                   : withRank(communicator, status.message()));
  return false;
}

int zplan::tooling::runPlan(const Arguments &arguments,
                            comm::Communicator &communicator) {
  RunSession session(arguments, communicator);
  if (!agree(communicator, checkRun(session)))
    return 1;
  if (!agree(communicator, loadRun(session)))
    return 1;

  const plan::Program &program = *session.program;
  cpu::setBlasThreads(arguments.threads);
  if (Status status = communicator.barrier(); !status.ok())
    abortRun(communicator, status);
  session.trace.setOrigin();
  double lastSeconds = 0;
  for (int64_t repetition = 0; repetition < arguments.repeat; ++repetition) {
    // Inputs live in the arena, which a run reuses once they are dead:
    // copy them in before every run.
    for (int i = 0; i < program.inputs_size(); ++i) {
      const npy::Array &input = session.inputs[i];
      if (Status status = session.memory->write(
              program.inputs(i).buffer(), input.data.data(), input.data.size());
          !status.ok())
        abortRun(communicator, status);
    }
    if (repetition > 0)
      if (Status status = communicator.barrier(); !status.ok())
        abortRun(communicator, status);
    auto start = std::chrono::steady_clock::now();
    if (Status status = session.executor->run(); !status.ok())
      abortRun(communicator, status);
    lastSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }
  session.executor.reset(); // Joins the comm thread.

  if (!finishRun(session))
    return 1;
  if (arguments.repeatGiven && communicator.rank() == 0) {
    char line[64];
    std::snprintf(line, sizeof(line), "zrun: run time %.9f s\n", lastSeconds);
    std::cout << line << std::flush;
  }
  if (arguments.stats && !printStats(communicator, *session.memory))
    return 1;
  return 0;
}
