//===- SessionState.h - what a Session holds (private) --------------------===//
//
// Session::State, shared by the files that implement the session's parts
// (Session.cpp, Training.cpp, Generation.cpp, Checkpoints.cpp); nothing
// outside runtime/session includes it. Session.h's comments describe what
// each part does.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SESSION_SESSIONSTATE_H
#define ZPLAN_RUNTIME_SESSION_SESSIONSTATE_H

#include "runtime/comm/CountingCommunicator.h"
#include "runtime/exec/Executor.h"
#include "runtime/exec/Memory.h"
#include "runtime/exec/Trace.h"
#include "runtime/session/RankDevice.h"
#include "runtime/session/Session.h"

#include <array>
#include <memory>
#include <string>
#include <vector>

namespace zplan::session {

/// The generation programs, in the order a generation runs them
/// (docs/generation.md section 1).
enum GenerationProgram { kBegin, kPrefill, kDecode, kEnd, kGenerationPrograms };

struct Session::State {
  State(comm::Communicator &communicator, const SessionOptions &options)
      : communicator(communicator), options(options) {}

  std::string planPath;
  /// The host communicator (MPI): host data, agreement, broadcasts.
  comm::Communicator &communicator;
  /// The backend and the executors' collectives (NCCL on CUDA).
  std::unique_ptr<RankDevice> device;
  /// What every executor talks through: counts the bytes they gather.
  std::unique_ptr<comm::CountingCommunicator> counting;
  SessionOptions options;
  plan::Plan plan;
  std::unique_ptr<RankMemory> memory;
  /// Set when a program failed: the ranks are out of step (Session.h).
  bool broken = false;

  /// Per program (by index in the plan): its executor once made. The
  /// generation programs' exist only during a generation (and after one
  /// failed: destroying them would join a comm thread that may wait forever
  /// in a collective the other ranks left).
  std::vector<std::unique_ptr<Executor>> executors;
  /// Per program: its trace, with SessionOptions::trace.
  std::vector<TraceRecorder> traces;
  bool traceClockStarted = false;

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
  /// The RL inputs of the step (null when it has none).
  const plan::Binding *completionMask = nullptr;
  const plan::Binding *advantages = nullptr;
  const plan::Binding *oldLogprobs = nullptr;
  const plan::Binding *refLogprobs = nullptr;
  bool tokenSumLoss = false;
  /// Per group: its gradient accumulator (a STATE buffer id).
  std::vector<uint32_t> gradientOf;
  /// The optimizer step is SGD's (its beta1 slot holds the momentum).
  bool sgd = false;
  uint64_t optimizerSteps = 0;
  uint64_t microInWindow = 0;
  /// This rank's losses of the window's micro-steps, summed in double.
  double windowLossSum = 0;
  /// A token-sum loss: this rank's completion tokens so far in the window.
  double windowTokens = 0;
  WindowResult window;

  // Generation.
  Status logprobsProblem = Status::success();
  const plan::Program *logprobsProgram = nullptr;
  const plan::Binding *logprobsIds = nullptr;
  const plan::Binding *logprobsOut = nullptr;
  const plan::Binding *entropyOut = nullptr;

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
  /// Where the last step's logits are copied on a backend whose memory is
  /// not the host's (kept across steps).
  std::vector<float> logitsOnHost;

  /// Session.cpp: the plan's parts by kind and role.
  Status findTraining();
  Status findGeneration();
  Status findLogprobs();
  /// Fails once the session stopped (Session::stopped()).
  Status usable() const;
  /// Returns `status`, stopping the session when it is a failure: for
  /// failures once the ranks began running programs together.
  Status stopOn(Status status);
  /// The index of `program`, a program of `plan`, in it.
  int indexOf(const plan::Program &program) const;
  /// Makes `program`'s executor unless it exists; traced with
  /// SessionOptions::trace.
  Status prepare(const plan::Program &program);
  /// Runs `program`'s executor (made by prepare()); starts the trace clock
  /// at the first run.
  Status runPrepared(const plan::Program &program);
  /// Every input of `program` fed exactly once, with its buffer's bytes.
  Status checkInputs(const plan::Program &program,
                     const std::vector<ProgramInput> &inputs) const;
  /// Writes `inputs` (checked) into their buffers.
  Status writeInputs(const plan::Program &program,
                     const std::vector<ProgramInput> &inputs);

  /// Training.cpp.
  Status microStep(const TrainBatch &batch, double &loss);
  Status gatherGradients(const std::vector<ProgramInput> &inputs, float &loss,
                         std::vector<std::vector<float>> &groups);
  Status checkBatch(const TrainBatch &batch) const;
  std::vector<ProgramInput> inputsOf(const TrainBatch &batch) const;
  Status runMicroStep(const std::vector<ProgramInput> &inputs,
                      float &localLoss);
  Status gradientNorm(double gradScale, double &norm);
  Status runOptimizer(double lr, double gradScale);
  /// The completion tokens a completion mask of the step's input_ids shape
  /// counts (columns >= 1).
  double completionTokens(const float *mask) const;

  /// Generation.cpp.
  Status startGeneration(const GenerateRequest &request,
                         generate::GenerationState &generation) const;
  Status chooseTokens(generate::GenerationState &generation,
                      generate::Sampler &sampler, const plan::Binding &logits,
                      std::vector<float> &history);
  Status decodeAgain(const generate::GenerationState &generation,
                     GenerateResult &result, bool &again);
};

} // namespace zplan::session

#endif // ZPLAN_RUNTIME_SESSION_SESSIONSTATE_H
