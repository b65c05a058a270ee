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

/// Runs the schedule pipeline for `policy` under `budget` on a copy of
/// `module` and emits its plan.
static llvm::Expected<EmittedPlan>
scheduleAndEmitOnce(mlir::ModuleOp module, const CompileOptions &options,
                    SchedulePolicy policy, uint64_t budget,
                    const CostModel &cost, std::string &diagnostics,
                    std::string *scheduledIr,
                    std::optional<GenerationCost> *generation = nullptr,
                    bool crossStepPrefetch = true) {
  mlir::OwningOpRef<mlir::ModuleOp> copy = module.clone();
  mlir::PassManager pm(module.getContext());
  ScheduleOptions schedule;
  schedule.worldSize = options.worldSize;
  schedule.policy = policy;
  schedule.memoryBudget = static_cast<int64_t>(budget);
  schedule.hardware = options.hardware;
  schedule.bucketBytes = options.bucketBytes;
  schedule.persistenceThreshold = options.persistenceThreshold;
  schedule.maxInFlight = options.maxInFlight;
  schedule.maxInFlightBytes = options.maxInFlightBytes;
  schedule.optimizer = options.optimizer;
  crossStepPrefetch = crossStepPrefetch && options.crossStepPrefetch;
  schedule.crossStepPrefetch = crossStepPrefetch;
  buildSchedulePipeline(pm, schedule);
  diagnostics.clear();
  if (mlir::failed(pm.run(*copy)))
    return makeError("scheduling (policy " + spell(policy) +
                     ") failed: " + llvm::StringRef(diagnostics).rtrim());
  if (generation)
    *generation = estimateGenerationCost(*copy, cost);
  if (scheduledIr) {
    scheduledIr->clear();
    llvm::raw_string_ostream os(*scheduledIr);
    copy->print(os);
    os << "\n";
  }
  EmitOptions emit;
  emit.hardware = spell(options.hardware).str();
  emit.memoryBudget = options.memoryBudget.value_or(0);
  emit.modelName = llvm::sys::path::filename(options.modelPath).str();
  if (!options.outputPath.empty())
    emit.weightsFile =
        llvm::sys::path::filename(options.outputPath).str() + ".weights";
  llvm::Expected<EmittedPlan> emitted = emitPlan(*copy, emit, cost);
  // The carried copy sits at one arena offset in every program
  // (docs/generation.md section 6), and under a tight budget the arena
  // planned around it can exceed what the schedule's live bytes allowed for.
  // The same schedule without the carry is kept then, when it fits.
  uint64_t limit = options.memoryBudget.value_or(0);
  if (!emitted || !crossStepPrefetch || limit == 0 ||
      !(*copy)->hasAttr("zplan.carry") ||
      emitted->residentBytes + emitted->arena.arenaBytes <= limit)
    return emitted;
  std::string withoutIr;
  std::optional<GenerationCost> withoutCost;
  llvm::Expected<EmittedPlan> without =
      scheduleAndEmitOnce(module, options, policy, budget, cost, diagnostics,
                          scheduledIr ? &withoutIr : nullptr, &withoutCost,
                          /*crossStepPrefetch=*/false);
  if (!without) {
    llvm::consumeError(without.takeError());
    return emitted;
  }
  if (without->residentBytes + without->arena.arenaBytes > limit)
    return emitted;
  if (scheduledIr)
    *scheduledIr = std::move(withoutIr);
  if (generation) {
    if (withoutCost && *generation) {
      withoutCost->carriedGroup = (*generation)->carriedGroup;
      withoutCost->carriedBytes = (*generation)->carriedBytes;
      withoutCost->carrySkipped =
          "its copy, pinned at one arena offset, makes the arena exceed the "
          "budget";
    }
    *generation = std::move(withoutCost);
  }
  return without;
}

llvm::Expected<PlanSearchResult>
zplan::searchModulePlan(mlir::ModuleOp module, const CompileOptions &options,
                        SchedulePolicy policy, const CostModel &cost,
                        std::string &diagnostics, SearchedPlans &searched) {
  bool wantIr = options.dumps.count("ir");
  ScheduleAndEmitFn scheduleAndEmit =
      [&](SchedulePolicy candidate,
          uint64_t budget) -> llvm::Expected<PlanMeasure> {
    searched.plans.emplace_back();
    searched.scheduledIr.emplace_back();
    searched.generation.emplace_back();
    llvm::Expected<EmittedPlan> emitted = scheduleAndEmitOnce(
        module, options, candidate, budget, cost, diagnostics,
        wantIr ? &searched.scheduledIr.back() : nullptr,
        &searched.generation.back());
    if (!emitted)
      return emitted.takeError();
    PlanMeasure measure;
    measure.residentBytes = emitted->residentBytes;
    measure.arenaBytes = emitted->arena.arenaBytes;
    measure.lowerBound = emitted->arena.lowerBound;
    measure.peakIndex = emitted->arena.peakIndex;
    for (const EmittedProgram &program : emitted->programs) {
      const ArenaPlan &arena = program.arena;
      uint64_t excess =
          arena.arenaBytes - std::min(arena.lowerBound, arena.arenaBytes);
      measure.arenaExcess = std::max(measure.arenaExcess, excess);
    }
    measure.simulatedSeconds =
        simulate(emitted->plan.programs(emitted->primary), emitted->seconds)
            .totalSeconds;
    searched.plans.back() = std::move(*emitted);
    return measure;
  };
  return searchPlan(policy, options.memoryBudget.value_or(0), scheduleAndEmit);
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
