//===- Training.cpp - the session's micro-steps and optimizer steps -------===//
//
// A micro-step runs `train_micro_step` on this rank's micro-batch; its
// reduce-scatters accumulate into the gradient shards. After every K-th the
// optimizer step runs on the shards with the hyper-parameters of that step
// (the schedule's learning rate, the gradient scale 1 / (K * N), torch's
// clipping coefficient from the global norm). The loss lines are summed
// exactly as `zrun train` always logged them.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanQueries.h"
#include "runtime/session/SessionState.h"
#include "runtime/support/ShapeText.h"

#include <algorithm>
#include <cmath>

using namespace zplan;
using namespace zplan::session;

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
  return plan::shapeOf(plan::bufferOf(state->plan, state->inputIds->buffer()));
}

bool Session::trainTakesLabels() const { return state->labels != nullptr; }

uint64_t Session::vocabulary() const {
  for (plan::ProgramKind kind :
       {plan::PROGRAM_KIND_INFER, plan::PROGRAM_KIND_PREFILL})
    if (const plan::Program *program = plan::findProgram(state->plan, kind))
      if (const plan::Binding *logits =
              plan::findBinding(program->outputs(), plan::BINDING_ROLE_LOGITS))
        return static_cast<uint64_t>(
            plan::bufferOf(state->plan, logits->buffer()).shape().rbegin()[0]);
  return 0;
}

/// The batch fits `train_micro_step`'s input_ids (ProgramContracts.h:
/// [B, T] int64, and labels of the same shape when it takes them).
Status Session::State::checkBatch(const TrainBatch &batch) const {
  ZR_RETURN_IF_ERROR(stepProblem);
  if (!inputIds)
    return failure("program ", inQuotes(step->name()),
                   " has no input_ids input to feed tokens to");
  std::vector<int64_t> ids =
      plan::shapeOf(plan::bufferOf(plan, inputIds->buffer()));
  if (batch.shape != ids || !batch.inputIds)
    return failure("the micro-batch is ", shapeText(batch.shape), "; program ",
                   inQuotes(step->name()), " takes input_ids ", shapeText(ids),
                   " int64");
  return Status::success();
}

/// `batch` (checked) as the step's inputs: input_ids, and labels when the
/// step takes them.
std::vector<ProgramInput>
Session::State::inputsOf(const TrainBatch &batch) const {
  uint64_t bytes =
      plan::elementCount(plan::bufferOf(plan, inputIds->buffer())) *
      sizeof(int64_t);
  std::vector<ProgramInput> inputs = {
      {inputIds->name(), batch.inputIds, bytes}};
  if (labels)
    inputs.push_back(
        {labels->name(), batch.labels ? batch.labels : batch.inputIds, bytes});
  return inputs;
}

/// Feeds `inputs` (checked) and runs `train_micro_step`; `localLoss` is
/// this rank's.
Status Session::State::runMicroStep(const std::vector<ProgramInput> &inputs,
                                    float &localLoss) {
  ZR_RETURN_IF_ERROR(writeInputs(*step, inputs));
  ZR_RETURN_IF_ERROR(runPrepared(*step));
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
    // A frozen group has no gradient.
    if (gradientOf[group] == 0 ||
        (plan.groups(group).persistent() && communicator.rank() != 0))
      continue;
    uint64_t count =
        plan::elementCount(plan::bufferOf(plan, gradientOf[group]));
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
  train::HyperParameters values =
      train::optimizerHyper(settings, lr, gradScale, optimizerSteps + 1);
  ZR_RETURN_IF_ERROR(
      memory->write(hyper->buffer(), values.data(), sizeof(values)));
  return runPrepared(*optimizer);
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
  ZR_RETURN_IF_ERROR(state->stepProblem);
  ZR_RETURN_IF_ERROR(state->checkInputs(*state->step, inputs));
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
    // A frozen group has no gradient: its entry stays empty.
    if (s.gradientOf[group] == 0)
      continue;
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
