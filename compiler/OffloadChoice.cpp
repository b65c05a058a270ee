//===- OffloadChoice.cpp - zcc --offload auto
//------------------------------===//

#include "compiler/OffloadChoice.h"

#include "compiler/Errors.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

using namespace zplan;

namespace {

/// Whether the search failed only because no plan fits the budget (its
/// errors say so), so that offloading more may help.
bool overBudget(llvm::StringRef message) {
  return message.contains("memory budget") || message.contains("the budget");
}

struct Level {
  bool moments = false, shards = false;
  const char *what;
};

} // namespace

llvm::Expected<PlanSearchResult>
zplan::chooseOffload(mlir::ModuleOp module, const CompileOptions &options,
                     const CostModel &cost, std::string &diagnostics,
                     SearchedPlans &searched, CompileOptions &resolved,
                     std::string &choice) {
  std::string tier = options.offloadDir.empty() ? "cpu" : "nvme";
  llvm::SmallVector<Level, 3> levels{{false, false, "nothing"}};
  if (trains(options.mode))
    levels.push_back({true, false, "the optimizer moments"});
  levels.push_back({trains(options.mode), true,
                    trains(options.mode)
                        ? "the optimizer moments and the parameter shards"
                        : "the parameter shards"});
  std::string previous;
  for (const Level &level : levels) {
    resolved = options;
    resolved.offloadOptimizer = level.moments ? tier : "none";
    resolved.offloadParams = level.shards ? tier : "none";
    diagnostics.clear();
    // The search's call indices count from its own first call.
    SearchedPlans attempt;
    llvm::Expected<PlanSearchResult> search = searchModulePlan(
        module, resolved, resolved.policy, cost, diagnostics, attempt);
    if (search) {
      searched = std::move(attempt);
      choice = "offload auto: " + std::string(level.what) +
               (level.moments || level.shards ? " to " + tier : "") +
               " (--offload-optimizer " + resolved.offloadOptimizer +
               " --offload-params " + resolved.offloadParams + ")";
      if (!previous.empty())
        choice += "; with less offloaded the plan does not fit: " + previous;
      search->summary += "; " + choice;
      return search;
    }
    std::string message = llvm::toString(search.takeError());
    if (!overBudget(message))
      return makeError(message);
    previous = llvm::StringRef(message).split('\n').first.str();
  }
  return makeError("--offload auto: even with " +
                   std::string(levels.back().what) + " in the " + tier +
                   " tier: " + previous);
}
