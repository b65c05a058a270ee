//===- Session.cpp - open a plan; run one program; traces and memory ------===//
//
// What every command shares: the plan loaded and validated (so every
// program keeps its kind's contract, ProgramContracts.h), the backend the
// ranks agreed on, the rank's memory, and executors made once per program.
// Finding the parts of a plan is a look-up by kind and role; what a part
// lacks is kept as the reason a command cannot run (trainProblem,
// generateProblem), not as a failure to open.
//
//===----------------------------------------------------------------------===//

#include "runtime/session/Session.h"

#include "runtime/plan/PlanLoader.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/plan/ProgramContracts.h"
#include "runtime/session/SessionState.h"

#include <algorithm>

using namespace zplan;
using namespace zplan::session;

namespace {

/// "the plan has no program 'train_micro_step': compile the model with zcc
/// --mode train".
Status missingProgram(plan::ProgramKind kind, const char *mode) {
  return failure("the plan has no program ",
                 inQuotes(plan::programKindName(kind)),
                 ": compile the model with zcc --mode ", mode);
}

} // namespace

//===----------------------------------------------------------------------===//
// Open: the plan, what it can do, the memory
//===----------------------------------------------------------------------===//

Status zplan::session::openPlan(const std::string &planPath, uint32_t worldSize,
                                plan::Plan &plan) {
  ZR_RETURN_IF_ERROR(plan::loadPlan(planPath, plan));
  return plan::validatePlan(plan, worldSize ? worldSize : plan.world_size());
}

/// The training programs, their bindings and the gradient accumulators;
/// validatePlan() proved what they hold (ProgramContracts.h).
Status Session::State::findTraining() {
  step = plan::findProgram(plan, plan::PROGRAM_KIND_TRAIN_MICRO_STEP);
  optimizer = plan::findProgram(plan, plan::PROGRAM_KIND_OPTIMIZER_STEP);
  if (!step)
    return missingProgram(plan::PROGRAM_KIND_TRAIN_MICRO_STEP, "train");
  ZR_RETURN_IF_ERROR(checkProgramSupported(plan, *step, device->backend()));
  inputIds = plan::findBinding(step->inputs(), plan::BINDING_ROLE_INPUT_IDS);
  labels = plan::findBinding(step->inputs(), plan::BINDING_ROLE_LABELS);
  loss = plan::findBinding(step->outputs(), plan::BINDING_ROLE_LOSS);
  completionMask =
      plan::findBinding(step->inputs(), plan::BINDING_ROLE_COMPLETION_MASK);
  advantages = plan::findBinding(step->inputs(), plan::BINDING_ROLE_ADVANTAGES);
  oldLogprobs =
      plan::findBinding(step->inputs(), plan::BINDING_ROLE_OLD_LOGPROBS);
  refLogprobs =
      plan::findBinding(step->inputs(), plan::BINDING_ROLE_REF_LOGPROBS);
  tokenSumLoss =
      step->loss_normalization() == plan::LOSS_NORMALIZATION_TOKEN_SUM;
  gradientOf.assign(plan.groups_size(), 0);
  for (const plan::Instruction &instruction : step->instructions())
    if (instruction.opcode() == plan::OPCODE_REDUCE_SCATTER ||
        instruction.opcode() == plan::OPCODE_ALL_REDUCE)
      gradientOf[instruction.group()] = instruction.results(1);
  if (optimizer) {
    hyper = plan::findBinding(optimizer->inputs(),
                              plan::BINDING_ROLE_HYPER_PARAMETERS);
    for (const plan::Instruction &instruction : optimizer->instructions())
      sgd |= instruction.opcode() == plan::OPCODE_SGD;
  }
  return Status::success();
}

/// The logprobs program and its bindings.
Status Session::State::findLogprobs() {
  logprobsProgram = plan::findProgram(plan, plan::PROGRAM_KIND_LOGPROBS);
  if (!logprobsProgram)
    return failure("the plan has no program 'logprobs': compile the model "
                   "with zcc --mode logprobs, or --mode train with --loss "
                   "grpo or dpo");
  ZR_RETURN_IF_ERROR(
      checkProgramSupported(plan, *logprobsProgram, device->backend()));
  for (const plan::Binding &input : logprobsProgram->inputs())
    if (input.role() != plan::BINDING_ROLE_INPUT_IDS)
      return failure("program 'logprobs' takes ", inQuotes(input.name()),
                     " besides input_ids; Session.logprobs feeds input_ids "
                     "only");
  logprobsIds = plan::findBinding(logprobsProgram->inputs(),
                                  plan::BINDING_ROLE_INPUT_IDS);
  logprobsOut = plan::findBinding(logprobsProgram->outputs(),
                                  plan::BINDING_ROLE_LOGPROBS);
  entropyOut =
      plan::findBinding(logprobsProgram->outputs(), plan::BINDING_ROLE_ENTROPY);
  return Status::success();
}

/// The generation programs, their bindings, and B, P, L and V.
Status Session::State::findGeneration() {
  constexpr plan::ProgramKind kinds[kGenerationPrograms] = {
      plan::PROGRAM_KIND_GENERATE_BEGIN, plan::PROGRAM_KIND_PREFILL,
      plan::PROGRAM_KIND_DECODE, plan::PROGRAM_KIND_GENERATE_END};
  for (int index = 0; index < kGenerationPrograms; ++index) {
    programs[index] = plan::findProgram(plan, kinds[index]);
    if (!programs[index])
      return missingProgram(kinds[index], "generate");
    ZR_RETURN_IF_ERROR(
        checkProgramSupported(plan, *programs[index], device->backend()));
  }
  const plan::Program &prefill = *programs[kPrefill];
  const plan::Program &decode = *programs[kDecode];
  auto input = [](const plan::Program &program, plan::BindingRole role) {
    return plan::findBinding(program.inputs(), role);
  };
  prefillIds = input(prefill, plan::BINDING_ROLE_INPUT_IDS);
  prefillPositions = input(prefill, plan::BINDING_ROLE_POSITIONS);
  lastIndex = input(prefill, plan::BINDING_ROLE_LAST_INDEX);
  prefillLogits =
      plan::findBinding(prefill.outputs(), plan::BINDING_ROLE_LOGITS);
  decodeIds = input(decode, plan::BINDING_ROLE_INPUT_IDS);
  decodePositions = input(decode, plan::BINDING_ROLE_POSITIONS);
  decodeLogits = plan::findBinding(decode.outputs(), plan::BINDING_ROLE_LOGITS);

  const plan::Buffer &ids = plan::bufferOf(plan, prefillIds->buffer());
  shape.batch = static_cast<uint64_t>(ids.shape(0));
  shape.promptLength = static_cast<uint64_t>(ids.shape(1));
  shape.vocabulary = static_cast<uint64_t>(
      plan::bufferOf(plan, prefillLogits->buffer()).shape(1));
  for (const plan::Buffer &buffer : plan.buffers())
    if (buffer.kind() == plan::Buffer::CACHE && buffer.view_of() == 0)
      shape.maxSequenceLength = static_cast<uint64_t>(buffer.shape(2));
  return Status::success();
}

Status Session::open(const std::string &planPath,
                     comm::Communicator &communicator,
                     const SessionOptions &options,
                     std::unique_ptr<Session> &out) {
  if (options.train.gradAccum == 0)
    return failure("the gradient accumulation (micro-steps per optimizer "
                   "step) must be at least 1");
  auto state = std::make_unique<State>(communicator, options);
  state->planPath = planPath;
  BackendOptions backendOptions;
  backendOptions.threads = options.threads;
  ZR_RETURN_IF_ERROR(RankDevice::open(options.backend, backendOptions,
                                      communicator, state->device));
  state->counting = std::make_unique<comm::CountingCommunicator>(
      state->device->collectives());
  plan::Plan &plan = state->plan;
  ZR_RETURN_IF_ERROR(
      openPlan(planPath, static_cast<uint32_t>(communicator.size()), plan));
  state->executors.resize(plan.programs_size());
  state->traces.resize(options.trace ? plan.programs_size() : 0);
  state->stepProblem = state->findTraining();
  state->trainProblem = state->stepProblem;
  if (state->trainProblem.ok() && !state->optimizer)
    state->trainProblem =
        missingProgram(plan::PROGRAM_KIND_OPTIMIZER_STEP, "train");
  if (state->trainProblem.ok())
    ZR_RETURN_IF_ERROR(checkProgramSupported(plan, *state->optimizer,
                                             state->device->backend()));
  state->generateProblem = state->findGeneration();
  state->logprobsProblem = state->findLogprobs();

  // The generation state is held only while a generation runs (generate()).
  ZR_RETURN_IF_ERROR(RankMemory::load(
      planPath, plan, static_cast<uint32_t>(communicator.rank()),
      state->device->backend(), state->memory,
      RankMemory::GenerationState::Deferred, options.offloadDir,
      options.nvmeIo));
  if (state->stepProblem.ok())
    ZR_RETURN_IF_ERROR(state->prepare(*state->step));
  if (state->trainProblem.ok())
    ZR_RETURN_IF_ERROR(state->prepare(*state->optimizer));
  out.reset(new Session(std::move(state)));
  return Status::success();
}

Session::Session(std::unique_ptr<State> state) : state(std::move(state)) {}
Session::~Session() = default;

bool Session::stopped() const { return state->broken; }
const plan::Plan &Session::plan() const { return state->plan; }
const std::string &Session::planPath() const { return state->planPath; }
int Session::rank() const { return state->communicator.rank(); }
int Session::worldSize() const { return state->communicator.size(); }
const std::string &Session::backendDescription() const {
  return state->device->description();
}

Status Session::State::usable() const {
  if (broken)
    return failure("a program failed earlier in this session, which runs "
                   "nothing more");
  return Status::success();
}

Status Session::State::stopOn(Status status) {
  broken |= !status.ok();
  return status;
}

//===----------------------------------------------------------------------===//
// Executors and inputs
//===----------------------------------------------------------------------===//

int Session::State::indexOf(const plan::Program &program) const {
  // A repeated message field holds pointers: its elements are not an array.
  for (int index = 0; index < plan.programs_size(); ++index)
    if (&plan.programs(index) == &program)
      return index;
  return -1;
}

Status Session::State::prepare(const plan::Program &program) {
  int index = indexOf(program);
  if (executors[index])
    return Status::success();
  ExecutorOptions executorOptions;
  executorOptions.check = options.check;
  executorOptions.hostKernels = &device->hostKernels();
  if (options.trace)
    executorOptions.trace = &traces[index];
  return Executor::create(plan, program, *memory, *counting, executorOptions,
                          executors[index]);
}

Status Session::State::runPrepared(const plan::Program &program) {
  int index = indexOf(program);
  if (options.trace) {
    if (!traceClockStarted) {
      // The ranks' timelines start together.
      ZR_RETURN_IF_ERROR(communicator.barrier());
      for (TraceRecorder &trace : traces)
        trace.setOrigin();
      traceClockStarted = true;
    }
    traces[index].prepareRun(program.instructions_size());
  }
  return executors[index]->run();
}

Status
Session::State::checkInputs(const plan::Program &program,
                            const std::vector<ProgramInput> &inputs) const {
  for (const ProgramInput &input : inputs) {
    const plan::Binding *binding =
        plan::findBinding(program.inputs(), input.name);
    if (!binding)
      return failure("program ", inQuotes(program.name()), " has no input ",
                     inQuotes(input.name));
    uint64_t bytes = plan::bufferOf(plan, binding->buffer()).bytes();
    if (input.bytes != bytes || !input.data)
      return failure("input ", inQuotes(input.name), " of program ",
                     inQuotes(program.name()), " takes ", bytes, " bytes, not ",
                     input.bytes);
  }
  for (const plan::Binding &binding : program.inputs())
    if (std::count_if(inputs.begin(), inputs.end(),
                      [&](const ProgramInput &input) {
                        return input.name == binding.name();
                      }) != 1)
      return failure("input ", inQuotes(binding.name()), " of program ",
                     inQuotes(program.name()), " is not fed exactly once");
  return Status::success();
}

Status Session::State::writeInputs(const plan::Program &program,
                                   const std::vector<ProgramInput> &inputs) {
  // The arena reuses the inputs' bytes once they are dead: they are written
  // before every run.
  for (const ProgramInput &input : inputs)
    ZR_RETURN_IF_ERROR(
        memory->write(plan::findBinding(program.inputs(), input.name)->buffer(),
                      input.data, input.bytes));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// One program on its own
//===----------------------------------------------------------------------===//

Status Session::checkRun(const plan::Program &program,
                         const std::vector<ProgramInput> &inputs) const {
  const State &s = *state;
  ZR_RETURN_IF_ERROR(s.usable());
  if (s.indexOf(program) < 0)
    return failure("program ", inQuotes(program.name()),
                   " is not a program of this session's plan");
  switch (program.kind()) {
  case plan::PROGRAM_KIND_GENERATE_BEGIN:
  case plan::PROGRAM_KIND_PREFILL:
  case plan::PROGRAM_KIND_DECODE:
  case plan::PROGRAM_KIND_GENERATE_END:
    return failure("program ", inQuotes(program.name()),
                   " is a generation program; it runs inside a generation "
                   "(zrun generate), which holds its KV cache");
  default:
    break;
  }
  ZR_RETURN_IF_ERROR(
      checkProgramSupported(s.plan, program, s.device->backend()));
  return s.checkInputs(program, inputs);
}

Status Session::run(const plan::Program &program,
                    const std::vector<ProgramInput> &inputs) {
  State &s = *state;
  ZR_RETURN_IF_ERROR(checkRun(program, inputs));
  // From here the ranks run together: a failure stops the session.
  ZR_RETURN_IF_ERROR(s.stopOn(s.prepare(program)));
  ZR_RETURN_IF_ERROR(s.stopOn(s.writeInputs(program, inputs)));
  return s.stopOn(s.runPrepared(program));
}

Status Session::readOutput(const plan::Binding &binding,
                           std::vector<uint8_t> &bytes) const {
  const plan::Buffer &buffer = plan::bufferOf(state->plan, binding.buffer());
  bytes.resize(plan::elementCount(buffer) * plan::dataTypeSize(buffer.dtype()));
  return state->memory->read(binding.buffer(), bytes.data(), bytes.size());
}

uint64_t Session::bytesGatheredLastRun(const plan::Program &program) const {
  const std::unique_ptr<Executor> &executor =
      state->executors[state->indexOf(program)];
  return executor ? executor->bytesGatheredLastRun() : 0;
}

uint64_t Session::bytesReducedLastRun(const plan::Program &program) const {
  const std::unique_ptr<Executor> &executor =
      state->executors[state->indexOf(program)];
  return executor ? executor->bytesReducedLastRun() : 0;
}

uint64_t Session::bytesTierCopiedLastRun(const plan::Program &program) const {
  const std::unique_ptr<Executor> &executor =
      state->executors[state->indexOf(program)];
  return executor ? executor->bytesTierCopiedLastRun() : 0;
}

//===----------------------------------------------------------------------===//
// Traces and memory
//===----------------------------------------------------------------------===//

std::string Session::traceEvents() const {
  const State &s = *state;
  std::string mine;
  // Only the programs that ran: each brings its own metadata events.
  for (size_t index = 0; index < s.traces.size(); ++index)
    if (!s.traces[index].empty())
      mine += (mine.empty() ? "" : ",\n") +
              s.traces[index].eventsJson(
                  s.plan, s.plan.programs(static_cast<int>(index)),
                  s.communicator.rank());
  return mine;
}

MemoryFigures Session::memory() const {
  const RankMemory &memory = *state->memory;
  MemoryFigures figures;
  figures.currentBytes = memory.heldBytes();
  figures.peakBytes = memory.peakBytes();
  figures.generationBytes = memory.generationBytes();
  figures.trainingStateBytes = memory.stateSection().bytes();
  figures.arenaBytes = memory.arenaBytes();
  return figures;
}

const RankMemory &Session::rankMemory() const { return *state->memory; }
