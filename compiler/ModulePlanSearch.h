//===- ModulePlanSearch.h - the plan search over one module ---------------===//
//
// PlanSearch.h decides which schedule zcc keeps from sizes and times alone;
// here is the step it calls: run the schedule pipeline (Pipeline.h) on a
// copy of the module with the options the search gives, emit the plan
// (PlanEmitter.h), and measure it. Every plan the search asked for is kept,
// so that the chosen one, and the one the report compares it with, are
// written without scheduling them again.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_MODULEPLANSEARCH_H
#define ZPLAN_COMPILER_MODULEPLANSEARCH_H

#include "compiler/Options.h"
#include "compiler/analysis/CostModel.h"
#include "compiler/analysis/GenerationCost.h"
#include "compiler/plan/PlanEmitter.h"
#include "compiler/plan/PlanSearch.h"
#include "compiler/plan/Report.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Error.h"

#include <optional>
#include <string>
#include <vector>

namespace zplan {

/// The plans one search asked for, in call order so that its result's
/// indices find them, with their scheduled IR when the ir dump wants it.
struct SearchedPlans {
  /// Empty where scheduling or emission failed.
  std::vector<std::optional<EmittedPlan>> plans;
  std::vector<std::string> scheduledIr;
  /// A generation module's per-token cost (GenerationCost.h), per plan.
  std::vector<std::optional<GenerationCost>> generation;

  /// Call `index`'s plan, scheduled under `policy`, as the report shows it.
  ReportedPlan reported(size_t index, SchedulePolicy policy) const;
};

/// Searches for the plan of `policy` (PlanSearch.h), scheduling and emitting
/// each candidate from `module` into `searched`. A plan the search kept
/// without its carry reports, in its GenerationCost, the group the carried
/// twin carried and why it was dropped.
llvm::Expected<PlanSearchResult>
searchModulePlan(mlir::ModuleOp module, const CompileOptions &options,
                 SchedulePolicy policy, const CostModel &cost,
                 std::string &diagnostics, SearchedPlans &searched);

/// The report's baseline: the plan of the policy other than
/// `options.policy`, compiled the same way. Under the default policy the
/// search (`search`, into `searched`) already compiled the jit plan, which
/// is reused; otherwise it is searched for into `own`. Nullopt when it
/// cannot be compiled, with `note` saying why.
std::optional<ReportedPlan>
findBaselinePlan(mlir::ModuleOp module, const CompileOptions &options,
                 const CostModel &cost, std::string &diagnostics,
                 const SearchedPlans &searched, const PlanSearchResult &search,
                 SearchedPlans &own, std::string &note);

} // namespace zplan

#endif // ZPLAN_COMPILER_MODULEPLANSEARCH_H
