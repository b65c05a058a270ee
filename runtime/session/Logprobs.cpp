//===- Logprobs.cpp - the session's per-token log-probs -------------------===//
//
// Runs the `logprobs` program (zcc --mode logprobs, or a plan with an RL
// loss) on this rank's rows: it gathers and releases like any forward and
// touches no gradient state, so it may run inside an accumulation window
// and on a frozen reference plan beside the policy's (docs/rl.md).
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanQueries.h"
#include "runtime/session/SessionState.h"

using namespace zplan;
using namespace zplan::session;

bool Session::canLogprobs() const { return state->logprobsProblem.ok(); }
Status Session::checkCanLogprobs() const { return state->logprobsProblem; }

std::vector<int64_t> Session::logprobsInputShape() const {
  if (!state->logprobsIds)
    return {};
  return plan::shapeOf(
      plan::bufferOf(state->plan, state->logprobsIds->buffer()));
}

Status Session::logprobs(const int64_t *inputIds, LogprobsResult &result) {
  State &s = *state;
  ZR_RETURN_IF_ERROR(s.logprobsProblem);
  ZR_RETURN_IF_ERROR(s.usable());
  const plan::Program &program = *s.logprobsProgram;
  uint64_t tokens =
      plan::elementCount(plan::bufferOf(s.plan, s.logprobsIds->buffer()));
  ZR_RETURN_IF_ERROR(run(
      program, {{s.logprobsIds->name(), inputIds, tokens * sizeof(int64_t)}}));
  result.logprobs.resize(tokens);
  ZR_RETURN_IF_ERROR(s.memory->read(
      s.logprobsOut->buffer(), result.logprobs.data(), tokens * sizeof(float)));
  result.entropy.clear();
  if (s.entropyOut) {
    result.entropy.resize(tokens);
    ZR_RETURN_IF_ERROR(s.memory->read(
        s.entropyOut->buffer(), result.entropy.data(), tokens * sizeof(float)));
  }
  return Status::success();
}
