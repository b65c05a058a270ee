//===- Generation.cpp - the session's generations -------------------------===//
//
// One generation (docs/generation.md section 1): the generation state is
// allocated, generate_begin gathers the resident groups, prefill fills the
// KV cache from the prompts, decode runs once per new token until every row
// finished, generate_end releases the resident copies, and the state is
// freed, so that the rank's memory is its steady state again.
//
// Each rank generates its own rows (docs/generation.md section 8). How
// long the ranks decode is the plan's decision (Program.lockstep_period of
// decode): when decode has collectives, the ranks all-reduce their counts
// of running rows after prefill and every K-th decode run, and decode runs
// while any rank has a row running, so every rank enters every collective
// the others do; a rank whose rows finished feeds them again (their logits
// are ignored). When decode has none, each rank stops on its own.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanQueries.h"
#include "runtime/session/SessionState.h"

#include <algorithm>
#include <chrono>
#include <cstring>

using namespace zplan;
using namespace zplan::session;

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
  // maxNewTokens 0 is the plan's default (generate::defaultMaxNewTokens):
  // the parsers refuse an explicit 0.
  return generate::GenerationState::create(
      shape, request.rows,
      request.promptSource.empty() ? "the prompts" : request.promptSource,
      request.lengthsSource.empty() ? "the prompt lengths"
                                    : request.lengthsSource,
      generation);
}

/// Picks every unfinished row's token of the next step from
/// `logitsBinding` ([B, V]); keeps their logits in `history` when it is not
/// empty; accepts the step.
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
    // The draw is the global row's, so tokens do not depend on N.
    uint64_t globalRow = generation.firstRow() + row;
    if (Status status = sampler.next(rowLogits, shape.vocabulary, globalRow,
                                     step, tokens[row]);
        !status.ok())
      return failure("program ",
                     inQuotes(programs[step == 0 ? kPrefill : kDecode]->name()),
                     " (generation step ", step, ") gave row ", globalRow,
                     " logits it cannot choose from: ", status.message());
    if (!history.empty())
      std::memcpy(history.data() +
                      (step * shape.batch + row) * shape.vocabulary,
                  rowLogits, shape.vocabulary * sizeof(float));
  }
  generation.acceptStep(tokens);
  return Status::success();
}

/// Whether decode runs again after the steps `generation` has accepted
/// (prefill's is the first). With lockstep period K, after every K-th step
/// the ranks all-reduce their running rows and go on while any is running; in
/// between they go on (the plan fixed K). Every decision is taken at the same
/// step on every rank from all-reduced counts alone, so the ranks stay together
/// even when their requests differ (another
/// --max-new-tokens or EOS on one rank). Without lockstep, each rank goes
/// on while its own rows run.
Status Session::State::decodeAgain(const generate::GenerationState &generation,
                                   GenerateResult &result, bool &again) {
  uint32_t period = programs[kDecode]->lockstep_period();
  if (period == 0) {
    again = !generation.allFinished();
    return Status::success();
  }
  if (generation.steps() % period != 0) {
    again = true;
    return Status::success();
  }
  int64_t running = static_cast<int64_t>(generation.activeRows());
  auto start = std::chrono::steady_clock::now();
  comm::CollectiveContext named(communicator,
                                "decode's count of the rows still running");
  ZR_RETURN_IF_ERROR(communicator.allReduce(&running, 1, ElementType::I64));
  result.agreementSeconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  ++result.agreements;
  again = running > 0;
  return Status::success();
}

namespace {

/// Host storage for the int64 input `binding`, written to the buffer by
/// writeHostInputs() after the generation state filled it.
struct HostInput {
  const plan::Binding *binding;
  std::vector<int64_t> values;
};

HostInput hostInputFor(const plan::Plan &plan, const plan::Binding &binding) {
  return {&binding, std::vector<int64_t>(plan::elementCount(
                        plan::bufferOf(plan, binding.buffer())))};
}

Status writeHostInputs(RankMemory &memory,
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
  for (const plan::Program *program : s.programs)
    if (Status status = s.prepare(*program); !status.ok())
      return s.stopOn(status);
  result.bytesDuring = s.memory->heldBytes();
  if (Status status = s.communicator.barrier(); !status.ok())
    return s.stopOn(status);
  if (observer.started)
    observer.started();

  generate::Sampler sampler(request.sampling);
  auto run = [&](int index) { return s.runPrepared(*s.programs[index]); };
  auto stepDone = [&](uint64_t before) {
    if (observer.stepDone)
      observer.stepDone(generation.steps() - 1,
                        generation.generatedTokens() - before,
                        generation.activeRows());
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
    status = writeHostInputs(*s.memory,
                             {&prefillIds, &prefillPositions, &lastIndex});
  }
  if (status.ok())
    status = run(kPrefill);
  if (status.ok())
    status =
        s.chooseTokens(generation, sampler, *s.prefillLogits, result.logits);
  if (status.ok())
    stepDone(0);
  s.counting->reset();
  bool again = false;
  if (status.ok())
    status = s.decodeAgain(generation, result, again);
  while (status.ok() && again) {
    if (generation.allFinished())
      ++result.idleDecodeSteps;
    // The arena reuses the inputs' bytes once they are dead: refill them
    // before every run.
    generation.fillDecode(decodeIds.values.data(),
                          decodePositions.values.data());
    status = writeHostInputs(*s.memory, {&decodeIds, &decodePositions});
    if (status.ok())
      status = run(kDecode);
    if (status.ok())
      result.decodeTierCopiedBytes +=
          bytesTierCopiedLastRun(*s.programs[kDecode]);
    uint64_t before = generation.generatedTokens();
    if (status.ok())
      status =
          s.chooseTokens(generation, sampler, *s.decodeLogits, result.logits);
    if (status.ok()) {
      ++result.decodeSteps;
      stepDone(before);
      status = s.decodeAgain(generation, result, again);
    }
  }
  result.decodeGatheredBytes = s.counting->gatheredBytes();
  if (status.ok())
    status = run(kEnd);
  if (!status.ok())
    return s.stopOn(status);
  result.tokens = generation.outputTable();
  for (const plan::Program *program : s.programs)
    s.executors[s.indexOf(*program)].reset(); // Joins the comm threads.
  s.memory->releaseGeneration();
  return Status::success();
}

Status Session::gatherRows(const GenerateResult &mine,
                           GenerateResult &all) const {
  comm::Communicator &communicator = state->communicator;
  uint64_t ranks = static_cast<uint64_t>(communicator.size());
  all = mine;
  all.batch = mine.batch * ranks;
  all.tokens.assign(all.batch * mine.maxNewTokens, 0);
  ZR_RETURN_IF_ERROR(
      communicator.allGather(mine.tokens.data(), all.tokens.data(),
                             mine.tokens.size(), ElementType::I64));
  if (mine.logits.empty())
    return Status::success();
  std::vector<float> byRank(mine.logits.size() * ranks);
  ZR_RETURN_IF_ERROR(communicator.allGather(
      mine.logits.data(), byRank.data(), mine.logits.size(), ElementType::F32));
  // [rank][step][row][V] -> [step][rank][row][V].
  uint64_t rankStep = mine.batch * state->shape.vocabulary;
  all.logits.assign(byRank.size(), 0.0f);
  for (uint64_t rank = 0; rank < ranks; ++rank)
    for (uint64_t step = 0; step < mine.maxNewTokens; ++step)
      std::copy_n(byRank.begin() + (rank * mine.maxNewTokens + step) * rankStep,
                  rankStep,
                  all.logits.begin() + (step * ranks + rank) * rankStep);
  return Status::success();
}
