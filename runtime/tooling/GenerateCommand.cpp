//===- GenerateCommand.cpp - zrun PLAN generate ---------------------------===//

#include "runtime/tooling/GenerateCommand.h"

#include "runtime/exec/Memory.h"
#include "runtime/generate/GenerateProgress.h"
#include "runtime/plan/CheckedSizes.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/session/Session.h"
#include "runtime/tooling/Diagnostics.h"
#include "runtime/tooling/Files.h"
#include "runtime/tooling/Npy.h"
#include "runtime/tooling/ProgramInputs.h"
#include "runtime/tooling/PromptFiles.h"
#include "runtime/tooling/Stats.h"
#include "runtime/tooling/TraceFile.h"

#include <iostream>
#include <memory>

using namespace zplan;
using namespace zplan::tooling;

namespace {

/// One rank's `zrun generate`: the session that generates, the request, the
/// files it stages.
struct Generation {
  Generation(const Arguments &arguments, comm::Communicator &communicator)
      : arguments(arguments), communicator(communicator) {}

  const Arguments &arguments;
  comm::Communicator &communicator;
  std::unique_ptr<session::Session> session;
  session::GenerateRequest request;
  /// This rank's rows, and every rank's (Session::gatherRows()).
  session::GenerateResult result;
  session::GenerateResult all;
  StagedFiles staged;
};

//===----------------------------------------------------------------------===//
// Check: the plan, the prompts, the files
//===----------------------------------------------------------------------===//

/// No file generation writes may be a file it reads, or another it writes
/// (compared as files: see Files.h).
Status checkOutputsOverwriteNothing(const Generation &generation) {
  const Arguments &arguments = generation.arguments;
  const generate::GenerateOptions &options = arguments.generate;
  std::vector<NamedFile> read = {{"the plan file", arguments.planPath},
                                 {"--prompt", options.promptPath}};
  if (!generation.session->plan().weights_file().empty())
    read.push_back(
        {"the weights file",
         plan::weightsPath(arguments.planPath, generation.session->plan())});
  if (!options.promptLengthsPath.empty())
    read.push_back({"--prompt-lengths", options.promptLengthsPath});
  std::vector<NamedFile> written = {{"--output", options.outputPath}};
  if (!options.logitsOutputPath.empty())
    written.push_back({"--logits-output", options.logitsOutputPath});
  if (!arguments.tracePath.empty())
    written.push_back({"the trace", arguments.tracePath});
  return checkOverwritesNothing(read, written);
}

/// Opens the session (plan, memory) and checks it can generate what the
/// flags ask, and that the files can be written.
Status checkGeneration(Generation &generation) {
  const Arguments &arguments = generation.arguments;
  session::SessionOptions options;
  options.check = arguments.check;
  options.backend = arguments.backend;
  options.threads = arguments.threads;
  options.offloadDir = arguments.offloadDir;
  options.nvmeIo = arguments.nvmeIo;
  options.trace = !arguments.tracePath.empty();
  ZR_RETURN_IF_ERROR(session::Session::open(arguments.planPath,
                                            generation.communicator, options,
                                            generation.session));
  ZR_RETURN_IF_ERROR(generation.session->checkCanGenerate());
  ZR_RETURN_IF_ERROR(
      readGenerateRequest(arguments.generate, generation.request));
  // The files hold the global batch; this rank generates its own rows.
  comm::Communicator &communicator = generation.communicator;
  ZR_RETURN_IF_ERROR(keepRankRows(generation.request,
                                  generation.session->generationShape(),
                                  static_cast<uint64_t>(communicator.rank()),
                                  static_cast<uint64_t>(communicator.size())));
  generation.request.keepLogits = !arguments.generate.logitsOutputPath.empty();
  ZR_RETURN_IF_ERROR(
      generation.session->checkGenerateRequest(generation.request));
  ZR_RETURN_IF_ERROR(checkOutputsOverwriteNothing(generation));
  // Only rank 0 writes files; only it checks where they go.
  if (generation.communicator.rank() == 0) {
    const generate::GenerateOptions &generate = arguments.generate;
    ZR_RETURN_IF_ERROR(checkWritable(generate.outputPath, "--output"));
    if (!generate.logitsOutputPath.empty())
      ZR_RETURN_IF_ERROR(
          checkWritable(generate.logitsOutputPath, "--logits-output"));
    if (!arguments.tracePath.empty())
      ZR_RETURN_IF_ERROR(checkWritable(arguments.tracePath, "the trace"));
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Finish
//===----------------------------------------------------------------------===//

/// The bytes the decode program gathers per run, from its instructions: its
/// all_gathers and the carry_gather it issues for the next step
/// (docs/generation.md section 6).
uint64_t plannedGatherBytes(const plan::Plan &plan) {
  uint64_t bytes = 0;
  if (const plan::Program *decode =
          plan::findProgram(plan, plan::PROGRAM_KIND_DECODE))
    for (const plan::Instruction &instruction : decode->instructions())
      if (instruction.opcode() == plan::OPCODE_ALL_GATHER ||
          instruction.opcode() == plan::OPCODE_CARRY_GATHER) {
        const plan::Group &group = plan.groups(instruction.group());
        bytes += plan::gatheredBytes(group);
      }
  return bytes;
}

/// The bytes of the plan's buffers of `kind` (views own none).
uint64_t bytesOfKind(const plan::Plan &plan, plan::Buffer::Kind kind) {
  uint64_t bytes = 0;
  for (const plan::Buffer &buffer : plan.buffers())
    if (buffer.kind() == kind && buffer.view_of() == 0)
      bytes += buffer.bytes();
  return bytes;
}

Status stageOutputs(Generation &generation) {
  const generate::GenerateOptions &options = generation.arguments.generate;
  const session::GenerateResult &result = generation.all;
  std::string encoded;
  ZR_RETURN_IF_ERROR(npy::encodeNpy(
      plan::I64,
      {static_cast<int64_t>(result.batch),
       static_cast<int64_t>(result.maxNewTokens)},
      result.tokens.data(), result.tokens.size() * sizeof(int64_t), encoded));
  ZR_RETURN_IF_ERROR(
      generation.staged.stage(options.outputPath, encoded,
                              "the tokens to " + inQuotes(options.outputPath)));
  if (!options.logitsOutputPath.empty()) {
    uint64_t vocabulary = generation.session->generationShape().vocabulary;
    ZR_RETURN_IF_ERROR(npy::encodeNpy(
        plan::F32,
        {static_cast<int64_t>(result.maxNewTokens),
         static_cast<int64_t>(result.batch), static_cast<int64_t>(vocabulary)},
        result.logits.data(), result.logits.size() * sizeof(float), encoded));
    ZR_RETURN_IF_ERROR(generation.staged.stage(
        options.logitsOutputPath, encoded,
        "the logits to " + inQuotes(options.logitsOutputPath)));
  }
  return Status::success();
}

bool finishGeneration(Generation &generation) {
  comm::Communicator &communicator = generation.communicator;
  bool rankZero = communicator.rank() == 0;
  if (Status status =
          generation.session->gatherRows(generation.result, generation.all);
      !status.ok())
    abortRun(communicator, status);
  if (!agree(communicator,
             rankZero ? stageOutputs(generation) : Status::success()))
    return false;
  if (!generation.arguments.tracePath.empty() &&
      !agree(communicator,
             stageTrace(communicator, generation.session->traceEvents(),
                        generation.arguments.tracePath, generation.staged)))
    return false;
  return agree(communicator,
               rankZero ? generation.staged.commitAll() : Status::success());
}

} // namespace

int zplan::tooling::generateTokens(const Arguments &arguments,
                                   comm::Communicator &communicator) {
  Generation generation(arguments, communicator);
  if (!agree(communicator, checkGeneration(generation)))
    return 1;
  session::Session &session = *generation.session;
  bool rankZero = communicator.rank() == 0;
  const generate::GenerationShape &shape = session.generationShape();
  std::unique_ptr<generate::GenerateProgress> progress;
  session::GenerateObserver observer;
  // Rank 0's progress line follows its own rows.
  observer.started = [&] {
    uint64_t width = generation.request.rows.maxNewTokens;
    progress = std::make_unique<generate::GenerateProgress>(
        width ? width : generate::defaultMaxNewTokens(shape), shape.batch,
        train::steadyClock());
  };
  observer.stepDone = [&](uint64_t step, uint64_t tokens, uint64_t active) {
    std::string line = step == 0 ? progress->prefillDone(tokens)
                                 : progress->stepDone(step, tokens, active);
    if (rankZero && progress->shouldPrint(active == 0))
      std::cerr << "zrun: " << line << "\n" << std::flush;
  };
  if (Status status =
          session.generate(generation.request, generation.result, observer);
      !status.ok())
    abortRun(communicator, status);

  if (!finishGeneration(generation))
    return 1;
  // The summary is the global batch's: every rank's figures, combined.
  const session::GenerateResult &mine = generation.result;
  generate::GenerationFigures figures = progress->figures();
  figures.lockstepPeriod = static_cast<double>(
      plan::findProgram(session.plan(), plan::PROGRAM_KIND_DECODE)
          ->lockstep_period());
  figures.decodeRuns = static_cast<double>(mine.decodeSteps);
  figures.idleDecodeRuns = static_cast<double>(mine.idleDecodeSteps);
  figures.agreements = static_cast<double>(mine.agreements);
  figures.agreementSeconds = mine.agreementSeconds;
  constexpr uint64_t kFigureCount = sizeof(figures) / sizeof(double);
  std::vector<generate::GenerationFigures> perRank(communicator.size());
  if (Status status = communicator.allGather(&figures, perRank.data(),
                                             kFigureCount, ElementType::F64);
      !status.ok())
    abortRun(communicator, status);
  if (rankZero) {
    generate::GenerationFacts facts;
    facts.planGatheredPerDecodeStep = plannedGatherBytes(session.plan());
    if (arguments.stats && mine.decodeSteps > 0)
      facts.countedGatheredPerDecodeStep =
          mine.decodeGatheredBytes / mine.decodeSteps;
    facts.residentBytes = bytesOfKind(session.plan(), plan::Buffer::RESIDENT);
    facts.cacheBytes = bytesOfKind(session.plan(), plan::Buffer::CACHE);
    for (const std::string &summary : generate::summaryLines(
             generate::combine(perRank), generation.all.batch, facts, perRank))
      std::cout << "zrun: " << summary << "\n";
    // Offloaded shards (docs/offload.md): what the last decode step copied
    // in from their tier, on this rank.
    if (arguments.stats && mine.decodeSteps > 0 && mine.decodeTierCopiedBytes)
      std::cout << "zrun: per decode step: tier copies "
                << mine.decodeTierCopiedBytes / mine.decodeSteps << " B\n";
    std::cout << std::flush;
  }
  if (arguments.stats && !printStats(communicator, session.rankMemory()))
    return 1;
  return 0;
}
