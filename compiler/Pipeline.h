//===- Pipeline.h - the pass pipelines zcc runs ---------------------------===//
//
// zcc's stages as pass pipelines, also registered by name so zcc-opt can run
// exactly what zcc runs (`zcc-opt --zplan-import-pipeline`).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_PIPELINE_H
#define ZPLAN_COMPILER_PIPELINE_H

#include "compiler/ScheduleChoices.h"
#include "compiler/transforms/Passes.h"
#include "mlir/Pass/PassManager.h"

#include <string>

namespace zplan {

/// After import: form the high-level nn ops, fold, and remove duplicates.
/// `generation`: the module is rewritten for a KV cache next, which replaces
/// every attention mask (see zplan-form-nn-ops' drop-nan-guards).
void buildImportPipeline(mlir::OpPassManager &pm, bool generation = false);

/// --mode train, after the import pipeline: adds @train_micro_step
/// (forward, the loss, backward, per-parameter reduce-scatters) beside
/// @forward, as zplan-autodiff's options (Passes.td) say.
void buildTrainPipeline(mlir::OpPassManager &pm,
                        const AutodiffOptions &autodiff);

/// Adds @logprobs beside @forward (zplan-logprobs-program).
void buildLogprobsPipeline(mlir::OpPassManager &pm);

/// --mode generate, after the import pipeline on a module with @prefill and
/// @decode: a plain export's @decode is cut to one token per row at run-time
/// positions (zplan-decode-positions), then every attention is rewired to a
/// static KV cache of `maxSeqLen` slots (zplan-cached-attention), and the
/// result folded again.
void buildGeneratePipeline(mlir::OpPassManager &pm, bool plainExport,
                           int64_t maxSeqLen);

/// What the schedule stage is told (zcc's flags).
struct ScheduleOptions {
  int64_t worldSize = 1;
  SchedulePolicy policy = SchedulePolicy::Default;
  /// Bytes per rank; 0 = none.
  int64_t memoryBudget = 0;
  Hardware hardware = Hardware::Cpu;
  /// A calibrated profile's JSON file in place of `hardware`'s embedded one
  /// ("": the embedded one).
  std::string hardwareProfile;
  int64_t bucketBytes = 32 << 20;
  int64_t persistenceThreshold = 100000;
  int64_t alignment = 128;
  int64_t maxInFlight = 2;
  int64_t maxInFlightBytes = 0;
  /// adamw | sgd: the optimizer of a training module's @optimizer_step.
  std::string optimizer = "adamw";
  /// Generation: zplan-cross-step-prefetch after zplan-prefetch. zcc turns
  /// it off to reschedule a plan whose arena, planned around the carried
  /// copy's pinned offset, exceeds the budget.
  bool crossStepPrefetch = true;
  /// Mixed precision (zplan-mixed-precision): fp32 | bf16.
  std::string paramDtype = "fp32";
  std::string reduceDtype = "fp32";
  std::string computeDtype = "fp32";
};

/// shard -> mixed precision -> optimizer step -> recompute (training, over
/// budget) -> insert gathers/releases -> prefetch -> cross-step prefetch
/// (generation) -> verify.
void buildSchedulePipeline(mlir::OpPassManager &pm,
                           const ScheduleOptions &options);

/// Registers the pipelines above by name.
void registerPipelines();

} // namespace zplan

#endif // ZPLAN_COMPILER_PIPELINE_H
