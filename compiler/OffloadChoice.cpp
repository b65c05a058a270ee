//===- OffloadChoice.cpp - zcc --offload auto -----------------------------===//

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

/// One step of the search: how many quarters of the groups' moments and
/// shards are offloaded (OffloadSelection.h).
struct Level {
  int moments = 0, shards = 0;
};

/// "the optimizer moments of the largest half of the groups", ...
std::string describe(const Level &level) {
  auto share = [](int quarters, const char *what) {
    static const char *const shares[] = {
        "", "of the largest quarter of the groups",
        "of the largest half of the groups",
        "of the largest three quarters of the groups", "of every group"};
    return std::string(what) + " " + shares[quarters];
  };
  if (!level.moments && !level.shards)
    return "nothing";
  std::string text;
  if (level.moments)
    text = share(level.moments, "the optimizer moments");
  if (level.shards)
    text += (text.empty() ? "" : " and ") +
            share(level.shards, "the parameter shards");
  return text;
}

} // namespace

llvm::Expected<PlanSearchResult>
zplan::chooseOffload(mlir::ModuleOp module, const CompileOptions &options,
                     const CostModel &cost, std::string &diagnostics,
                     SearchedPlans &searched, CompileOptions &resolved,
                     std::string &choice) {
  std::string tier = options.offloadDir.empty() ? "cpu" : "nvme";
  // Cheapest per byte first: the moments a quarter of the groups at a
  // time, then, with all of them, the shards the same way.
  llvm::SmallVector<Level, 9> levels{{0, 0}};
  bool training = trains(options.mode);
  if (training)
    for (int quarters = 1; quarters <= 4; ++quarters)
      levels.push_back({quarters, 0});
  for (int quarters = 1; quarters <= 4; ++quarters)
    levels.push_back({training ? 4 : 0, quarters});
  std::string previous;
  for (const Level &level : levels) {
    resolved = options;
    resolved.offloadOptimizer = level.moments ? tier : "none";
    resolved.offloadParams = level.shards ? tier : "none";
    resolved.offloadedMomentQuarters = level.moments ? level.moments : 4;
    resolved.offloadedShardQuarters = level.shards ? level.shards : 4;
    diagnostics.clear();
    // The search's call indices count from its own first call.
    SearchedPlans attempt;
    llvm::Expected<PlanSearchResult> search = searchModulePlan(
        module, resolved, resolved.policy, cost, diagnostics, attempt);
    if (search) {
      searched = std::move(attempt);
      choice = "offload auto: " + describe(level) +
               (level.moments || level.shards ? " to " + tier : "");
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
  return makeError("--offload auto: even with " + describe(levels.back()) +
                   " in the " + tier + " tier: " + previous);
}
