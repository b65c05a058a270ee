//===- ModulePlanSearch.cpp - the plan search over one module -------------===//
//
// Each candidate is scheduled on a clone of the module, so that the search
// may try as many as it needs and the module stays as the front end left it.
//
//===----------------------------------------------------------------------===//

#include "compiler/ModulePlanSearch.h"

#include "compiler/CrashHandler.h"
#include "compiler/Errors.h"
#include "compiler/Pipeline.h"
#include "compiler/plan/Simulator.h"
#include "compiler/transforms/Programs.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace zplan;

ReportedPlan SearchedPlans::reported(size_t index,
                                     SchedulePolicy policy) const {
  const std::optional<GenerationCost> &cost = generation[index];
  return {policy, &*plans[index], cost ? &*cost : nullptr};
}

/// What the search reads of `emitted`.
static PlanMeasure measurePlan(const EmittedPlan &emitted, bool carried) {
  PlanMeasure measure;
  measure.residentBytes = emitted.residentBytes;
  measure.arenaBytes = emitted.arena.arenaBytes;
  measure.lowerBound = emitted.arena.lowerBound;
  measure.peakIndex = emitted.arena.peakIndex;
  for (const EmittedProgram &program : emitted.programs) {
    const ArenaPlan &arena = program.arena;
    uint64_t excess =
        arena.arenaBytes - std::min(arena.lowerBound, arena.arenaBytes);
    measure.arenaExcess = std::max(measure.arenaExcess, excess);
  }
  measure.simulatedSeconds =
      simulate(emitted.plan.programs(emitted.primary), emitted.seconds,
               emitted.cost ? &*emitted.cost : nullptr)
          .totalSeconds;
  measure.carried = carried;
  return measure;
}

/// Runs the schedule pipeline for `policy` under `budget` on a copy of
/// `module`, emits its plan and appends it to `searched`.
static llvm::Expected<PlanMeasure>
scheduleAndEmit(mlir::ModuleOp module, const CompileOptions &options,
                SchedulePolicy policy, uint64_t budget, bool crossStepPrefetch,
                const CostModel &cost, std::string &diagnostics,
                SearchedPlans &searched) {
  searched.plans.emplace_back();
  searched.scheduledIr.emplace_back();
  searched.generation.emplace_back();
  mlir::OwningOpRef<mlir::ModuleOp> copy = module.clone();
  // The budget counts device bytes: what the emitter will offload is not.
  mlir::Builder builder(module.getContext());
  if (options.offloadParams != "none") {
    (*copy)->setAttr(kShardsOffloadedAttr,
                     builder.getI64IntegerAttr(options.offloadedShardGroups));
    (*copy)->setAttr(kShardsOffloadTierAttr,
                     builder.getStringAttr(options.offloadParams));
  }
  if (options.offloadOptimizer != "none")
    (*copy)->setAttr(kMomentsOffloadedAttr,
                     builder.getI64IntegerAttr(options.offloadedMomentGroups));
  mlir::PassManager pm(module.getContext());
  ScheduleOptions schedule;
  schedule.worldSize = options.worldSize;
  schedule.policy = policy;
  schedule.memoryBudget = static_cast<int64_t>(budget);
  schedule.hardware = options.hardware;
  schedule.hardwareProfile = options.hardwareProfile;
  schedule.bucketBytes = options.bucketBytes;
  schedule.persistenceThreshold = options.persistenceThreshold;
  schedule.paramDtype = options.paramDtype;
  schedule.reduceDtype = options.reduceDtype;
  schedule.computeDtype = options.computeDtype;
  schedule.maxInFlight = options.maxInFlight;
  schedule.maxInFlightBytes = options.maxInFlightBytes;
  schedule.optimizer = options.optimizer;
  schedule.crossStepPrefetch = crossStepPrefetch && options.crossStepPrefetch;
  buildSchedulePipeline(pm, schedule);
  diagnostics.clear();
  if (mlir::failed(pm.run(*copy)))
    return makeError("scheduling (policy " + spell(policy) +
                     ") failed: " + llvm::StringRef(diagnostics).rtrim());
  searched.generation.back() = estimateGenerationCost(*copy, cost);
  if (options.dumps.count("ir")) {
    llvm::raw_string_ostream os(searched.scheduledIr.back());
    copy->print(os);
    os << "\n";
  }
  EmitOptions emit;
  emit.hardware = spell(options.hardware).str();
  // The plan and the report say which numbers it was tuned with.
  if (!options.hardwareProfile.empty())
    emit.hardware += " (profile " + options.hardwareProfile + ")";
  emit.memoryBudget = options.memoryBudget.value_or(0);
  emit.trainDefaults = options.trainDefaults;
  auto tierOf = [](llvm::StringRef option) {
    return option == "cpu"    ? plan::Buffer::HOST
           : option == "nvme" ? plan::Buffer::NVME
                              : plan::Buffer::DEVICE;
  };
  emit.optimizerTier = tierOf(options.offloadOptimizer);
  emit.parameterTier = tierOf(options.offloadParams);
  emit.offloadDir = options.offloadDir;
  emit.hostOptimizerStep = options.hostOptimizerStep;
  emit.modelName = llvm::sys::path::filename(options.modelPath).str();
  if (!options.outputPath.empty())
    emit.weightsFile =
        llvm::sys::path::filename(options.outputPath).str() + ".weights";
  llvm::Expected<EmittedPlan> emitted = emitPlan(*copy, emit, cost);
  if (!emitted)
    return emitted.takeError();
  PlanMeasure measure = measurePlan(*emitted, (*copy)->hasAttr("zplan.carry"));
  searched.plans.back() = std::move(*emitted);
  return measure;
}

llvm::Expected<PlanSearchResult>
zplan::searchModulePlan(mlir::ModuleOp module, const CompileOptions &options,
                        SchedulePolicy policy, const CostModel &cost,
                        std::string &diagnostics, SearchedPlans &searched) {
  llvm::Expected<PlanSearchResult> result = searchPlan(
      policy, options.memoryBudget.value_or(0),
      [&](SchedulePolicy candidate, uint64_t budget,
          bool crossStepPrefetch) -> llvm::Expected<PlanMeasure> {
        return scheduleAndEmit(module, options, candidate, budget,
                               crossStepPrefetch, cost, diagnostics, searched);
      });
  if (!result)
    return result.takeError();
  for (auto [index, attempt] : llvm::enumerate(result->attempts)) {
    if (!attempt.carryDroppedFrom)
      continue;
    std::optional<GenerationCost> &without = searched.generation[index];
    const std::optional<GenerationCost> &carried =
        searched.generation[*attempt.carryDroppedFrom];
    if (!without || !carried)
      continue;
    without->carriedGroup = carried->carriedGroup;
    without->carriedBytes = carried->carriedBytes;
    without->carrySkipped = kCarryOverBudget.str();
  }
  return result;
}

std::optional<ReportedPlan> zplan::findBaselinePlan(
    mlir::ModuleOp module, const CompileOptions &options, const CostModel &cost,
    std::string &diagnostics, const SearchedPlans &searched,
    const PlanSearchResult &search, SearchedPlans &own, std::string &note) {
  SchedulePolicy other = options.policy == SchedulePolicy::Jit
                             ? SchedulePolicy::Default
                             : SchedulePolicy::Jit;
  if (other == SchedulePolicy::Jit && search.jitPlan)
    return searched.reported(*search.jitPlan, other);
  setCrashPhase("scheduling '" + options.modelPath + "' for the report");
  CompileOptions withoutIr = options;
  withoutIr.dumps.erase("ir");
  llvm::Expected<PlanSearchResult> otherSearch =
      searchModulePlan(module, withoutIr, other, cost, diagnostics, own);
  setCrashPhase("writing the dumps");
  if (!otherSearch) {
    note = "// " + spell(other).str() +
           " policy: " + llvm::toString(otherSearch.takeError()) + "\n";
    return std::nullopt;
  }
  return own.reported(otherSearch->chosen, other);
}
