//===- Pipeline.cpp - the pass pipelines zcc runs -------------------------===//

#include "compiler/Pipeline.h"

#include "compiler/transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void zplan::buildImportPipeline(mlir::OpPassManager &pm, bool generation) {
  mlir::OpPassManager &func = pm.nest<mlir::func::FuncOp>();
  // Canonicalise first so the patterns see folded constants and reshapes.
  func.addPass(mlir::createCanonicalizerPass());
  func.addPass(mlir::createCSEPass());
  FormNNOpsOptions form;
  form.dropNanGuards = generation;
  func.addPass(createFormNNOps(form));
  func.addPass(mlir::createCanonicalizerPass());
  func.addPass(mlir::createCSEPass());
}

void zplan::buildTrainPipeline(mlir::OpPassManager &pm,
                               const AutodiffOptions &autodiff) {
  pm.addPass(createAutodiff(autodiff));
  // The backward pass repeats reshapes and constants the forward had.
  mlir::OpPassManager &func = pm.nest<mlir::func::FuncOp>();
  func.addPass(mlir::createCanonicalizerPass());
  func.addPass(mlir::createCSEPass());
}

void zplan::buildLogprobsPipeline(mlir::OpPassManager &pm) {
  pm.addPass(createLogprobsProgram());
  mlir::OpPassManager &func = pm.nest<mlir::func::FuncOp>();
  func.addPass(mlir::createCanonicalizerPass());
  func.addPass(mlir::createCSEPass());
}

void zplan::buildGeneratePipeline(mlir::OpPassManager &pm, bool plainExport,
                                  int64_t maxSeqLen) {
  if (plainExport)
    pm.addPass(createDecodePositions());
  CachedAttentionOptions cached;
  cached.maxSeqLen = maxSeqLen;
  pm.addPass(createCachedAttention(cached));
  // The rewrite leaves reshapes of reshapes and constants to fold.
  mlir::OpPassManager &func = pm.nest<mlir::func::FuncOp>();
  func.addPass(mlir::createCanonicalizerPass());
  func.addPass(mlir::createCSEPass());
}

/// zplan-prefetch and zplan-cross-step-prefetch move starts by the same
/// rules (StartHoisting.h), so they take the same options.
template <typename Options>
static Options hoistingOptions(const zplan::ScheduleOptions &options) {
  Options hoisting;
  hoisting.policy = options.policy;
  hoisting.memoryBudget = options.memoryBudget;
  hoisting.hardware = options.hardware;
  hoisting.hardwareProfile = options.hardwareProfile;
  hoisting.maxInFlight = options.maxInFlight;
  hoisting.maxInFlightBytes = options.maxInFlightBytes;
  return hoisting;
}

void zplan::buildSchedulePipeline(mlir::OpPassManager &pm,
                                  const ScheduleOptions &options) {
  ShardParametersOptions shard;
  shard.worldSize = options.worldSize;
  shard.bucketBytes = options.bucketBytes;
  shard.persistenceThreshold = options.persistenceThreshold;
  shard.alignment = options.alignment;
  pm.addPass(createShardParameters(shard));

  // Before anything that counts gathered bytes: the bf16 copies are half.
  MixedPrecisionOptions precision;
  precision.paramDtype = options.paramDtype;
  precision.reduceDtype = options.reduceDtype;
  precision.computeDtype = options.computeDtype;
  pm.addPass(createMixedPrecision(precision));

  OptimizerStepOptions optimizer;
  optimizer.optimizer = options.optimizer;
  pm.addPass(createOptimizerStep(optimizer));

  // Generation: which groups stay gathered across tokens; only the others
  // are left for the gather placement below.
  ResidencyOptions residency;
  residency.policy = options.policy;
  residency.memoryBudget = options.memoryBudget;
  residency.hardware = options.hardware;
  residency.hardwareProfile = options.hardwareProfile;
  pm.addPass(createResidency(residency));

  // After sharding, so the resident bytes and each group's gathered size are
  // known; before the gathers are placed, which decide around what is saved.
  RecomputeOptions recompute;
  recompute.memoryBudget = options.memoryBudget;
  pm.addPass(createRecompute(recompute));

  InsertGathersOptions insert;
  insert.policy = options.policy;
  insert.memoryBudget = options.memoryBudget;
  pm.addPass(createInsertGathers(insert));

  pm.addPass(createPrefetch(hoistingOptions<PrefetchOptions>(options)));
  // Generation: @decode's first streamed gather starts in the previous
  // program's tail (docs/generation.md section 6).
  if (options.crossStepPrefetch)
    pm.addPass(createCrossStepPrefetch(
        hoistingOptions<CrossStepPrefetchOptions>(options)));

  // Generation: the ranks decode their own rows; when @decode has
  // collectives they agree on when to stop (docs/generation.md section 8).
  DecodeLockstepOptions lockstep;
  lockstep.hardware = options.hardware;
  lockstep.hardwareProfile = options.hardwareProfile;
  pm.addPass(createDecodeLockstep(lockstep));

  VerifyScheduleOptions verify;
  verify.memoryBudget = options.memoryBudget;
  pm.addPass(createVerifySchedule(verify));
}

void zplan::registerPipelines() {
  mlir::PassPipelineRegistration<>(
      "zplan-import-pipeline",
      "What zcc runs after import: form nn ops, fold, CSE",
      [](mlir::OpPassManager &pm) { buildImportPipeline(pm); });
}
