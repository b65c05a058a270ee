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
#include "runtime/plan/ProgramContracts.h"
#include "runtime/session/SessionState.h"
#include "runtime/support/ShapeText.h"
#include "runtime/train/RowData.h"

#include <algorithm>
#include <cmath>
#include <iterator>

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

/// The vocabulary size when `plan` says it (the logits of an infer or
/// prefill program), else 0.
static uint64_t vocabularyOf(const plan::Plan &plan) {
  for (plan::ProgramKind kind :
       {plan::PROGRAM_KIND_INFER, plan::PROGRAM_KIND_PREFILL})
    if (const plan::Program *program = plan::findProgram(plan, kind))
      if (const plan::Binding *logits =
              plan::findBinding(program->outputs(), plan::BINDING_ROLE_LOGITS))
        return static_cast<uint64_t>(
            plan::bufferOf(plan, logits->buffer()).shape().rbegin()[0]);
  return 0;
}

uint64_t Session::vocabulary() const { return vocabularyOf(state->plan); }

Status Session::checkTrainBatch(const TrainBatch &batch) const {
  ZR_RETURN_IF_ERROR(state->trainProblem);
  return state->checkBatch(batch);
}

std::vector<std::string> Session::trainRlInputs() const {
  std::vector<std::string> names;
  for (const plan::Binding *binding : {state->completionMask, state->advantages,
                                       state->oldLogprobs, state->refLogprobs})
    if (binding)
      names.push_back(plan::bindingRoleName(binding->role()));
  return names;
}

std::vector<int64_t> Session::trainAdvantagesShape() const {
  if (!state->advantages)
    return {};
  return plan::shapeOf(
      plan::bufferOf(state->plan, state->advantages->buffer()));
}

bool Session::trainLossIsTokenSum() const { return state->tokenSumLoss; }

/// The batch fits `train_micro_step`'s input_ids (ProgramContracts.h:
/// [B, T] int64, and labels of the same shape when it takes them), and
/// gives exactly the RL inputs the step takes.
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
  // Labels the step cannot read would be ignored: the loss would be the
  // ids' whatever they say.
  if (batch.labels && !labels)
    return failure("labels were given, but program ", inQuotes(step->name()),
                   " takes none: its loss reads input_ids shifted (compile "
                   "with zcc --input-shape labels=",
                   ids[0], "x", ids[1], " to train on labels)");
  // Ids outside the vocabulary would stop the embedding kernel on one rank
  // mid-step; refused here, before any rank starts it.
  if (uint64_t vocabulary = vocabularyOf(plan)) {
    int64_t count = ids[0] * ids[1];
    for (int64_t i = 0; i < count; ++i)
      if (batch.inputIds[i] < 0 ||
          static_cast<uint64_t>(batch.inputIds[i]) >= vocabulary)
        return failure("input_ids[", i / ids[1], ", ", i % ids[1],
                       "] = ", batch.inputIds[i],
                       " is outside the vocabulary [0, ", vocabulary, ")");
    for (int64_t i = 0; batch.labels && i < count; ++i)
      if (batch.labels[i] != train::kIgnoredLabel &&
          (batch.labels[i] < 0 ||
           static_cast<uint64_t>(batch.labels[i]) >= vocabulary))
        return failure("labels[", i / ids[1], ", ", i % ids[1],
                       "] = ", batch.labels[i],
                       " is outside the vocabulary [0, ", vocabulary,
                       ") and is not ", train::kIgnoredLabel, " (ignored)");
  }
  const std::pair<const plan::Binding *, const float *> rl[] = {
      {completionMask, batch.completionMask},
      {advantages, batch.advantages},
      {oldLogprobs, batch.oldLogprobs},
      {refLogprobs, batch.refLogprobs}};
  const char *names[] = {"completion_mask", "advantages", "old_logprobs",
                         "ref_logprobs"};
  for (size_t i = 0; i < std::size(rl); ++i) {
    if (rl[i].first && !rl[i].second)
      return failure(
          "program ", inQuotes(step->name()), " takes ", names[i], " ",
          shapeText(plan::shapeOf(plan::bufferOf(plan, rl[i].first->buffer()))),
          " float32, and none was given");
    if (!rl[i].first && rl[i].second)
      return failure(names[i], " was given, but program ",
                     inQuotes(step->name()), " does not take it",
                     i == 2   ? " (compile with zcc --old-logprobs)"
                     : i == 3 ? " (compile with zcc --beta > 0)"
                              : "");
  }
  return Status::success();
}

double Session::State::completionTokens(const float *mask) const {
  std::vector<int64_t> shape =
      plan::shapeOf(plan::bufferOf(plan, inputIds->buffer()));
  int64_t rows = shape[0], columns = shape[1];
  double count = 0;
  // Column 0 has no log-prob: the loss never counts it (docs/rl.md).
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t column = 1; column < columns; ++column)
      count += mask[row * columns + column];
  return count;
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
  for (auto [binding, data] :
       {std::make_pair(completionMask, batch.completionMask),
        std::make_pair(advantages, batch.advantages),
        std::make_pair(oldLogprobs, batch.oldLogprobs),
        std::make_pair(refLogprobs, batch.refLogprobs)})
    if (binding)
      inputs.push_back(
          {binding->name(), data,
           plan::elementCount(plan::bufferOf(plan, binding->buffer())) *
               sizeof(float)});
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

/// Optimizer step number optimizerSteps (0-based) at rate `lr`, on the
/// accumulators times `gradScale`.
Status Session::State::runOptimizer(double lr, double gradScale) {
  const TrainConfig &config = options.train;
  train::OptimizerSettings settings = config.optimizer;
  if (sgd)
    settings.beta1 = config.momentum;
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

/// trainStep() on a checked batch. A mean loss (plan
/// LOSS_NORMALIZATION_MEAN) is scaled by 1 / (K N) at the optimizer step; a
/// token-sum loss by 1 / the window's completion tokens on every rank,
/// which one all-reduce adds up with the window's loss (TRL's dapo with
/// num_items_in_batch). Each micro-step reports its loss over every rank.
Status Session::State::microStep(const TrainBatch &batch, double &loss) {
  State &s = *this;
  float local = 0;
  ZR_RETURN_IF_ERROR(s.runMicroStep(s.inputsOf(batch), local));
  s.windowLossSum += local;
  if (s.tokenSumLoss) {
    double tokens = s.completionTokens(batch.completionMask);
    s.windowTokens += tokens;
    double both[2] = {local, tokens};
    ZR_RETURN_IF_ERROR(s.communicator.allReduce(both, 2, ElementType::F64));
    loss = both[0] / std::max(both[1], 1.0);
  } else {
    float total = local;
    comm::CollectiveContext named(s.communicator, "the micro-step's loss");
    ZR_RETURN_IF_ERROR(s.communicator.allReduce(&total, 1));
    loss = total / static_cast<double>(s.communicator.size());
  }
  s.window = WindowResult();
  s.window.step = s.optimizerSteps;
  if (++s.microInWindow < s.options.train.gradAccum)
    return Status::success();
  double lr = s.options.train.schedule.at(s.optimizerSteps);
  double gradScale, windowLoss;
  if (s.tokenSumLoss) {
    double both[2] = {s.windowLossSum, s.windowTokens};
    ZR_RETURN_IF_ERROR(s.communicator.allReduce(both, 2, ElementType::F64));
    // TRL clamps the count to 1: a window without completion tokens
    // steps on zero gradients.
    double count = std::max(both[1], 1.0);
    gradScale = 1.0 / count;
    windowLoss = both[0] / count;
  } else {
    // The window's loss exactly as zrun train has always logged it.
    float windowTotal = static_cast<float>(s.windowLossSum);
    ZR_RETURN_IF_ERROR(s.communicator.allReduce(&windowTotal, 1));
    double micro =
        static_cast<double>(s.options.train.gradAccum) * s.communicator.size();
    gradScale = 1.0 / micro;
    windowLoss = windowTotal / micro;
  }
  ZR_RETURN_IF_ERROR(s.runOptimizer(lr, gradScale));
  s.window.optimizerStepped = true;
  s.window.step = ++s.optimizerSteps;
  s.window.loss = windowLoss;
  s.window.lr = lr;
  s.microInWindow = 0;
  s.windowLossSum = 0;
  s.windowTokens = 0;
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
  // Every rank ran the same inputs, so the reduction summed N equal
  // gradients: divide by N, and a token-sum loss also by its tokens.
  if (s.tokenSumLoss)
    for (const ProgramInput &input : inputs)
      if (input.name == s.completionMask->name())
        ranks *= static_cast<float>(std::max(
            s.completionTokens(static_cast<const float *>(input.data)), 1.0));
  loss /= ranks;
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
