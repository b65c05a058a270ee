//===- TrainSession.cpp - zrun PLAN train and zrun PLAN gradients ---------===//

#include "runtime/tooling/TrainSession.h"

#include "runtime/Executor.h"
#include "runtime/Memory.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/tooling/Diagnostics.h"
#include "runtime/tooling/Files.h"
#include "runtime/tooling/Npy.h"
#include "runtime/tooling/PlanQueries.h"
#include "runtime/tooling/RunSession.h"
#include "runtime/train/BatchSampler.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/LrSchedule.h"
#include "runtime/train/OptimizerHyper.h"
#include "runtime/train/Progress.h"
#include "runtime/train/TokenData.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <sys/stat.h>

using namespace zplan;
using namespace zplan::tooling;

namespace {

constexpr const char *kStepProgram = "train_micro_step";
constexpr const char *kOptimizerProgram = "optimizer_step";

/// One rank's training state: the plan, its two training programs and
/// their bindings, the rank's memory and an executor per program.
struct Training {
  Training(const Arguments &arguments, comm::Communicator &communicator)
      : arguments(arguments), communicator(communicator) {}

  const Arguments &arguments;
  comm::Communicator &communicator;
  plan::Plan plan;
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
  std::unique_ptr<RankMemory> memory;
  std::unique_ptr<Executor> stepExecutor;
  std::unique_ptr<Executor> optimizerExecutor;
};

/// Checks the plan is a training plan this zrun can run, and finds its
/// programs, bindings and gradient buffers.
Status checkTraining(Training &training, bool needOptimizer) {
  plan::Plan &plan = training.plan;
  ZR_RETURN_IF_ERROR(plan::loadPlan(training.arguments.planPath, plan));
  ZR_RETURN_IF_ERROR(plan::validatePlan(
      plan, static_cast<uint32_t>(training.communicator.size())));
  for (const plan::Program &program : plan.programs()) {
    if (program.name() == kStepProgram)
      training.step = &program;
    if (program.name() == kOptimizerProgram)
      training.optimizer = &program;
  }
  if (!training.step || (needOptimizer && !training.optimizer))
    return failure("the plan has no program ",
                   inQuotes(training.step ? kOptimizerProgram : kStepProgram),
                   ": compile the model with zcc --mode train");
  ZR_RETURN_IF_ERROR(checkProgramSupported(plan, *training.step));
  if (training.optimizer)
    ZR_RETURN_IF_ERROR(checkProgramSupported(plan, *training.optimizer));

  const plan::Program &step = *training.step;
  training.inputIds = findBinding(step.inputs(), "input_ids");
  training.labels = findBinding(step.inputs(), "labels");
  training.loss = findBinding(step.outputs(), "loss");
  if (!training.loss)
    return failure("program ", inQuotes(kStepProgram), " has no output 'loss'");
  const plan::Buffer &loss = bufferOf(plan, training.loss->buffer());
  if (loss.dtype() != plan::F32 || elementCount(loss) != 1)
    return failure("program ", inQuotes(kStepProgram),
                   "'s output 'loss' is not one f32 value");
  if (training.optimizer) {
    for (const plan::Instruction &instruction :
         training.optimizer->instructions())
      training.sgd |= instruction.opcode() == plan::OPCODE_SGD;
    training.hyper = findBinding(training.optimizer->inputs(), "hyper");
    if (!training.hyper ||
        bufferOf(plan, training.hyper->buffer()).dtype() != plan::F32 ||
        elementCount(bufferOf(plan, training.hyper->buffer())) != 8)
      return failure("program ", inQuotes(kOptimizerProgram),
                     " has no f32[8] input 'hyper'");
  }
  training.gradientOf.assign(plan.groups_size(), 0);
  for (const plan::Instruction &instruction : step.instructions())
    if (instruction.opcode() == plan::OPCODE_REDUCE_SCATTER ||
        instruction.opcode() == plan::OPCODE_ALL_REDUCE)
      training.gradientOf[instruction.group()] = instruction.results(1);
  for (int group = 0; group < plan.groups_size(); ++group)
    if (!training.gradientOf[group])
      return failure("program ", inQuotes(kStepProgram),
                     " never reduces the gradients of group @",
                     plan.groups(group).name());
  return Status::success();
}

Status loadTraining(Training &training) {
  ZR_RETURN_IF_ERROR(RankMemory::load(
      training.arguments.planPath, training.plan,
      static_cast<uint32_t>(training.communicator.rank()), training.memory));
  ExecutorOptions options;
  options.check = training.arguments.check;
  ZR_RETURN_IF_ERROR(Executor::create(training.plan, *training.step,
                                      *training.memory, training.communicator,
                                      options, training.stepExecutor));
  if (training.optimizer)
    ZR_RETURN_IF_ERROR(Executor::create(training.plan, *training.optimizer,
                                        *training.memory, training.communicator,
                                        options, training.optimizerExecutor));
  return Status::success();
}

float readLoss(const Training &training) {
  float loss;
  std::memcpy(&loss, training.memory->address(training.loss->buffer()),
              sizeof(loss));
  return loss;
}

//===----------------------------------------------------------------------===//
// gradients
//===----------------------------------------------------------------------===//

/// A file name for parameter `name`: '/' (a path separator) becomes '_'.
std::string gradientFileName(const std::string &name) {
  std::string file = name;
  std::replace(file.begin(), file.end(), '/', '_');
  return file + ".npy";
}

/// The whole gradient of every group on rank 0 (empty elsewhere), each
/// divided by the world size: every rank ran the same inputs, so the
/// reduce-scatter summed N equal gradients.
Status gatherGradients(Training &training,
                       std::vector<std::vector<float>> &groups) {
  const plan::Plan &plan = training.plan;
  float ranks = static_cast<float>(training.communicator.size());
  groups.assign(plan.groups_size(), {});
  for (int group = 0; group < plan.groups_size(); ++group) {
    const plan::Group &entry = plan.groups(group);
    std::vector<float> &whole = groups[group];
    whole.resize(entry.padded_elements());
    const void *gradient = training.memory->address(training.gradientOf[group]);
    if (entry.persistent()) {
      std::memcpy(whole.data(), gradient, whole.size() * sizeof(float));
    } else {
      ZR_RETURN_IF_ERROR(training.communicator.allGather(
          gradient, whole.data(),
          entry.padded_elements() / training.communicator.size(),
          ElementType::F32));
    }
    for (float &value : whole)
      value /= ranks;
  }
  return Status::success();
}

Status stageGradients(Training &training,
                      const std::vector<std::vector<float>> &groups, float loss,
                      StagedFiles &staged) {
  const plan::Plan &plan = training.plan;
  const std::string &directory = training.arguments.outputDir;
  std::string index;
  std::string encoded;
  ZR_RETURN_IF_ERROR(
      npy::encodeNpy(plan::F32, {}, &loss, sizeof(loss), encoded));
  ZR_RETURN_IF_ERROR(staged.stage(directory + "/loss.npy", encoded,
                                  "the loss to " + inQuotes(directory)));
  for (const plan::Parameter &parameter : plan.parameters()) {
    const std::vector<float> &whole = groups[parameter.group()];
    std::vector<int64_t> shape(parameter.shape().begin(),
                               parameter.shape().end());
    std::string file = gradientFileName(parameter.name());
    ZR_RETURN_IF_ERROR(npy::encodeNpy(
        plan::F32, shape, whole.data() + parameter.offset_elements(),
        parameter.num_elements() * sizeof(float), encoded));
    ZR_RETURN_IF_ERROR(
        staged.stage(directory + "/" + file, encoded,
                     "the gradient of " + inQuotes(parameter.name())));
    index += parameter.name() + "\t" + file + "\n";
  }
  return staged.stage(directory + "/gradients.txt", index,
                      "the gradient index in " + inQuotes(directory));
}

Status checkGradientInputs(Training &training,
                           std::vector<npy::Array> &inputs) {
  ZR_RETURN_IF_ERROR(
      checkInputNames(*training.step, training.arguments.inputs));
  ZR_RETURN_IF_ERROR(readProgramInputs(training.plan, *training.step,
                                       training.arguments.inputs, inputs));
  if (training.communicator.rank() != 0)
    return Status::success();
  const std::string &directory = training.arguments.outputDir;
  struct stat info;
  if (stat(directory.c_str(), &info) != 0 && mkdir(directory.c_str(), 0777))
    return failure("cannot create --output-dir ", inQuotes(directory), ": ",
                   std::strerror(errno));
  return checkWritable(directory + "/loss.npy", "--output-dir");
}

//===----------------------------------------------------------------------===//
// train
//===----------------------------------------------------------------------===//

/// The regions a checkpoint holds for this rank: its shards, the persistent
/// groups and the training state.
std::vector<train::CheckpointRegion> checkpointRegions(RankMemory &memory) {
  std::vector<train::CheckpointRegion> regions;
  for (auto [name, section] :
       {std::pair{"shards", &memory.shardSection()},
        std::pair{"persistent", &memory.persistentSection()},
        std::pair{"state", &memory.stateSection()}})
    regions.push_back({name, section->data(), section->bytes()});
  return regions;
}

/// The vocabulary size: the last dimension of the infer program's logits,
/// when the plan has one (tokens must be below it); 0 otherwise.
uint64_t vocabularyOf(const plan::Plan &plan) {
  for (const plan::Program &program : plan.programs())
    if (program.name() == "infer")
      if (const plan::Binding *logits =
              findBinding(program.outputs(), "logits"))
        return static_cast<uint64_t>(
            bufferOf(plan, logits->buffer()).shape().rbegin()[0]);
  return 0;
}

struct TrainRun {
  train::TokenData data;
  std::unique_ptr<train::BatchSampler> sampler;
  uint64_t rows = 0, rowTokens = 0;
  uint64_t firstStep = 0;
  std::ofstream lossLog;
};

Status checkTrainInputs(Training &training, TrainRun &run) {
  const train::TrainOptions &options = training.arguments.train;
  if (!training.inputIds)
    return failure("program ", inQuotes(kStepProgram),
                   " has no input 'input_ids' to feed tokens to");
  const plan::Buffer &ids =
      bufferOf(training.plan, training.inputIds->buffer());
  if (ids.dtype() != plan::I64 || ids.shape_size() != 2)
    return failure("program ", inQuotes(kStepProgram),
                   "'s input 'input_ids' is not int64 [batch, sequence]");
  if (training.labels &&
      shapeOf(bufferOf(training.plan, training.labels->buffer())) !=
          shapeOf(ids))
    return failure("program ", inQuotes(kStepProgram),
                   "'s input 'labels' differs in shape from 'input_ids'");
  run.rows = static_cast<uint64_t>(ids.shape(0));
  run.rowTokens = static_cast<uint64_t>(ids.shape(1));
  train::TokenDataOptions dataOptions;
  dataOptions.rawType = options.dataType;
  dataOptions.rowTokens = run.rowTokens;
  dataOptions.vocabSize = vocabularyOf(training.plan);
  ZR_RETURN_IF_ERROR(run.data.open(options.dataPath, dataOptions));
  train::BatchShape shape;
  shape.rows = run.rows;
  shape.rowTokens = run.rowTokens;
  shape.ranks = static_cast<uint64_t>(training.communicator.size());
  shape.microSteps = options.gradAccum;
  run.sampler = std::make_unique<train::BatchSampler>(options.seed,
                                                      run.data.size(), shape);
  if (!options.lossLogPath.empty() && training.communicator.rank() == 0)
    ZR_RETURN_IF_ERROR(checkWritable(options.lossLogPath, "--loss-log"));
  return Status::success();
}

/// Resumes from --resume: the state and the step; the batch rows are a
/// function of (seed, step), so a resumed run reads what an uninterrupted
/// one would have.
Status resume(Training &training, TrainRun &run) {
  const train::TrainOptions &options = training.arguments.train;
  train::LoadedCheckpoint loaded;
  ZR_RETURN_IF_ERROR(train::loadCheckpoint(
      options.resumeFrom, planIdentity(training.plan),
      checkpointRegions(*training.memory), training.communicator, loaded));
  ZR_RETURN_IF_ERROR(options.checkResume(loaded, run.data.size()));
  run.firstStep = loaded.step;
  return Status::success();
}

void runMicroSteps(Training &training, TrainRun &run, uint64_t step,
                   double &lossSum) {
  const train::TrainOptions &options = training.arguments.train;
  comm::Communicator &communicator = training.communicator;
  auto *ids = reinterpret_cast<int64_t *>(
      training.memory->address(training.inputIds->buffer()));
  for (uint64_t micro = 0; micro < options.gradAccum; ++micro) {
    // The arena reuses the inputs' bytes once they are dead: refill them
    // before every run.
    if (Status status =
            run.sampler->fill(run.data, step, micro,
                              static_cast<uint64_t>(communicator.rank()), ids);
        !status.ok())
      abortRun(communicator, status);
    if (training.labels)
      std::memcpy(training.memory->address(training.labels->buffer()), ids,
                  run.rows * run.rowTokens * sizeof(int64_t));
    if (Status status = training.stepExecutor->run(); !status.ok())
      abortRun(communicator, status);
    lossSum += readLoss(training);
  }
}

/// The global L2 norm of the step's mean gradient (the accumulators times
/// `gradScale`): each rank sums the squares of its gradient shards, and of
/// the persistent groups (whole on every rank) only rank 0 does; one scalar
/// all-reduce adds them up. Read on the host: the CPU backend's memory.
double gradientNorm(Training &training, double gradScale) {
  const plan::Plan &plan = training.plan;
  double squares = 0;
  for (int group = 0; group < plan.groups_size(); ++group) {
    if (plan.groups(group).persistent() && training.communicator.rank() != 0)
      continue;
    const plan::Buffer &buffer = bufferOf(plan, training.gradientOf[group]);
    const auto *gradient = reinterpret_cast<const float *>(
        training.memory->address(training.gradientOf[group]));
    for (uint64_t i = 0, n = elementCount(buffer); i < n; ++i)
      squares += static_cast<double>(gradient[i]) * gradient[i];
  }
  if (Status status =
          training.communicator.allReduce(&squares, 1, ElementType::F64);
      !status.ok())
    abortRun(training.communicator, status);
  return std::sqrt(squares) * gradScale;
}

void runOptimizer(Training &training, uint64_t step, double lr) {
  const train::TrainOptions &options = training.arguments.train;
  train::OptimizerSettings settings = options.optimizer();
  if (training.sgd)
    settings.beta1 = training.arguments.momentum;
  double gradScale = 1.0 / (static_cast<double>(options.gradAccum) *
                            training.communicator.size());
  if (double clip = training.arguments.clipGradNorm; clip > 0) {
    // torch.nn.utils.clip_grad_norm_'s coefficient, clamped to 1.
    double norm = gradientNorm(training, gradScale);
    gradScale *= std::min(1.0, clip / (norm + 1e-6));
  }
  std::array<float, 8> hyper =
      train::optimizerHyper(settings, lr, gradScale, step + 1);
  std::memcpy(training.memory->address(training.hyper->buffer()), hyper.data(),
              sizeof(float) * hyper.size());
  if (Status status = training.optimizerExecutor->run(); !status.ok())
    abortRun(training.communicator, status);
}

} // namespace

int zplan::tooling::writeGradients(const Arguments &arguments,
                                   comm::Communicator &communicator) {
  Training training(arguments, communicator);
  std::vector<npy::Array> inputs;
  Status checked = checkTraining(training, /*needOptimizer=*/false);
  if (checked.ok())
    checked = checkGradientInputs(training, inputs);
  if (!agree(communicator, checked))
    return 1;
  if (!agree(communicator, loadTraining(training)))
    return 1;
  cpu::setBlasThreads(arguments.threads);
  for (int i = 0; i < training.step->inputs_size(); ++i)
    std::memcpy(training.memory->address(training.step->inputs(i).buffer()),
                inputs[i].data.data(), inputs[i].data.size());
  if (Status status = training.stepExecutor->run(); !status.ok())
    abortRun(communicator, status);
  training.stepExecutor.reset(); // Joins the comm thread.

  float loss = readLoss(training);
  std::vector<std::vector<float>> groups;
  Status gathered = communicator.allReduce(&loss, 1);
  if (gathered.ok())
    gathered = gatherGradients(training, groups);
  if (!gathered.ok())
    abortRun(communicator, gathered);
  loss /= static_cast<float>(communicator.size());
  StagedFiles staged;
  bool rankZero = communicator.rank() == 0;
  if (!agree(communicator, rankZero
                               ? stageGradients(training, groups, loss, staged)
                               : Status::success()))
    return 1;
  return agree(communicator, rankZero ? staged.commitAll() : Status::success())
             ? 0
             : 1;
}

int zplan::tooling::trainPlan(const Arguments &arguments,
                              comm::Communicator &communicator) {
  const train::TrainOptions &options = arguments.train;
  Training training(arguments, communicator);
  TrainRun run;
  Status checked = checkTraining(training, /*needOptimizer=*/true);
  if (checked.ok())
    checked = checkTrainInputs(training, run);
  if (!agree(communicator, checked))
    return 1;
  if (!agree(communicator, loadTraining(training)))
    return 1;
  if (!options.resumeFrom.empty() &&
      !agree(communicator, resume(training, run)))
    return 1;
  cpu::setBlasThreads(arguments.threads);
  bool rankZero = communicator.rank() == 0;
  if (rankZero && !options.lossLogPath.empty()) {
    // Written afresh by each run, line by line as it goes: a resumed run's
    // log holds the steps it trained (numbered from the checkpoint's).
    run.lossLog.open(options.lossLogPath, std::ios::trunc);
    if (!run.lossLog)
      abortRun(communicator, failure("cannot write --loss-log ",
                                     inQuotes(options.lossLogPath)));
  }

  train::LrSchedule schedule = options.schedule();
  train::Progress progress(run.firstStep, options.steps, train::steadyClock());
  uint64_t tokensPerStep = run.rows * run.rowTokens * options.gradAccum *
                           static_cast<uint64_t>(communicator.size());
  for (uint64_t step = run.firstStep; step < options.steps; ++step) {
    double lr = schedule.at(step);
    double lossSum = 0;
    runMicroSteps(training, run, step, lossSum);
    float total = static_cast<float>(lossSum);
    if (Status status = communicator.allReduce(&total, 1); !status.ok())
      abortRun(communicator, status);
    double loss =
        total / (static_cast<double>(options.gradAccum) * communicator.size());
    runOptimizer(training, step, lr);
    std::string line = progress.stepDone(step + 1, loss, lr, tokensPerStep);
    if (rankZero) {
      if ((step + 1) % options.logEvery == 0 || step + 1 == options.steps)
        std::cout << "zrun: " << line << "\n" << std::flush;
      if (run.lossLog.is_open())
        run.lossLog << train::lossLogLine(step + 1, loss, lr) << std::flush;
    }
    bool save = !options.saveDir.empty() &&
                ((options.saveEvery && (step + 1) % options.saveEvery == 0) ||
                 step + 1 == options.steps);
    if (save) {
      train::CheckpointInfo info;
      info.planIdentity = planIdentity(training.plan);
      info.step = step + 1;
      info.values = options.checkpointValues(run.data.size());
      train::SaveResult saved;
      train::CheckpointOptions checkpointOptions;
      checkpointOptions.keepLast = options.keepLast;
      Status status = train::saveCheckpoint(
          options.saveDir, info, checkpointRegions(*training.memory),
          communicator, saved, checkpointOptions);
      if (!status.ok())
        abortRun(communicator, status);
      if (rankZero) {
        std::cout << "zrun: saved " << saved.directory << "\n";
        for (const std::string &warning : saved.warnings)
          std::cout << "zrun: warning: " << warning << "\n";
        std::cout << std::flush;
      }
    }
  }
  training.stepExecutor.reset();
  training.optimizerExecutor.reset();
  if (rankZero)
    std::cout << "zrun: " << progress.summary() << "\n" << std::flush;
  if (arguments.stats && !printStats(communicator, *training.memory))
    return 1;
  return 0;
}
