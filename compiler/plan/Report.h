//===- Report.h - the report dump, assembled ------------------------------===//
//
// The `report` dump compares the chosen plan with the other policy's, the
// baseline, compiled the same way: per program (Dumps.h, formatReport), per
// decoded token when the plan generates (formatGenerationReport), across
// programs when one plan holds training and generation or inference
// (Timeline.h), and closes with what the plan search chose and why
// (PlanSearch.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_PLAN_REPORT_H
#define ZPLAN_COMPILER_PLAN_REPORT_H

#include "compiler/ScheduleChoices.h"
#include "compiler/analysis/GenerationCost.h"
#include "compiler/plan/PlanEmitter.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace zplan {

/// One policy's plan as the report shows it.
struct ReportedPlan {
  SchedulePolicy policy;
  const EmittedPlan *plan = nullptr;
  /// A generation module's per-token cost (GenerationCost.h); null for a
  /// module without generation programs.
  const GenerationCost *generation = nullptr;
};

/// The report of `chosen` beside `baseline` (absent when the other policy
/// could not be compiled, and `note` says why, as a `// ` line). `combined`:
/// the plan holds training and generation or inference programs, whose
/// memory across programs the timeline shows. `searchSummary` is
/// PlanSearchResult::summary of the chosen plan's search.
std::string formatCompileReport(const ReportedPlan &chosen,
                                const std::optional<ReportedPlan> &baseline,
                                bool combined, llvm::StringRef searchSummary,
                                llvm::StringRef note);

} // namespace zplan

#endif // ZPLAN_COMPILER_PLAN_REPORT_H
