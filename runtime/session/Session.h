//===- Session.h - one rank's session over one plan -----------------------===//
//
// The one runtime API: every zrun command (`run`, `train`, `gradients`,
// `generate`; `inspect` and `export`, which run no program, through
// openPlan() alone) and the Python module (docs/one-plan.md) open a plan
// through it. One object per
// rank over one plan of any mode (infer, train, generate, or train,generate
// compiled into one plan). It owns the plan, the rank's backend and memory
// (RankMemory) and an executor per program, finds programs and bindings by
// their kind and role (runtime/plan/PlanQueries.h), and runs the
// programs in the orders their kinds define:
//
//  - any program but generation's on its own: run() feeds its inputs by
//    name and runs it once (`zrun run`), readOutput() reads a result;
//  - training: trainStep() runs `train_micro_step` on a micro-batch, and
//    after every K-th micro-step (K = TrainConfig::gradAccum) the
//    `optimizer_step`; the optimizer step counter, the learning-rate
//    schedule and the gradient scale 1 / (K * N) are the session's, as
//    `zrun train` used them;
//  - generation: generate() runs `generate_begin`, `prefill`, `decode` per
//    token and `generate_end` (docs/generation.md), whole, between any two
//    micro-steps: the generation programs never touch the gradient
//    accumulators or the optimizer state (the verifier proves it), so a
//    generation inside an accumulation window leaves the window as it was.
//    Generation is data parallel: each rank generates its own B rows, and
//    the ranks stay in lockstep as the plan's decode program says
//    (docs/generation.md section 8). The generation state (KV caches,
//    resident copies) is allocated when a generation begins and freed when
//    it ends, so that a rank's memory after a generation is the training
//    steady state again (memory()).
//
// Every rank calls the same methods in the same order with the same
// arguments (the sampling settings are the same on every rank; micro-batches
// and prompts differ per rank): the methods are collective. A failure
// before any program ran (a plan without the programs, a batch or prompt of
// the wrong shape) is returned on every rank alike and leaves the session
// usable. A failure once the ranks run programs together (a kernel error, a
// collective that failed, memory for the generation state) is returned on
// the rank that saw it, while the others may be blocked in a collective:
// stopped() is then true, the caller aborts every rank (zrun does, through
// abortRun; so does the Python module), and the session runs nothing more.
//
// The implementation is split by concern: Session.cpp (open, single runs,
// traces, memory), Training.cpp, Generation.cpp, Checkpoints.cpp; the state
// they share is SessionState.h.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SESSION_SESSION_H
#define ZPLAN_RUNTIME_SESSION_SESSION_H

#include "runtime/comm/Communicator.h"
#include "runtime/exec/TierStore.h"
#include "runtime/generate/GenerationState.h"
#include "runtime/generate/Sampler.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/session/RankDevice.h"
#include "runtime/support/Status.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/LrSchedule.h"
#include "runtime/train/OptimizerHyper.h"
#include "runtime/train/TrainOptions.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zplan {
class RankMemory;
} // namespace zplan

namespace zplan::session {

/// How the optimizer steps: zrun train's flags (trainConfigOf below takes
/// them from runtime/train/TrainOptions.h).
struct TrainConfig {
  /// K: micro-steps per optimizer step.
  uint64_t gradAccum = 1;
  /// The learning rate of optimizer step s (0-based): schedule.at(s).
  train::LrSchedule schedule;
  /// beta1/beta2/eps/weight decay (AdamW); beta1 is replaced by `momentum`
  /// for an SGD plan.
  train::OptimizerSettings optimizer;
  double momentum = 0.0;
  /// Scale the gradients so that their global L2 norm is at most this (0:
  /// no clipping), as torch.nn.utils.clip_grad_norm_ does.
  double clipGradNorm = 0.0;
};

/// K, the schedule and the optimizer constants of zrun train's options
/// (momentum and clipping are zrun's own flags: set them after).
TrainConfig trainConfigOf(const train::TrainOptions &options);

struct SessionOptions {
  /// --backend: where the programs run (RankDevice.h); auto is CUDA when
  /// every rank has a GPU, the CPU otherwise.
  BackendChoice backend = BackendChoice::Auto;
  /// --check: poison released copies, check reads and shard checksums.
  bool check = false;
  /// Kernel threads of this rank (the CPU backend's knob, RankDevice.h).
  int threads = 1;
  /// Record a trace of every program's runs (traceEvents()).
  bool trace = false;
  /// --offload-dir: where the NVME tier's file goes (docs/offload.md);
  /// empty: the plan's offload_dir.
  std::string offloadDir;
  /// --nvme-io: through the page cache (buffered) or around it (direct).
  NvmeIo nvmeIo = NvmeIo::Buffered;
  TrainConfig train;
};

/// One micro-batch of this rank: int64 ids of trainInputShape() ([B, T]),
/// row-major. `labels` (same shape) is fed to a plan whose step takes
/// labels; null feeds the ids as labels (the model shifts them). The RL
/// inputs (docs/rl.md), f32 row-major, are fed to a step that takes them
/// and must be given exactly when it does: completionMask, oldLogprobs and
/// refLogprobs [B, T], advantages [B] or [B, T] as the plan says.
struct TrainBatch {
  const int64_t *inputIds = nullptr;
  std::vector<int64_t> shape;
  const int64_t *labels = nullptr;
  const float *completionMask = nullptr;
  const float *advantages = nullptr;
  const float *oldLogprobs = nullptr;
  const float *refLogprobs = nullptr;
};

/// The result of logprobs(): f32 [B, T] each, row-major.
struct LogprobsResult {
  std::vector<float> logprobs;
  std::vector<float> entropy;
};

/// One input of a program by name (zrun run and gradients feed whatever
/// the model takes): its buffer's bytes, at `data`.
struct ProgramInput {
  std::string name;
  const void *data = nullptr;
  uint64_t bytes = 0;
};

/// What the last trainStep() did to the accumulation window.
struct WindowResult {
  /// The micro-step closed the window: the optimizer stepped.
  bool optimizerStepped = false;
  /// Optimizer steps completed (after this one, when it stepped).
  uint64_t step = 0;
  /// When it stepped: the window's loss, the mean over its K micro-steps
  /// and the N ranks, summed as zrun train always has (each rank's K
  /// losses in double, rounded to f32, all-reduced) so that the loss log
  /// is the same with or without a session; and the step's learning rate.
  double loss = 0.0;
  double lr = 0.0;
};

/// One generation: the rows' prompts and lengths (as GenerationState takes
/// them), how many tokens, and how to pick them.
struct GenerateRequest {
  generate::GenerationRequest rows;
  generate::SamplingSettings sampling;
  /// Keep every step's logits (f32 [M, B, V]) in GenerateResult::logits.
  bool keepLogits = false;
  /// Where the prompts and lengths came from, for messages ("prompt file
  /// 'p.npy'"); empty: "the prompts", "the prompt lengths".
  std::string promptSource;
  std::string lengthsSource;
};

struct GenerateResult {
  /// [B, M] row-major: this rank's rows' tokens, EOS-filled after an EOS
  /// (GenerationState::outputTable).
  std::vector<int64_t> tokens;
  uint64_t batch = 0;
  uint64_t maxNewTokens = 0;
  /// With keepLogits: [M, B, V], zeros where a row had finished.
  std::vector<float> logits;
  /// Decode runs made (prefill excluded).
  uint64_t decodeSteps = 0;
  /// Decode runs this rank made after its own rows had all finished, to
  /// take part in the collectives other ranks still needed (lockstep).
  uint64_t idleDecodeSteps = 0;
  /// Lockstep agreements (all-reductions of the running rows) made, and
  /// the seconds this rank spent in them (docs/generation.md section 8).
  uint64_t agreements = 0;
  double agreementSeconds = 0.0;
  /// Bytes this rank's collectives all-gathered over the decode runs.
  uint64_t decodeGatheredBytes = 0;
  /// Bytes this rank's decode runs copied in from the HOST or NVME tier
  /// (offloaded shards, docs/offload.md).
  uint64_t decodeTierCopiedBytes = 0;
  /// This rank's bytes held while the generation state was allocated.
  uint64_t bytesDuring = 0;
};

/// Called during generate(): `started` after the generation state is
/// allocated and the executors are ready, just before generate_begin runs;
/// `stepDone` after each step's tokens are chosen (step 0 is prefill's)
/// with the tokens that step produced and the rows still unfinished.
struct GenerateObserver {
  std::function<void()> started;
  std::function<void(uint64_t step, uint64_t newTokens, uint64_t activeRows)>
      stepDone;
};

/// This rank's memory as the session holds it (RankMemory's counts).
struct MemoryFigures {
  /// Bytes held now: shards, persistent groups, constants, training state,
  /// arena, and the generation state while a generation runs.
  uint64_t currentBytes = 0;
  /// The most held at once since open().
  uint64_t peakBytes = 0;
  /// The generation state (KV caches, resident copies) a generation
  /// allocates, from the plan (held only during generate()).
  uint64_t generationBytes = 0;
  /// The training state (gradient accumulators, optimizer moments).
  uint64_t trainingStateBytes = 0;
  uint64_t arenaBytes = 0;
};

/// Reads the plan file at `planPath` and validates it for `worldSize` ranks
/// (0: the world size it was compiled for): how every command opens a plan,
/// Session::open included. `inspect` and `export`, which run no program,
/// need no more.
Status openPlan(const std::string &planPath, uint32_t worldSize,
                plan::Plan &plan);

class Session {
public:
  /// Loads and validates the plan at `planPath` for this rank of
  /// `communicator` (which must outlive the session; its size must be the
  /// plan's world size), its memory and an executor per training program.
  /// Local: no collective; a caller that must agree (zrun) agrees on the
  /// result.
  static Status open(const std::string &planPath,
                     comm::Communicator &communicator,
                     const SessionOptions &options,
                     std::unique_ptr<Session> &out);
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  /// True once a failure while programs ran stopped the session (see the
  /// file comment): the caller must abort every rank. A failure returned
  /// while this is false happened before any program ran, on every rank
  /// alike, and the session is still usable.
  bool stopped() const;

  const plan::Plan &plan() const;
  const std::string &planPath() const;
  int rank() const;
  int worldSize() const;
  /// "cpu", or "cuda device 0 (...)": where the programs run.
  const std::string &backendDescription() const;

  //===--------------------------------------------------------------------===//
  // One program on its own (zrun run)
  //===--------------------------------------------------------------------===//

  /// Feeds `inputs` (every input of `program`, by name, each exactly once
  /// with its buffer's bytes) and runs `program` of plan() once; its outputs
  /// stay for readOutput() until the next run. The executor is made at the
  /// first run of a program and kept. Generation programs run only inside
  /// generate(), which holds their state. Collective.
  Status run(const plan::Program &program,
             const std::vector<ProgramInput> &inputs);
  /// What run() checks before it runs anything: a failure here leaves the
  /// session usable, and is the same on every rank given the same inputs.
  Status checkRun(const plan::Program &program,
                  const std::vector<ProgramInput> &inputs) const;
  /// The bytes of output `binding` of `program`'s last run.
  Status readOutput(const plan::Binding &binding,
                    std::vector<uint8_t> &bytes) const;
  /// The bytes the collectives of `program`'s last run gathered on this
  /// rank (0 before its first run).
  uint64_t bytesGatheredLastRun(const plan::Program &program) const;
  /// The bytes of gradients `program`'s last run sent into reductions on
  /// this rank (in each group's reduce dtype; 0 before its first run).
  uint64_t bytesReducedLastRun(const plan::Program &program) const;
  /// The bytes `program`'s last run copied between the HOST or NVME tier
  /// and the arena on this rank (docs/offload.md; 0 before its first run).
  uint64_t bytesTierCopiedLastRun(const plan::Program &program) const;

  //===--------------------------------------------------------------------===//
  // Training
  //===--------------------------------------------------------------------===//

  /// The plan has `train_micro_step` and `optimizer_step`.
  bool canTrain() const;
  /// Fails with one line naming what is missing (compile with zcc --mode
  /// train) unless canTrain().
  Status checkCanTrain() const;
  /// Fails unless the plan has a `train_micro_step` the session can run
  /// (all that gradients() needs).
  Status checkCanStep() const;
  /// The micro-batch shape [B, T] of `train_micro_step`'s input_ids.
  std::vector<int64_t> trainInputShape() const;
  /// `train_micro_step` has a labels input (zcc --input-shape labels=BxT),
  /// which TrainBatch::labels feeds.
  bool trainTakesLabels() const;
  /// The vocabulary size when the plan says it (the logits of an infer or
  /// prefill program), else 0.
  uint64_t vocabulary() const;
  /// What trainStep() checks before it runs anything, on this rank alone:
  /// the shapes, labels only where the step takes them, ids (and labels but
  /// -100) inside the vocabulary, the RL inputs the loss takes. A caller
  /// that agrees across ranks first (the Python module) calls it before.
  Status checkTrainBatch(const TrainBatch &batch) const;

  /// One micro-step on `batch`; after every K-th, the optimizer step.
  /// `loss`: the micro-step's loss over every rank's micro-batch: the mean
  /// over the ranks, or for a token-sum loss (plan LossNormalization) the
  /// sum over every rank divided by their completion tokens. Collective.
  Status trainStep(const TrainBatch &batch, double &loss);
  /// The train step's RL inputs (role names, "completion_mask", ...), in
  /// the order of its bindings, and the shape of advantages ([B] or
  /// [B, T]; empty without).
  std::vector<std::string> trainRlInputs() const;
  std::vector<int64_t> trainAdvantagesShape() const;
  /// The train step's loss is a sum over completion tokens, divided by the
  /// window's global count (TRL's dapo).
  bool trainLossIsTokenSum() const;

  //===--------------------------------------------------------------------===//
  // Log-probs (docs/rl.md)
  //===--------------------------------------------------------------------===//

  /// The plan has a `logprobs` program (zcc --mode logprobs, or an RL
  /// loss).
  bool canLogprobs() const;
  Status checkCanLogprobs() const;
  /// Its input_ids shape [B, T].
  std::vector<int64_t> logprobsInputShape() const;
  /// Runs `logprobs` on this rank's `inputIds` ([B, T] int64, row-major):
  /// per-token log-probs and entropies, column t about token t given the
  /// ones before it, 0 in column 0. Collective.
  Status logprobs(const int64_t *inputIds, LogprobsResult &result);
  /// What the last trainStep() did (optimizerStepped false before any).
  const WindowResult &lastWindow() const;
  /// Micro-steps run in the current accumulation window (0 .. K-1).
  uint64_t microStepsInWindow() const;
  /// Optimizer steps completed (from a loaded checkpoint on).
  uint64_t optimizerSteps() const;

  /// `zrun gradients`: one micro-step on `inputs` (every input of
  /// `train_micro_step`, whatever the model takes; the same on every rank),
  /// no optimizer step; `loss` is the mean over ranks and, on rank 0,
  /// `groups` every group's whole gradient (padded elements) divided by
  /// the world size (empty for a frozen group, which has none). Needs only
  /// `train_micro_step`. Collective.
  Status gradients(const std::vector<ProgramInput> &inputs, float &loss,
                   std::vector<std::vector<float>> &groups);

  //===--------------------------------------------------------------------===//
  // Generation
  //===--------------------------------------------------------------------===//

  /// The plan has generate_begin, prefill, decode, generate_end and a KV
  /// cache, with the bindings docs/generation.md section 1 names.
  bool canGenerate() const;
  /// Fails with one line naming what is missing unless canGenerate().
  Status checkCanGenerate() const;
  /// B, P, L, V of the generation programs (valid when canGenerate()).
  const generate::GenerationShape &generationShape() const;
  /// Checks `request` against the plan (GenerationState::create's checks)
  /// without running anything: zrun checks before it loads.
  Status checkGenerateRequest(const GenerateRequest &request) const;
  /// One whole generation of this rank's rows (request.rows.firstRow is
  /// their global index): allocates the generation state, runs
  /// generate_begin, prefill, decode until every row finished (of every
  /// rank, when the plan's decode has collectives), generate_end, and frees
  /// the state. Leaves the gradient accumulators and optimizer state as
  /// they were. Collective.
  Status generate(const GenerateRequest &request, GenerateResult &result,
                  const GenerateObserver &observer = {});
  /// Every rank's rows of `mine` (this rank's generate() result) in global
  /// order, on every rank: the tokens [N * B, M] and, when kept, the logits
  /// [M, N * B, V]; the other fields are this rank's. Collective.
  Status gatherRows(const GenerateResult &mine, GenerateResult &all) const;
  //===--------------------------------------------------------------------===//
  // Traces
  //===--------------------------------------------------------------------===//

  /// With SessionOptions::trace: this rank's trace events of every program
  /// the session ran (Chrome trace JSON objects, comma-separated), each
  /// naming its program; empty otherwise. The clock starts at the session's
  /// first run or generation, after a barrier, so that the ranks' timelines
  /// line up.
  std::string traceEvents() const;

  //===--------------------------------------------------------------------===//
  // Checkpoints and memory
  //===--------------------------------------------------------------------===//

  /// Saves this rank's shards, persistent groups and training state under
  /// `root` as step-<optimizerSteps()> (runtime/train/Checkpoint.h) with
  /// `values` recorded. Collective.
  Status save(const std::string &root, const train::CheckpointValues &values,
              const train::CheckpointOptions &options,
              train::SaveResult &result);
  Status save(const std::string &root);
  /// Restores a checkpoint of this plan (a root or a step directory) and
  /// its optimizer step counter; the accumulation window restarts empty.
  /// Collective.
  Status load(const std::string &path, train::LoadedCheckpoint &loaded);
  Status load(const std::string &path);

  MemoryFigures memory() const;
  /// The rank's memory itself (zrun --stats prints from it).
  const RankMemory &rankMemory() const;

private:
  struct State;
  explicit Session(std::unique_ptr<State> state);
  std::unique_ptr<State> state;
};

} // namespace zplan::session

#endif // ZPLAN_RUNTIME_SESSION_SESSION_H
