//===- GenerateSession.cpp - zrun PLAN generate ---------------------------===//

#include "runtime/tooling/GenerateSession.h"

#include "runtime/Executor.h"
#include "runtime/Memory.h"
#include "runtime/Trace.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/generate/GenerateProgress.h"
#include "runtime/generate/GenerationState.h"
#include "runtime/generate/Sampler.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/tooling/CountingCommunicator.h"
#include "runtime/tooling/Files.h"
#include "runtime/tooling/Npy.h"
#include "runtime/tooling/PlanQueries.h"
#include "runtime/tooling/RunSession.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <iostream>
#include <memory>

using namespace zplan;
using namespace zplan::tooling;

namespace {

/// The generation programs, in the order a run runs them (docs/generation.md
/// section 1).
enum ProgramIndex { kBegin, kPrefill, kDecode, kEnd, kProgramCount };
constexpr const char *kProgramNames[kProgramCount] = {
    "generate_begin", "prefill", "decode", "generate_end"};

/// One rank's generation: the plan, its four programs and their bindings,
/// the rank's memory, an executor (and a trace) per program, the rows.
struct Generation {
  Generation(const Arguments &arguments, comm::Communicator &communicator)
      : arguments(arguments), communicator(communicator),
        counting(communicator) {}

  const Arguments &arguments;
  comm::Communicator &communicator;
  /// What the executors talk through: counts the bytes they gather.
  CountingCommunicator counting;
  plan::Plan plan;
  std::array<const plan::Program *, kProgramCount> programs{};
  const plan::Binding *prefillIds = nullptr;
  const plan::Binding *prefillPositions = nullptr;
  const plan::Binding *lastIndex = nullptr;
  const plan::Binding *prefillLogits = nullptr;
  const plan::Binding *decodeIds = nullptr;
  const plan::Binding *decodePositions = nullptr;
  const plan::Binding *decodeLogits = nullptr;
  generate::GenerationShape shape;
  generate::GenerationState state;
  std::unique_ptr<RankMemory> memory;
  std::array<TraceRecorder, kProgramCount> traces;
  std::array<std::unique_ptr<Executor>, kProgramCount> executors;
  /// Rank 0 with --logits-output: [M, B, V], zeros where no row produced.
  std::vector<float> logitsHistory;
  StagedFiles staged;
};

//===----------------------------------------------------------------------===//
// Check: the plan, the prompts, the files
//===----------------------------------------------------------------------===//

/// Finds `name` among `bindings` of program `program` and checks its
/// buffer: element type, shape, and (inputs) an arena buffer zrun fills.
Status findChecked(const plan::Plan &plan, const plan::Program &program,
                   bool input, const std::string &name, plan::DataType dtype,
                   const std::vector<int64_t> &shape,
                   const plan::Binding *&binding) {
  const char *kind = input ? "input" : "output";
  binding = findBinding(input ? program.inputs() : program.outputs(), name);
  if (!binding)
    return failure("program ", inQuotes(program.name()), " has no ", kind, " ",
                   inQuotes(name),
                   "; compile the model with zcc --mode "
                   "generate");
  const plan::Buffer &buffer = bufferOf(plan, binding->buffer());
  std::vector<int64_t> expected = shape;
  // -1: any extent (the dimension the check learns from).
  for (size_t i = 0; i < expected.size() && i < buffer.shape().size(); ++i)
    if (expected[i] < 0)
      expected[i] = buffer.shape(i);
  if (buffer.dtype() != dtype || shapeOf(buffer) != expected)
    return failure("program ", inQuotes(program.name()), "'s ", kind, " ",
                   inQuotes(name), " is ", npy::shapeText(shapeOf(buffer)), " ",
                   typeName(buffer.dtype()), "; generation needs ",
                   npy::shapeText(expected), " ", typeName(dtype));
  if (input && buffer.kind() != plan::Buffer::ARENA)
    return failure("program ", inQuotes(program.name()), "'s input ",
                   inQuotes(name), " is bound to buffer ", buffer.id(), " ",
                   inQuotes(buffer.name()),
                   ", which is not an arena buffer zrun can fill");
  return Status::success();
}

/// The plan is a generation plan: its programs, their bindings, the shapes
/// B, P, L and V they agree on.
Status checkGenerationPlan(Generation &generation) {
  plan::Plan &plan = generation.plan;
  ZR_RETURN_IF_ERROR(plan::loadPlan(generation.arguments.planPath, plan));
  ZR_RETURN_IF_ERROR(plan::validatePlan(
      plan, static_cast<uint32_t>(generation.communicator.size())));
  for (int index = 0; index < kProgramCount; ++index) {
    for (const plan::Program &program : plan.programs())
      if (program.name() == kProgramNames[index])
        generation.programs[index] = &program;
    if (!generation.programs[index])
      return failure("the plan has no program ", inQuotes(kProgramNames[index]),
                     ": compile the model with zcc --mode generate");
    ZR_RETURN_IF_ERROR(
        checkProgramSupported(plan, *generation.programs[index]));
  }

  const plan::Program &prefill = *generation.programs[kPrefill];
  const plan::Program &decode = *generation.programs[kDecode];
  ZR_RETURN_IF_ERROR(findChecked(plan, prefill, true, "input_ids", plan::I64,
                                 {-1, -1}, generation.prefillIds));
  const plan::Buffer &ids = bufferOf(plan, generation.prefillIds->buffer());
  int64_t batch = ids.shape(0), prompt = ids.shape(1);
  ZR_RETURN_IF_ERROR(findChecked(plan, prefill, true, "positions", plan::I64,
                                 {batch, prompt}, generation.prefillPositions));
  ZR_RETURN_IF_ERROR(findChecked(plan, prefill, true, "last_index", plan::I64,
                                 {batch}, generation.lastIndex));
  ZR_RETURN_IF_ERROR(findChecked(plan, prefill, false, "logits", plan::F32,
                                 {batch, -1}, generation.prefillLogits));
  int64_t vocabulary =
      bufferOf(plan, generation.prefillLogits->buffer()).shape(1);
  ZR_RETURN_IF_ERROR(findChecked(plan, decode, true, "input_ids", plan::I64,
                                 {batch, 1}, generation.decodeIds));
  ZR_RETURN_IF_ERROR(findChecked(plan, decode, true, "positions", plan::I64,
                                 {batch, 1}, generation.decodePositions));
  ZR_RETURN_IF_ERROR(findChecked(plan, decode, false, "logits", plan::F32,
                                 {batch, vocabulary}, generation.decodeLogits));
  for (int index : {kBegin, kEnd})
    if (generation.programs[index]->inputs_size() != 0)
      return failure("program ", inQuotes(kProgramNames[index]),
                     " takes inputs; generation feeds it none");

  // L: the cache's slots, [B, Hkv, L, D] in every CACHE buffer.
  int64_t slots = 0;
  for (const plan::Buffer &buffer : plan.buffers()) {
    if (buffer.kind() != plan::Buffer::CACHE || buffer.view_of() != 0)
      continue;
    if (buffer.shape_size() != 4 || buffer.shape(0) != batch ||
        (slots && buffer.shape(2) != slots))
      return failure(
          "KV cache buffer ", buffer.id(), " ", inQuotes(buffer.name()), " is ",
          npy::shapeText(shapeOf(buffer)), "; generation needs [", batch,
          ", heads, ", slots ? std::to_string(slots) : "slots", ", head size]");
    slots = buffer.shape(2);
  }
  if (slots == 0)
    return failure("the plan has no KV cache buffer; compile the model with "
                   "zcc --mode generate");
  if (slots <= prompt)
    return failure("the plan's KV cache has ", slots,
                   " slots, no more than its prompt length ", prompt);
  generation.shape.batch = static_cast<uint64_t>(batch);
  generation.shape.promptLength = static_cast<uint64_t>(prompt);
  generation.shape.maxSequenceLength = static_cast<uint64_t>(slots);
  generation.shape.vocabulary = static_cast<uint64_t>(vocabulary);
  return Status::success();
}

/// Reads an int64 (or int32) .npy file of `rank` dimensions as int64.
Status readIds(const std::string &path, const char *what, size_t rank,
               std::vector<int64_t> &values, std::vector<int64_t> &shape) {
  npy::Array array;
  auto checkHeader = [&](const npy::Array &declared) -> Status {
    if ((declared.dtype != plan::I64 && declared.dtype != plan::I32) ||
        declared.shape.size() != rank)
      return failure(what, " ", inQuotes(path), " is ",
                     npy::shapeText(declared.shape), " ",
                     typeName(declared.dtype),
                     "; generate reads int64 (or "
                     "int32) ",
                     rank == 2 ? "[batch, prompt length]" : "[batch]");
    return Status::success();
  };
  if (Status status = npy::readNpy(path, array, checkHeader); !status.ok()) {
    if (status.message().rfind(what, 0) == 0)
      return status;
    return failure(what, ": ", status.message());
  }
  uint64_t count = array.numElements();
  values.resize(count);
  if (array.dtype == plan::I64) {
    std::memcpy(values.data(), array.data.data(), count * sizeof(int64_t));
  } else {
    for (uint64_t i = 0; i < count; ++i) {
      int32_t value;
      std::memcpy(&value, array.data.data() + i * sizeof(value), sizeof(value));
      values[i] = value;
    }
  }
  shape = array.shape;
  return Status::success();
}

/// No file generation writes may be a file it reads, or another it writes
/// (compared as files: see Files.h).
Status checkOutputsOverwriteNothing(const Generation &generation) {
  const Arguments &arguments = generation.arguments;
  const generate::GenerateOptions &options = arguments.generate;
  struct Named {
    std::string what;
    std::string path;
  };
  std::vector<Named> read = {{"the plan file", arguments.planPath},
                             {"--prompt", options.promptPath}};
  if (!generation.plan.weights_file().empty())
    read.push_back({"the weights file",
                    plan::weightsPath(arguments.planPath, generation.plan)});
  if (!options.promptLengthsPath.empty())
    read.push_back({"--prompt-lengths", options.promptLengthsPath});
  std::vector<Named> written = {{"--output", options.outputPath}};
  if (!options.logitsOutputPath.empty())
    written.push_back({"--logits-output", options.logitsOutputPath});
  if (!arguments.tracePath.empty())
    written.push_back({"the trace", arguments.tracePath});
  for (size_t index = 0; index < written.size(); ++index) {
    FileIdentity output = FileIdentity::of(written[index].path);
    for (const Named &input : read)
      if (output.sameAs(FileIdentity::of(input.path)))
        return failure(written[index].what, " would overwrite ", input.what,
                       ": ", inQuotes(written[index].path), " is ",
                       inQuotes(input.path));
    for (size_t other = 0; other < index; ++other)
      if (output.sameAs(FileIdentity::of(written[other].path)))
        return failure(written[index].what, " and ", written[other].what,
                       " are both written to ", inQuotes(written[index].path));
  }
  return Status::success();
}

Status checkGeneration(Generation &generation) {
  ZR_RETURN_IF_ERROR(checkGenerationPlan(generation));
  const generate::GenerateOptions &options = generation.arguments.generate;
  generate::GenerationRequest request;
  std::vector<int64_t> shape;
  ZR_RETURN_IF_ERROR(
      readIds(options.promptPath, "prompt file", 2, request.prompts, shape));
  request.promptColumns = static_cast<uint64_t>(shape[1]);
  if (shape[0] == 0 || shape[1] == 0)
    return failure("prompt file ", inQuotes(options.promptPath), " is ",
                   npy::shapeText(shape), ": no prompt to continue");
  if (!options.promptLengthsPath.empty()) {
    std::vector<int64_t> lengthsShape;
    ZR_RETURN_IF_ERROR(readIds(options.promptLengthsPath, "prompt lengths file",
                               1, request.promptLengths, lengthsShape));
  }
  request.maxNewTokens = options.maxNewTokens;
  request.eos = options.eos;
  ZR_RETURN_IF_ERROR(generate::GenerationState::create(
      generation.shape, std::move(request), options.promptPath,
      options.promptLengthsPath, generation.state));
  ZR_RETURN_IF_ERROR(checkOutputsOverwriteNothing(generation));
  // Only rank 0 writes files; only it checks where they go.
  if (generation.communicator.rank() == 0) {
    ZR_RETURN_IF_ERROR(checkWritable(options.outputPath, "--output"));
    if (!options.logitsOutputPath.empty())
      ZR_RETURN_IF_ERROR(
          checkWritable(options.logitsOutputPath, "--logits-output"));
    if (!generation.arguments.tracePath.empty())
      ZR_RETURN_IF_ERROR(
          checkWritable(generation.arguments.tracePath, "the trace"));
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Load
//===----------------------------------------------------------------------===//

/// Runs of each program a generation makes, at most.
uint64_t runsOf(const Generation &generation, int index) {
  return index == kDecode ? generation.state.maxNewTokens() - 1 : 1;
}

Status loadGeneration(Generation &generation) {
  ZR_RETURN_IF_ERROR(
      RankMemory::load(generation.arguments.planPath, generation.plan,
                       static_cast<uint32_t>(generation.communicator.rank()),
                       generation.memory));
  for (int index = 0; index < kProgramCount; ++index) {
    ExecutorOptions options;
    options.check = generation.arguments.check;
    const plan::Program &program = *generation.programs[index];
    if (!generation.arguments.tracePath.empty()) {
      // Every run's events, up to a cap (24 MiB per queue) that a long
      // generation would pass; the rest are counted as dropped.
      constexpr uint64_t kMaxEventsPerQueue = uint64_t(1) << 20;
      generation.traces[index].reserve(static_cast<size_t>(
          std::min(kMaxEventsPerQueue,
                   static_cast<uint64_t>(program.instructions_size()) *
                       std::max<uint64_t>(1, runsOf(generation, index)))));
      options.trace = &generation.traces[index];
    }
    ZR_RETURN_IF_ERROR(Executor::create(generation.plan, program,
                                        *generation.memory, generation.counting,
                                        options, generation.executors[index]));
  }
  if (generation.communicator.rank() == 0 &&
      !generation.arguments.generate.logitsOutputPath.empty())
    generation.logitsHistory.assign(generation.state.maxNewTokens() *
                                        generation.shape.batch *
                                        generation.shape.vocabulary,
                                    0.0f);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Run
//===----------------------------------------------------------------------===//

int64_t *int64At(Generation &generation, const plan::Binding &binding) {
  return reinterpret_cast<int64_t *>(
      generation.memory->address(binding.buffer()));
}

void runProgram(Generation &generation, int index) {
  if (Status status = generation.executors[index]->run(); !status.ok())
    abortRun(generation.communicator, status);
}

/// Picks every row's token of step `step` from `logits` ([B, V]) and makes
/// rank 0's choice every rank's; records the logits of unfinished rows
/// for --logits-output; accepts the step.
void chooseTokens(Generation &generation, generate::Sampler &sampler,
                  const plan::Binding &logitsBinding, uint64_t step) {
  const generate::GenerationShape &shape = generation.shape;
  const auto *logits = reinterpret_cast<const float *>(
      generation.memory->address(logitsBinding.buffer()));
  std::vector<int64_t> tokens(shape.batch, 0);
  for (uint64_t row = 0; row < shape.batch; ++row) {
    if (generation.state.finished(row))
      continue; // fed only to keep the batch whole; its logits are ignored
    const float *rowLogits = logits + row * shape.vocabulary;
    if (Status status =
            sampler.next(rowLogits, shape.vocabulary, row, step, tokens[row]);
        !status.ok())
      abortRun(generation.communicator,
               failure("program ",
                       inQuotes(kProgramNames[step == 0 ? kPrefill : kDecode]),
                       " (generation step ", step, ") gave row ", row,
                       " logits it cannot choose from: ", status.message()));
    if (!generation.logitsHistory.empty())
      std::memcpy(generation.logitsHistory.data() +
                      (step * shape.batch + row) * shape.vocabulary,
                  rowLogits, shape.vocabulary * sizeof(float));
  }
  // Every rank computed the same logits from the same inputs; broadcasting
  // rank 0's tokens makes the ranks' next inputs equal by construction.
  if (Status status = generation.communicator.broadcast(
          tokens.data(), tokens.size() * sizeof(int64_t), 0);
      !status.ok())
    abortRun(generation.communicator, status);
  generation.state.acceptStep(tokens);
}

uint64_t activeRows(const Generation &generation) {
  uint64_t active = 0;
  for (uint64_t row = 0; row < generation.shape.batch; ++row)
    active += !generation.state.finished(row);
  return active;
}

/// The bytes the decode program gathers per run, from its instructions: its
/// all_gathers and the carry_gather it issues for the next step
/// (docs/generation.md section 6).
uint64_t plannedGatherBytes(const plan::Plan &plan,
                            const plan::Program &program) {
  uint64_t bytes = 0;
  for (const plan::Instruction &instruction : program.instructions())
    if (instruction.opcode() == plan::OPCODE_ALL_GATHER ||
        instruction.opcode() == plan::OPCODE_CARRY_GATHER) {
      const plan::Group &group = plan.groups(instruction.group());
      bytes += group.padded_elements() * plan::dataTypeSize(group.dtype());
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

//===----------------------------------------------------------------------===//
// Finish
//===----------------------------------------------------------------------===//

Status stageOutputs(Generation &generation) {
  const generate::GenerateOptions &options = generation.arguments.generate;
  const generate::GenerationShape &shape = generation.shape;
  uint64_t steps = generation.state.maxNewTokens();
  std::vector<int64_t> table = generation.state.outputTable();
  std::string encoded;
  ZR_RETURN_IF_ERROR(npy::encodeNpy(
      plan::I64,
      {static_cast<int64_t>(shape.batch), static_cast<int64_t>(steps)},
      table.data(), table.size() * sizeof(int64_t), encoded));
  ZR_RETURN_IF_ERROR(
      generation.staged.stage(options.outputPath, encoded,
                              "the tokens to " + inQuotes(options.outputPath)));
  if (!options.logitsOutputPath.empty()) {
    ZR_RETURN_IF_ERROR(npy::encodeNpy(
        plan::F32,
        {static_cast<int64_t>(steps), static_cast<int64_t>(shape.batch),
         static_cast<int64_t>(shape.vocabulary)},
        generation.logitsHistory.data(),
        generation.logitsHistory.size() * sizeof(float), encoded));
    ZR_RETURN_IF_ERROR(generation.staged.stage(
        options.logitsOutputPath, encoded,
        "the logits to " + inQuotes(options.logitsOutputPath)));
  }
  return Status::success();
}

/// Collective: every rank's events of every program to rank 0, which
/// stages the trace; each event names its program.
Status stageTrace(Generation &generation) {
  std::string mine;
  for (int index = 0; index < kProgramCount; ++index) {
    std::string events = generation.traces[index].eventsJson(
        generation.plan, *generation.programs[index],
        generation.communicator.rank());
    std::string tag = "\"args\":{\"instruction\":";
    std::string tagged = std::string("\"args\":{\"program\":\"") +
                         kProgramNames[index] + "\",\"instruction\":";
    for (size_t at = events.find(tag); at != std::string::npos;
         at = events.find(tag, at + tagged.size()))
      events.replace(at, tag.size(), tagged);
    mine += (mine.empty() ? "" : ",\n") + events;
  }
  std::vector<std::string> all;
  ZR_RETURN_IF_ERROR(generation.communicator.gatherText(mine, all));
  if (generation.communicator.rank() != 0)
    return Status::success();
  std::string text = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  for (size_t rank = 0; rank < all.size(); ++rank)
    text += (rank ? ",\n" : "") + all[rank];
  text += "\n]}\n";
  const std::string &path = generation.arguments.tracePath;
  return generation.staged.stage(path, text, "the trace to " + inQuotes(path));
}

bool finishGeneration(Generation &generation) {
  comm::Communicator &communicator = generation.communicator;
  bool rankZero = communicator.rank() == 0;
  if (!agree(communicator,
             rankZero ? stageOutputs(generation) : Status::success()))
    return false;
  if (!generation.arguments.tracePath.empty() &&
      !agree(communicator, stageTrace(generation)))
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
  if (!agree(communicator, loadGeneration(generation)))
    return 1;
  cpu::setBlasThreads(arguments.threads);
  bool rankZero = communicator.rank() == 0;
  const generate::GenerationShape &shape = generation.shape;
  generate::GenerationState &state = generation.state;
  generate::Sampler sampler(arguments.generate.sampling);

  if (Status status = communicator.barrier(); !status.ok())
    abortRun(communicator, status);
  for (TraceRecorder &trace : generation.traces)
    trace.setOrigin();
  generate::GenerateProgress progress(state.maxNewTokens(), shape.batch,
                                      train::steadyClock());
  runProgram(generation, kBegin);

  state.fillPrefill(int64At(generation, *generation.prefillIds),
                    int64At(generation, *generation.prefillPositions),
                    int64At(generation, *generation.lastIndex));
  runProgram(generation, kPrefill);
  chooseTokens(generation, sampler, *generation.prefillLogits, 0);
  std::string line = progress.prefillDone(shape.batch);
  if (rankZero && progress.shouldPrint(state.allFinished()))
    std::cerr << "zrun: " << line << "\n" << std::flush;

  generation.counting.reset();
  uint64_t decodeSteps = 0;
  while (!state.allFinished()) {
    // The arena reuses the inputs' bytes once they are dead: refill them
    // before every run.
    state.fillDecode(int64At(generation, *generation.decodeIds),
                     int64At(generation, *generation.decodePositions));
    runProgram(generation, kDecode);
    uint64_t before = state.generatedTokens();
    chooseTokens(generation, sampler, *generation.decodeLogits, state.steps());
    ++decodeSteps;
    line = progress.stepDone(decodeSteps, state.generatedTokens() - before,
                             activeRows(generation));
    if (rankZero && progress.shouldPrint(state.allFinished()))
      std::cerr << "zrun: " << line << "\n" << std::flush;
  }
  uint64_t countedBytes = generation.counting.gatheredBytes();
  runProgram(generation, kEnd);
  for (std::unique_ptr<Executor> &executor : generation.executors)
    executor.reset(); // Joins the comm threads.

  if (!finishGeneration(generation))
    return 1;
  if (rankZero) {
    generate::GenerationFacts facts;
    facts.planGatheredPerDecodeStep =
        plannedGatherBytes(generation.plan, *generation.programs[kDecode]);
    if (arguments.stats && decodeSteps > 0)
      facts.countedGatheredPerDecodeStep = countedBytes / decodeSteps;
    facts.residentBytes = bytesOfKind(generation.plan, plan::Buffer::RESIDENT);
    facts.cacheBytes = bytesOfKind(generation.plan, plan::Buffer::CACHE);
    for (const std::string &summary : progress.summary(facts))
      std::cout << "zrun: " << summary << "\n";
    std::cout << std::flush;
  }
  if (arguments.stats && !printStats(communicator, *generation.memory))
    return 1;
  return 0;
}
