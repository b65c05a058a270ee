//===- Report.cpp - the report dump, assembled ----------------------------===//
//
// The sections come in the order lit tests and readers expect them: the
// per-program tables first (the chosen policy's row above the baseline's),
// then generation, the timeline, the search summary and the note.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/Report.h"

#include "compiler/plan/Dumps.h"
#include "compiler/plan/Timeline.h"

#include <utility>
#include <vector>

using namespace zplan;

std::string zplan::formatCompileReport(
    const ReportedPlan &chosen, const std::optional<ReportedPlan> &baseline,
    bool combined, llvm::StringRef searchSummary, llvm::StringRef note) {
  std::vector<std::pair<SchedulePolicy, const EmittedPlan *>> policies{
      {chosen.policy, chosen.plan}};
  if (baseline)
    policies.push_back({baseline->policy, baseline->plan});
  std::string generation;
  if (chosen.generation) {
    std::vector<std::pair<SchedulePolicy, const GenerationCost *>> costs{
        {chosen.policy, chosen.generation}};
    if (baseline && baseline->generation)
      costs.push_back({baseline->policy, baseline->generation});
    generation = formatGenerationReport(costs);
  }
  std::string timeline;
  if (combined)
    timeline = formatTimeline(buildTimeline(chosen.plan->plan));
  return formatReport(policies) + generation + timeline + "// " +
         searchSummary.str() + "\n" + note.str();
}
