//===- Session.cpp - one rank's session over one plan: train and generate -===//

#include "runtime/session/Session.h"

#include "runtime/Executor.h"
#include "runtime/Memory.h"
#include "runtime/Trace.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/session/RankDevice.h"
#include "runtime/tooling/CountingCommunicator.h"
#include "runtime/tooling/PlanQueries.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

using namespace zplan;
using namespace zplan::session;
using zplan::tooling::bufferOf;
using zplan::tooling::elementCount;
using zplan::tooling::findBinding;
using zplan::tooling::shapeOf;
using zplan::tooling::typeName;

namespace {

constexpr const char *kStepProgram = "train_micro_step";
constexpr const char *kOptimizerProgram = "optimizer_step";

/// The generation programs, in the order a generation runs them
/// (docs/generation.md section 1).
enum GenerationProgram { kBegin, kPrefill, kDecode, kEnd, kGenerationPrograms };
constexpr const char *kGenerationNames[kGenerationPrograms] = {
    "generate_begin", "prefill", "decode", "generate_end"};

const plan::Program *findProgram(const plan::Plan &plan,
                                 const std::string &name) {
  for (const plan::Program &program : plan.programs())
    if (program.name() == name)
      return &program;
  return nullptr;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

} // namespace

/// Everything the session holds; Session.h's comments describe the parts.
struct Session::State {
  State(comm::Communicator &communicator, const SessionOptions &options)
      : communicator(communicator), options(options) {}

  std::string planPath;
  /// The host communicator (MPI): host data, agreement, broadcasts.
  comm::Communicator &communicator;
  /// The backend and the executors' collectives (NCCL on CUDA).
  std::unique_ptr<RankDevice> device;
  /// What every executor talks through: counts the bytes they gather.
  std::unique_ptr<tooling::CountingCommunicator> counting;
  SessionOptions options;
  plan::Plan plan;
  std::unique_ptr<RankMemory> memory;
  /// Set when a program failed: the ranks are out of step (Session.h).
  bool broken = false;

  // Training: why the plan cannot train (empty when it can), and why it
  // cannot run a micro-step at all (empty when it can).
  Status trainProblem = Status::success();
  Status stepProblem = Status::success();
  const plan::Program *step = nullptr;
  const plan::Program *optimizer = nullptr;
  const plan::Binding *inputIds = nullptr;
  const plan::Binding *labels = nullptr;
  const plan::Binding *loss = nullptr;
  const plan::Binding *hyper = nullptr;
  /// Per group: its gradient accumulator (a STATE buffer id).
  std::vector<uint32_t> gradientOf;
  /// The optimizer step is SGD's (hyper[1] is then the momentum).
  bool sgd = false;
  std::unique_ptr<Executor> stepExecutor;
  std::unique_ptr<Executor> optimizerExecutor;
  uint64_t optimizerSteps = 0;
  uint64_t microInWindow = 0;
  /// This rank's losses of the window's micro-steps, summed in double.
  double windowLossSum = 0;
  WindowResult window;

  // Generation.
  Status generateProblem = Status::success();
  std::array<const plan::Program *, kGenerationPrograms> programs{};
  const plan::Binding *prefillIds = nullptr;
  const plan::Binding *prefillPositions = nullptr;
  const plan::Binding *lastIndex = nullptr;
  const plan::Binding *prefillLogits = nullptr;
  const plan::Binding *decodeIds = nullptr;
  const plan::Binding *decodePositions = nullptr;
  const plan::Binding *decodeLogits = nullptr;
  generate::GenerationShape shape;
  std::array<TraceRecorder, kGenerationPrograms> traces;
  /// The generation programs' executors, while a generation runs (and
  /// after one failed: destroying them would join a comm thread that may
  /// wait forever in a collective the other ranks left).
  std::array<std::unique_ptr<Executor>, kGenerationPrograms> executors;

  Status analyzeTraining();
  Status analyzeGeneration();
  Status findGenerationBinding(const plan::Program &program, bool input,
                               const std::string &name, plan::DataType dtype,
                               const std::vector<int64_t> &shape,
                               const plan::Binding *&binding) const;
  /// Fails once the session stopped (Session::stopped()).
  Status usable() const;
  /// Returns `status`, stopping the session when it is a failure: for
  /// failures once the ranks began running programs together.
  Status stopOn(Status status);
  Status microStep(const TrainBatch &batch, double &loss);
  Status gatherGradients(const std::vector<ProgramInput> &inputs, float &loss,
                         std::vector<std::vector<float>> &groups);
  Status checkBatch(const TrainBatch &batch) const;
  std::vector<ProgramInput> inputsOf(const TrainBatch &batch) const;
  Status checkInputs(const std::vector<ProgramInput> &inputs) const;
  Status runMicroStep(const std::vector<ProgramInput> &inputs,
                      float &localLoss);
  Status gradientNorm(double gradScale, double &norm);
  Status runOptimizer(double lr);
  Status startGeneration(const GenerateRequest &request,
                         generate::GenerationState &generation) const;
  Status chooseTokens(generate::GenerationState &generation,
                      generate::Sampler &sampler, const plan::Binding &logits,
                      std::vector<float> &history);
  /// Where the last step's logits are copied on a backend whose memory is
  /// not the host's (kept across steps).
  std::vector<float> logitsOnHost;
};

//===----------------------------------------------------------------------===//
// Open: the plan, what it can do, the memory
//===----------------------------------------------------------------------===//

/// Finds the training programs, bindings and gradient buffers; fails on a
/// plan that has a micro-step it cannot run (the reason stays in
/// stepProblem / trainProblem).
Status Session::State::analyzeTraining() {
  step = findProgram(plan, kStepProgram);
  optimizer = findProgram(plan, kOptimizerProgram);
  if (!step)
    return failure("the plan has no program ", inQuotes(kStepProgram),
                   ": compile the model with zcc --mode train");
  ZR_RETURN_IF_ERROR(checkProgramSupported(plan, *step));
  inputIds = findBinding(step->inputs(), "input_ids");
  labels = findBinding(step->inputs(), "labels");
  loss = findBinding(step->outputs(), "loss");
  if (!loss)
    return failure("program ", inQuotes(kStepProgram), " has no output 'loss'");
  const plan::Buffer &lossBuffer = bufferOf(plan, loss->buffer());
  if (lossBuffer.dtype() != plan::F32 || elementCount(lossBuffer) != 1)
    return failure("program ", inQuotes(kStepProgram),
                   "'s output 'loss' is not one f32 value");
  gradientOf.assign(plan.groups_size(), 0);
  for (const plan::Instruction &instruction : step->instructions())
    if (instruction.opcode() == plan::OPCODE_REDUCE_SCATTER ||
        instruction.opcode() == plan::OPCODE_ALL_REDUCE)
      gradientOf[instruction.group()] = instruction.results(1);
  for (int group = 0; group < plan.groups_size(); ++group)
    if (!gradientOf[group])
      return failure("program ", inQuotes(kStepProgram),
                     " never reduces the gradients of group @",
                     plan.groups(group).name());
  return Status::success();
}

/// The plan is a generation plan: its programs, their bindings, the shapes
/// B, P, L and V they agree on.
Status Session::State::analyzeGeneration() {
  for (int index = 0; index < kGenerationPrograms; ++index) {
    programs[index] = findProgram(plan, kGenerationNames[index]);
    if (!programs[index])
      return failure("the plan has no program ",
                     inQuotes(kGenerationNames[index]),
                     ": compile the model with zcc --mode generate");
    ZR_RETURN_IF_ERROR(checkProgramSupported(plan, *programs[index]));
  }
  const plan::Program &prefill = *programs[kPrefill];
  const plan::Program &decode = *programs[kDecode];
  ZR_RETURN_IF_ERROR(findGenerationBinding(prefill, true, "input_ids",
                                           plan::I64, {-1, -1}, prefillIds));
  const plan::Buffer &ids = bufferOf(plan, prefillIds->buffer());
  int64_t batch = ids.shape(0), prompt = ids.shape(1);
  ZR_RETURN_IF_ERROR(findGenerationBinding(prefill, true, "positions",
                                           plan::I64, {batch, prompt},
                                           prefillPositions));
  ZR_RETURN_IF_ERROR(findGenerationBinding(prefill, true, "last_index",
                                           plan::I64, {batch}, lastIndex));
  ZR_RETURN_IF_ERROR(findGenerationBinding(prefill, false, "logits", plan::F32,
                                           {batch, -1}, prefillLogits));
  int64_t vocabulary = bufferOf(plan, prefillLogits->buffer()).shape(1);
  ZR_RETURN_IF_ERROR(findGenerationBinding(decode, true, "input_ids", plan::I64,
                                           {batch, 1}, decodeIds));
  ZR_RETURN_IF_ERROR(findGenerationBinding(decode, true, "positions", plan::I64,
                                           {batch, 1}, decodePositions));
  ZR_RETURN_IF_ERROR(findGenerationBinding(decode, false, "logits", plan::F32,
                                           {batch, vocabulary}, decodeLogits));
  for (int index : {kBegin, kEnd})
    if (programs[index]->inputs_size() != 0)
      return failure("program ", inQuotes(kGenerationNames[index]),
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
          shapeText(shapeOf(buffer)), "; generation needs [", batch,
          ", heads, ", slots ? std::to_string(slots) : "slots", ", head size]");
    slots = buffer.shape(2);
  }
  if (slots == 0)
    return failure("the plan has no KV cache buffer; compile the model with "
                   "zcc --mode generate");
  if (slots <= prompt)
    return failure("the plan's KV cache has ", slots,
                   " slots, no more than its prompt length ", prompt);
  shape.batch = static_cast<uint64_t>(batch);
  shape.promptLength = static_cast<uint64_t>(prompt);
  shape.maxSequenceLength = static_cast<uint64_t>(slots);
  shape.vocabulary = static_cast<uint64_t>(vocabulary);
  return Status::success();
}

/// Finds `name` among the inputs (or outputs) of generation program
/// `program` and checks its buffer: element type, shape (-1: any extent),
/// and (inputs) an arena buffer the session fills.
Status Session::State::findGenerationBinding(
    const plan::Program &program, bool input, const std::string &name,
    plan::DataType dtype, const std::vector<int64_t> &expectedShape,
    const plan::Binding *&binding) const {
  const char *kind = input ? "input" : "output";
  binding = findBinding(input ? program.inputs() : program.outputs(), name);
  if (!binding)
    return failure("program ", inQuotes(program.name()), " has no ", kind, " ",
                   inQuotes(name),
                   "; compile the model with zcc --mode generate");
  const plan::Buffer &buffer = bufferOf(plan, binding->buffer());
  std::vector<int64_t> expected = expectedShape;
  for (size_t i = 0;
       i < expected.size() && i < static_cast<size_t>(buffer.shape_size()); ++i)
    if (expected[i] < 0)
      expected[i] = buffer.shape(i);
  if (buffer.dtype() != dtype || shapeOf(buffer) != expected)
    return failure("program ", inQuotes(program.name()), "'s ", kind, " ",
                   inQuotes(name), " is ", shapeText(shapeOf(buffer)), " ",
                   typeName(buffer.dtype()), "; generation needs ",
                   shapeText(expected), " ", typeName(dtype));
  if (input && buffer.kind() != plan::Buffer::ARENA)
    return failure("program ", inQuotes(program.name()), "'s input ",
                   inQuotes(name), " is bound to buffer ", buffer.id(), " ",
                   inQuotes(buffer.name()),
                   ", which is not an arena buffer zrun can fill");
  return Status::success();
}

Status Session::open(const std::string &planPath,
                     comm::Communicator &communicator,
                     const SessionOptions &options,
                     std::unique_ptr<Session> &out) {
  if (options.train.gradAccum == 0)
    return failure("the gradient accumulation (micro-steps per optimizer "
                   "step) must be at least 1");
  if (options.threads < 1)
    return failure("the BLAS threads per rank must be at least 1, not ",
                   options.threads);
  auto state = std::make_unique<State>(communicator, options);
  state->planPath = planPath;
  ZR_RETURN_IF_ERROR(
      RankDevice::open(options.backend, communicator, state->device));
  Backend &backend = state->device->backend();
  state->counting = std::make_unique<tooling::CountingCommunicator>(
      state->device->collectives());
  plan::Plan &plan = state->plan;
  ZR_RETURN_IF_ERROR(plan::loadPlan(planPath, plan));
  ZR_RETURN_IF_ERROR(
      plan::validatePlan(plan, static_cast<uint32_t>(communicator.size())));
  state->stepProblem = state->analyzeTraining();
  state->trainProblem = state->stepProblem;
  if (state->trainProblem.ok() && !state->optimizer)
    state->trainProblem =
        failure("the plan has no program ", inQuotes(kOptimizerProgram),
                ": compile the model with zcc --mode train");
  if (state->trainProblem.ok()) {
    ZR_RETURN_IF_ERROR(checkProgramSupported(plan, *state->optimizer, backend));
    for (const plan::Instruction &instruction :
         state->optimizer->instructions())
      state->sgd |= instruction.opcode() == plan::OPCODE_SGD;
    state->hyper = findBinding(state->optimizer->inputs(), "hyper");
    if (!state->hyper ||
        bufferOf(plan, state->hyper->buffer()).dtype() != plan::F32 ||
        elementCount(bufferOf(plan, state->hyper->buffer())) != 8)
      state->trainProblem = failure("program ", inQuotes(kOptimizerProgram),
                                    " has no f32[8] input 'hyper'");
  }
  state->generateProblem = state->analyzeGeneration();

  // The generation state is held only while a generation runs (generate()).
  ZR_RETURN_IF_ERROR(RankMemory::load(
      planPath, plan, static_cast<uint32_t>(communicator.rank()), backend,
      state->memory, RankMemory::GenerationState::Deferred));
  ExecutorOptions executorOptions;
  executorOptions.check = options.check;
  if (state->stepProblem.ok())
    ZR_RETURN_IF_ERROR(Executor::create(plan, *state->step, *state->memory,
                                        *state->counting, executorOptions,
                                        state->stepExecutor));
  if (state->trainProblem.ok())
    ZR_RETURN_IF_ERROR(Executor::create(plan, *state->optimizer, *state->memory,
                                        *state->counting, executorOptions,
                                        state->optimizerExecutor));
  cpu::setBlasThreads(options.threads);
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
// Training
//===----------------------------------------------------------------------===//

TrainConfig zplan::session::trainConfigOf(const train::TrainOptions &options) {
  TrainConfig config;
  config.gradAccum = options.gradAccum;
  config.schedule = options.schedule();
  config.optimizer = options.optimizer();
  return config;
}

bool Session::canTrain() const { return state->trainProblem.ok(); }
Status Session::checkCanTrain() const { return state->trainProblem; }
Status Session::checkCanStep() const { return state->stepProblem; }

std::vector<int64_t> Session::trainInputShape() const {
  if (!state->inputIds)
    return {};
  return shapeOf(bufferOf(state->plan, state->inputIds->buffer()));
}

uint64_t Session::vocabulary() const {
  for (const char *name : {"infer", "prefill"})
    if (const plan::Program *program = findProgram(state->plan, name))
      if (const plan::Binding *logits =
              findBinding(program->outputs(), "logits"))
        return static_cast<uint64_t>(
            bufferOf(state->plan, logits->buffer()).shape().rbegin()[0]);
  return 0;
}

/// The batch fits `train_micro_step`'s input_ids (and labels).
Status Session::State::checkBatch(const TrainBatch &batch) const {
  ZR_RETURN_IF_ERROR(stepProblem);
  if (!inputIds)
    return failure("program ", inQuotes(kStepProgram),
                   " has no input 'input_ids' to feed tokens to");
  const plan::Buffer &ids = bufferOf(plan, inputIds->buffer());
  if (ids.dtype() != plan::I64 || ids.shape_size() != 2)
    return failure("program ", inQuotes(kStepProgram),
                   "'s input 'input_ids' is not int64 [batch, sequence]");
  if (labels && shapeOf(bufferOf(plan, labels->buffer())) != shapeOf(ids))
    return failure("program ", inQuotes(kStepProgram),
                   "'s input 'labels' differs in shape from 'input_ids'");
  if (batch.shape != shapeOf(ids) || !batch.inputIds)
    return failure("the micro-batch is ", shapeText(batch.shape), "; program ",
                   inQuotes(kStepProgram), " takes input_ids ",
                   shapeText(shapeOf(ids)), " int64");
  return Status::success();
}

/// `batch` (checked) as the step's inputs: input_ids, and labels when the
/// step takes them.
std::vector<ProgramInput>
Session::State::inputsOf(const TrainBatch &batch) const {
  uint64_t bytes =
      elementCount(bufferOf(plan, inputIds->buffer())) * sizeof(int64_t);
  std::vector<ProgramInput> inputs = {{"input_ids", batch.inputIds, bytes}};
  if (labels)
    inputs.push_back(
        {"labels", batch.labels ? batch.labels : batch.inputIds, bytes});
  return inputs;
}

/// Every input of `train_micro_step` is fed once, with its buffer's bytes.
Status
Session::State::checkInputs(const std::vector<ProgramInput> &inputs) const {
  ZR_RETURN_IF_ERROR(stepProblem);
  for (const ProgramInput &input : inputs) {
    const plan::Binding *binding = findBinding(step->inputs(), input.name);
    if (!binding)
      return failure("program ", inQuotes(kStepProgram), " has no input ",
                     inQuotes(input.name));
    uint64_t bytes = bufferOf(plan, binding->buffer()).bytes();
    if (input.bytes != bytes || !input.data)
      return failure("input ", inQuotes(input.name), " of program ",
                     inQuotes(kStepProgram), " takes ", bytes, " bytes, not ",
                     input.bytes);
  }
  for (const plan::Binding &binding : step->inputs())
    if (std::count_if(inputs.begin(), inputs.end(),
                      [&](const ProgramInput &input) {
                        return input.name == binding.name();
                      }) != 1)
      return failure("input ", inQuotes(binding.name()), " of program ",
                     inQuotes(kStepProgram), " is not fed exactly once");
  return Status::success();
}

/// Feeds `inputs` (checked) and runs `train_micro_step`; `localLoss` is
/// this rank's.
Status Session::State::runMicroStep(const std::vector<ProgramInput> &inputs,
                                    float &localLoss) {
  // The arena reuses the inputs' bytes once they are dead: refill them
  // before every run.
  for (const ProgramInput &input : inputs)
    ZR_RETURN_IF_ERROR(
        memory->write(findBinding(step->inputs(), input.name)->buffer(),
                      input.data, input.bytes));
  ZR_RETURN_IF_ERROR(stepExecutor->run());
  return memory->read(loss->buffer(), &localLoss, sizeof(localLoss));
}

/// The global L2 norm of the step's mean gradient (the accumulators times
/// `gradScale`): each rank sums the squares of its gradient shards, and of
/// the persistent groups (whole on every rank) only rank 0 does; one scalar
/// all-reduce adds them up. Summed on the host, in double (from a copy of
/// each accumulator where backend memory is a device's).
Status Session::State::gradientNorm(double gradScale, double &norm) {
  double squares = 0;
  std::vector<float> copy;
  for (int group = 0; group < plan.groups_size(); ++group) {
    if (plan.groups(group).persistent() && communicator.rank() != 0)
      continue;
    uint64_t count = elementCount(bufferOf(plan, gradientOf[group]));
    const float *gradient;
    ZR_RETURN_IF_ERROR(memory->view(gradientOf[group], count, copy, gradient));
    for (uint64_t i = 0; i < count; ++i)
      squares += static_cast<double>(gradient[i]) * gradient[i];
  }
  ZR_RETURN_IF_ERROR(communicator.allReduce(&squares, 1, ElementType::F64));
  norm = std::sqrt(squares) * gradScale;
  return Status::success();
}

/// Optimizer step number optimizerSteps (0-based) at rate `lr`.
Status Session::State::runOptimizer(double lr) {
  const TrainConfig &config = options.train;
  train::OptimizerSettings settings = config.optimizer;
  if (sgd)
    settings.beta1 = config.momentum;
  double gradScale =
      1.0 / (static_cast<double>(config.gradAccum) * communicator.size());
  if (double clip = config.clipGradNorm; clip > 0) {
    // torch.nn.utils.clip_grad_norm_'s coefficient, clamped to 1.
    double norm = 0;
    ZR_RETURN_IF_ERROR(gradientNorm(gradScale, norm));
    gradScale *= std::min(1.0, clip / (norm + 1e-6));
  }
  std::array<float, 8> hyperValues =
      train::optimizerHyper(settings, lr, gradScale, optimizerSteps + 1);
  ZR_RETURN_IF_ERROR(memory->write(hyper->buffer(), hyperValues.data(),
                                   sizeof(float) * hyperValues.size()));
  return optimizerExecutor->run();
}

Status Session::trainStep(const TrainBatch &batch, double &loss) {
  State &s = *state;
  ZR_RETURN_IF_ERROR(s.trainProblem);
  ZR_RETURN_IF_ERROR(s.usable());
  ZR_RETURN_IF_ERROR(s.checkBatch(batch));
  return s.stopOn(s.microStep(batch, loss));
}

/// trainStep() on a checked batch.
Status Session::State::microStep(const TrainBatch &batch, double &loss) {
  State &s = *this;
  float local = 0;
  ZR_RETURN_IF_ERROR(s.runMicroStep(s.inputsOf(batch), local));
  s.windowLossSum += local;
  float total = local;
  ZR_RETURN_IF_ERROR(s.communicator.allReduce(&total, 1));
  loss = total / static_cast<double>(s.communicator.size());
  s.window = WindowResult();
  s.window.step = s.optimizerSteps;
  if (++s.microInWindow < s.options.train.gradAccum)
    return Status::success();
  // The window's loss exactly as zrun train has always logged it.
  float windowTotal = static_cast<float>(s.windowLossSum);
  ZR_RETURN_IF_ERROR(s.communicator.allReduce(&windowTotal, 1));
  double lr = s.options.train.schedule.at(s.optimizerSteps);
  ZR_RETURN_IF_ERROR(s.runOptimizer(lr));
  s.window.optimizerStepped = true;
  s.window.step = ++s.optimizerSteps;
  s.window.loss =
      windowTotal /
      (static_cast<double>(s.options.train.gradAccum) * s.communicator.size());
  s.window.lr = lr;
  s.microInWindow = 0;
  s.windowLossSum = 0;
  return Status::success();
}

const WindowResult &Session::lastWindow() const { return state->window; }
uint64_t Session::microStepsInWindow() const { return state->microInWindow; }
uint64_t Session::optimizerSteps() const { return state->optimizerSteps; }

Status Session::gradients(const std::vector<ProgramInput> &inputs, float &loss,
                          std::vector<std::vector<float>> &groups) {
  ZR_RETURN_IF_ERROR(state->usable());
  ZR_RETURN_IF_ERROR(state->checkInputs(inputs));
  return state->stopOn(state->gatherGradients(inputs, loss, groups));
}

/// gradients() on checked inputs.
Status
Session::State::gatherGradients(const std::vector<ProgramInput> &inputs,
                                float &loss,
                                std::vector<std::vector<float>> &groups) {
  State &s = *this;
  ZR_RETURN_IF_ERROR(s.runMicroStep(inputs, loss));
  ZR_RETURN_IF_ERROR(s.communicator.allReduce(&loss, 1));
  float ranks = static_cast<float>(s.communicator.size());
  loss /= ranks;
  // Every rank ran the same inputs, so the reduction summed N equal
  // gradients: divide by N.
  groups.assign(s.plan.groups_size(), {});
  for (int group = 0; group < s.plan.groups_size(); ++group) {
    const plan::Group &entry = s.plan.groups(group);
    std::vector<float> &whole = groups[group];
    whole.resize(entry.padded_elements());
    // Gathered on the host, over the host communicator.
    if (entry.persistent()) {
      ZR_RETURN_IF_ERROR(s.memory->read(s.gradientOf[group], whole.data(),
                                        whole.size() * sizeof(float)));
    } else {
      uint64_t count = entry.padded_elements() / s.communicator.size();
      std::vector<float> copy;
      const float *shard;
      ZR_RETURN_IF_ERROR(
          s.memory->view(s.gradientOf[group], count, copy, shard));
      ZR_RETURN_IF_ERROR(s.communicator.allGather(shard, whole.data(), count,
                                                  ElementType::F32));
    }
    for (float &value : whole)
      value /= ranks;
  }
  if (s.communicator.rank() != 0)
    groups.clear();
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Generation
//===----------------------------------------------------------------------===//

bool Session::canGenerate() const { return state->generateProblem.ok(); }
Status Session::checkCanGenerate() const { return state->generateProblem; }
const generate::GenerationShape &Session::generationShape() const {
  return state->shape;
}

Status Session::checkGenerateRequest(const GenerateRequest &request) const {
  generate::GenerationState generation;
  return state->startGeneration(request, generation);
}

/// The rows' state before prefill, from `request` checked against the plan.
Status
Session::State::startGeneration(const GenerateRequest &request,
                                generate::GenerationState &generation) const {
  ZR_RETURN_IF_ERROR(generateProblem);
  if (request.rows.maxNewTokens == 0)
    return failure("a generation makes at least 1 new token per row "
                   "(max_new_tokens 0)");
  return generate::GenerationState::create(
      shape, request.rows,
      request.promptSource.empty() ? "the prompts" : request.promptSource,
      request.lengthsSource.empty() ? "the prompt lengths"
                                    : request.lengthsSource,
      generation);
}

/// Picks every row's token of the next step from `logitsBinding` ([B, V])
/// and makes rank 0's choice every rank's; keeps the logits of unfinished
/// rows in `history` when it is not empty; accepts the step.
Status Session::State::chooseTokens(generate::GenerationState &generation,
                                    generate::Sampler &sampler,
                                    const plan::Binding &logitsBinding,
                                    std::vector<float> &history) {
  uint64_t step = generation.steps();
  const float *logits;
  ZR_RETURN_IF_ERROR(memory->view(logitsBinding.buffer(),
                                  shape.batch * shape.vocabulary, logitsOnHost,
                                  logits));
  std::vector<int64_t> tokens(shape.batch, 0);
  for (uint64_t row = 0; row < shape.batch; ++row) {
    if (generation.finished(row))
      continue; // fed only to keep the batch whole; its logits are ignored
    const float *rowLogits = logits + row * shape.vocabulary;
    if (Status status =
            sampler.next(rowLogits, shape.vocabulary, row, step, tokens[row]);
        !status.ok())
      return failure("program ",
                     inQuotes(kGenerationNames[step == 0 ? kPrefill : kDecode]),
                     " (generation step ", step, ") gave row ", row,
                     " logits it cannot choose from: ", status.message());
    if (!history.empty())
      std::memcpy(history.data() +
                      (step * shape.batch + row) * shape.vocabulary,
                  rowLogits, shape.vocabulary * sizeof(float));
  }
  // Every rank computed the same logits from the same inputs; broadcasting
  // rank 0's tokens makes the ranks' next inputs equal by construction.
  ZR_RETURN_IF_ERROR(communicator.broadcast(
      tokens.data(), tokens.size() * sizeof(int64_t), 0));
  generation.acceptStep(tokens);
  return Status::success();
}

namespace {

uint64_t activeRows(const generate::GenerationState &generation) {
  const generate::GenerationShape &shape = generation.generationShape();
  uint64_t active = 0;
  for (uint64_t row = 0; row < shape.batch; ++row)
    active += !generation.finished(row);
  return active;
}

/// Host storage for the int64 input `binding`, written to the buffer by
/// writeInputs() after the generation state filled it.
struct HostInput {
  const plan::Binding *binding;
  std::vector<int64_t> values;
};

HostInput hostInputFor(const plan::Plan &plan, const plan::Binding &binding) {
  return {&binding,
          std::vector<int64_t>(elementCount(bufferOf(plan, binding.buffer())))};
}

Status writeInputs(RankMemory &memory,
                   std::initializer_list<HostInput *> inputs) {
  for (HostInput *input : inputs)
    ZR_RETURN_IF_ERROR(memory.write(input->binding->buffer(),
                                    input->values.data(),
                                    input->values.size() * sizeof(int64_t)));
  return Status::success();
}

} // namespace

Status Session::generate(const GenerateRequest &request, GenerateResult &result,
                         const GenerateObserver &observer) {
  State &s = *state;
  ZR_RETURN_IF_ERROR(s.usable());
  generate::GenerationState generation;
  ZR_RETURN_IF_ERROR(s.startGeneration(request, generation));
  const generate::GenerationShape &shape = s.shape;
  result = GenerateResult();
  result.batch = shape.batch;
  result.maxNewTokens = generation.maxNewTokens();
  if (request.keepLogits)
    result.logits.assign(
        generation.maxNewTokens() * shape.batch * shape.vocabulary, 0.0f);

  // From here on the ranks are in a generation: a failure on one stops the
  // session (the others may be blocked in a collective), and the executors
  // and the state they point into are kept for the caller's abort. The
  // generation state exists from here to generate_end, and so do the
  // executors that resolved its addresses (Memory.h).
  ZR_RETURN_IF_ERROR(s.stopOn(s.memory->allocateGeneration()));
  std::array<std::unique_ptr<Executor>, kGenerationPrograms> &executors =
      s.executors;
  for (int index = 0; index < kGenerationPrograms; ++index) {
    ExecutorOptions options;
    options.check = s.options.check;
    const plan::Program &program = *s.programs[index];
    if (s.options.traceGeneration) {
      // Every run's events, up to a cap (24 MiB per queue) that a long
      // generation would pass; the rest are counted as dropped.
      constexpr uint64_t kMaxEventsPerQueue = uint64_t(1) << 20;
      uint64_t runs =
          index == kDecode ? std::max<uint64_t>(1, result.maxNewTokens - 1) : 1;
      s.traces[index].reserve(static_cast<size_t>(
          std::min(kMaxEventsPerQueue,
                   static_cast<uint64_t>(program.instructions_size()) * runs)));
      options.trace = &s.traces[index];
    }
    if (Status status = Executor::create(
            s.plan, program, *s.memory, *s.counting, options, executors[index]);
        !status.ok())
      return s.stopOn(status);
  }
  result.bytesDuring = s.memory->heldBytes();
  if (Status status = s.communicator.barrier(); !status.ok())
    return s.stopOn(status);
  for (TraceRecorder &trace : s.traces)
    trace.setOrigin();
  if (observer.started)
    observer.started();

  generate::Sampler sampler(request.sampling);
  auto run = [&](int index) { return executors[index]->run(); };
  auto stepDone = [&](uint64_t before) {
    if (observer.stepDone)
      observer.stepDone(generation.steps() - 1,
                        generation.generatedTokens() - before,
                        activeRows(generation));
  };
  HostInput prefillIds = hostInputFor(s.plan, *s.prefillIds);
  HostInput prefillPositions = hostInputFor(s.plan, *s.prefillPositions);
  HostInput lastIndex = hostInputFor(s.plan, *s.lastIndex);
  HostInput decodeIds = hostInputFor(s.plan, *s.decodeIds);
  HostInput decodePositions = hostInputFor(s.plan, *s.decodePositions);
  Status status = run(kBegin);
  if (status.ok()) {
    generation.fillPrefill(prefillIds.values.data(),
                           prefillPositions.values.data(),
                           lastIndex.values.data());
    status =
        writeInputs(*s.memory, {&prefillIds, &prefillPositions, &lastIndex});
  }
  if (status.ok())
    status = run(kPrefill);
  if (status.ok())
    status =
        s.chooseTokens(generation, sampler, *s.prefillLogits, result.logits);
  if (status.ok())
    stepDone(0);
  s.counting->reset();
  while (status.ok() && !generation.allFinished()) {
    // The arena reuses the inputs' bytes once they are dead: refill them
    // before every run.
    generation.fillDecode(decodeIds.values.data(),
                          decodePositions.values.data());
    status = writeInputs(*s.memory, {&decodeIds, &decodePositions});
    if (status.ok())
      status = run(kDecode);
    uint64_t before = generation.generatedTokens();
    if (status.ok())
      status =
          s.chooseTokens(generation, sampler, *s.decodeLogits, result.logits);
    if (status.ok()) {
      ++result.decodeSteps;
      stepDone(before);
    }
  }
  result.decodeGatheredBytes = s.counting->gatheredBytes();
  if (status.ok())
    status = run(kEnd);
  if (!status.ok())
    return s.stopOn(status);
  result.tokens = generation.outputTable();
  for (std::unique_ptr<Executor> &executor : executors)
    executor.reset(); // Joins the comm threads.
  s.memory->releaseGeneration();
  return Status::success();
}

std::string Session::generationTrace() const {
  State &s = *state;
  if (!s.options.traceGeneration || !s.generateProblem.ok())
    return "";
  std::string mine;
  for (int index = 0; index < kGenerationPrograms; ++index) {
    std::string events = s.traces[index].eventsJson(s.plan, *s.programs[index],
                                                    s.communicator.rank());
    std::string tag = "\"args\":{\"instruction\":";
    std::string tagged = std::string("\"args\":{\"program\":\"") +
                         kGenerationNames[index] + "\",\"instruction\":";
    for (size_t at = events.find(tag); at != std::string::npos;
         at = events.find(tag, at + tagged.size()))
      events.replace(at, tag.size(), tagged);
    if (!events.empty())
      mine += (mine.empty() ? "" : ",\n") + events;
  }
  return mine;
}

//===----------------------------------------------------------------------===//
// Checkpoints and memory
//===----------------------------------------------------------------------===//

namespace {

/// A rank's checkpoint regions in host memory -- its shards, the persistent
/// groups and the training state, in file order: the sections themselves
/// where the backend's memory is the host's, else host copies that
/// fromBackend() fills before a save and toBackend() writes back after a
/// load.
class CheckpointStaging {
public:
  explicit CheckpointStaging(const RankMemory &memory)
      : backend(memory.backend()),
        sections{&memory.shardSection(), &memory.persistentSection(),
                 &memory.stateSection()} {
    const char *names[] = {"shards", "persistent", "state"};
    bool inPlace = backend.hostAddressable();
    copies.resize(inPlace ? 0 : sections.size());
    for (size_t i = 0; i < sections.size(); ++i) {
      if (!inPlace)
        copies[i].resize(sections[i]->bytes());
      regions.push_back({names[i],
                         inPlace ? sections[i]->data() : copies[i].data(),
                         sections[i]->bytes()});
    }
  }

  Status fromBackend() {
    for (size_t i = 0; i < copies.size(); ++i)
      ZR_RETURN_IF_ERROR(backend.copyToHost(
          copies[i].data(), sections[i]->data(), copies[i].size()));
    return Status::success();
  }
  Status toBackend() {
    for (size_t i = 0; i < copies.size(); ++i)
      ZR_RETURN_IF_ERROR(backend.copyFromHost(
          sections[i]->data(), copies[i].data(), copies[i].size()));
    return Status::success();
  }

  std::vector<train::CheckpointRegion> regions;

private:
  Backend &backend;
  std::array<BackendMemory *, 3> sections;
  /// Empty where the regions are the sections themselves.
  std::vector<std::vector<uint8_t>> copies;
};

} // namespace

Status Session::save(const std::string &root,
                     const train::CheckpointValues &values,
                     const train::CheckpointOptions &options,
                     train::SaveResult &result) {
  State &s = *state;
  ZR_RETURN_IF_ERROR(s.usable());
  if (s.microInWindow != 0)
    return failure("cannot save in the middle of an accumulation window (",
                   s.microInWindow, " of ", s.options.train.gradAccum,
                   " micro-steps run): save after the optimizer step");
  train::CheckpointInfo info;
  info.planIdentity = tooling::planIdentity(s.plan);
  info.step = s.optimizerSteps;
  info.values = values;
  CheckpointStaging staging(*s.memory);
  ZR_RETURN_IF_ERROR(staging.fromBackend());
  return train::saveCheckpoint(root, info, staging.regions, s.communicator,
                               result, options);
}

Status Session::save(const std::string &root) {
  train::SaveResult result;
  return save(root,
              {{"grad-accum", std::to_string(state->options.train.gradAccum)}},
              {}, result);
}

Status Session::load(const std::string &path, train::LoadedCheckpoint &loaded) {
  State &s = *state;
  ZR_RETURN_IF_ERROR(s.usable());
  CheckpointStaging staging(*s.memory);
  ZR_RETURN_IF_ERROR(train::loadCheckpoint(path, tooling::planIdentity(s.plan),
                                           staging.regions, s.communicator,
                                           loaded));
  ZR_RETURN_IF_ERROR(staging.toBackend());
  s.optimizerSteps = loaded.step;
  s.microInWindow = 0;
  s.windowLossSum = 0;
  s.window = WindowResult();
  s.window.step = loaded.step;
  return Status::success();
}

Status Session::load(const std::string &path) {
  train::LoadedCheckpoint loaded;
  return load(path, loaded);
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
