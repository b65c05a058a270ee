//===- OffloadChoice.cpp - zcc --offload auto -----------------------------===//

#include "compiler/OffloadChoice.h"

#include "compiler/Errors.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <set>

using namespace zplan;

namespace {

/// Whether the search failed only because no plan fits the budget (its
/// errors say so), so that offloading more may help.
bool overBudget(llvm::StringRef message) {
  return message.contains("memory budget") || message.contains("the budget");
}

/// What one step of the search offloads: how many groups' moments and
/// shards (CompileOptions::kEveryGroup: every one), out of how many.
struct Level {
  int64_t moments = 0, shards = 0;
  int64_t momentGroups = 0, shardGroups = 0;
};

/// "the optimizer moments of the largest 2 of 5 groups", ...
std::string describe(const Level &level) {
  auto share = [](int64_t count, int64_t of, const char *what) {
    if (count == CompileOptions::kEveryGroup || (of && count >= of))
      return std::string(what) + " of every group";
    return std::string(what) + " of the largest " + std::to_string(count) +
           " of " + std::to_string(of) + " groups";
  };
  if (!level.moments && !level.shards)
    return "nothing";
  std::string text;
  if (level.moments)
    text = share(level.moments, level.momentGroups, "the optimizer moments");
  if (level.shards)
    text += (text.empty() ? "" : " and ") +
            share(level.shards, level.shardGroups, "the parameter shards");
  return text;
}

/// The groups a plan keeps outside the device: how many have their
/// moments (STATE) and their shards (SHARD) in another tier.
void countOffloaded(const plan::Plan &plan, int64_t &moments, int64_t &shards) {
  std::set<uint32_t> momentGroups, shardGroups;
  for (const plan::Buffer &buffer : plan.buffers()) {
    if (buffer.tier() == plan::Buffer::DEVICE)
      continue;
    if (buffer.kind() == plan::Buffer::STATE)
      momentGroups.insert(buffer.group());
    if (buffer.kind() == plan::Buffer::SHARD)
      shardGroups.insert(buffer.group());
  }
  moments = static_cast<int64_t>(momentGroups.size());
  shards = static_cast<int64_t>(shardGroups.size());
}

/// One compile of the search, and what came of it.
struct Attempt {
  Level level;
  std::optional<PlanSearchResult> result;
  SearchedPlans searched;
  CompileOptions resolved;
  /// When it failed: the whole error, and whether only the budget failed.
  std::string message;
  bool overBudget = false;
  /// The first line of the error, for the choice's "does not fit".
  std::string firstLine() const {
    return llvm::StringRef(message).split('\n').first.str();
  }
};

} // namespace

llvm::Expected<PlanSearchResult>
zplan::chooseOffload(mlir::ModuleOp module, const CompileOptions &options,
                     const CostModel &cost, std::string &diagnostics,
                     SearchedPlans &searched, CompileOptions &resolved,
                     std::string &choice) {
  std::string tier = options.offloadDir.empty() ? "cpu" : "nvme";
  auto attempt = [&](const Level &level) {
    Attempt tried;
    tried.level = level;
    tried.resolved = options;
    tried.resolved.offloadOptimizer = level.moments ? tier : "none";
    tried.resolved.offloadParams = level.shards ? tier : "none";
    tried.resolved.offloadedMomentGroups =
        level.moments ? level.moments : CompileOptions::kEveryGroup;
    tried.resolved.offloadedShardGroups =
        level.shards ? level.shards : CompileOptions::kEveryGroup;
    diagnostics.clear();
    // The search's call indices count from its own first call.
    llvm::Expected<PlanSearchResult> search =
        searchModulePlan(module, tried.resolved, tried.resolved.policy, cost,
                         diagnostics, tried.searched);
    if (search) {
      tried.result = std::move(*search);
    } else {
      tried.message = llvm::toString(search.takeError());
      tried.overBudget = overBudget(tried.message);
    }
    return tried;
  };
  auto finish = [&](Attempt &kept,
                    const std::string &previous) -> PlanSearchResult {
    searched = std::move(kept.searched);
    resolved = kept.resolved;
    choice = "offload auto: " + describe(kept.level) +
             (kept.level.moments || kept.level.shards ? " to " + tier : "");
    if (!previous.empty())
      choice += "; with less offloaded the plan does not fit: " + previous;
    kept.result->summary += "; " + choice;
    return std::move(*kept.result);
  };

  // Nothing offloaded first.
  Attempt tried = attempt(Level());
  if (tried.result)
    return finish(tried, "");
  if (!tried.overBudget)
    return makeError(tried.message);
  // Cheapest per byte first: the moments, then, with all of them, the
  // shards. For each kind, every group's first; when that fits, the fewest
  // groups (the largest first) that fit, by bisection: offloading more
  // does not add device bytes, so a count that fits stands for the counts
  // above it.
  bool training = trains(options.mode);
  for (bool shards : {false, true}) {
    if (!shards && !training)
      continue;
    Level every = tried.level;
    (shards ? every.shards : every.moments) = CompileOptions::kEveryGroup;
    std::string below = tried.firstLine();
    Attempt all = attempt(every);
    if (!all.result) {
      if (!all.overBudget)
        return makeError(all.message);
      tried = std::move(all);
      continue;
    }
    // How many groups "every" was, from its plan.
    countOffloaded(all.searched.plans[all.result->chosen]->plan,
                   every.momentGroups, every.shardGroups);
    all.level = every;
    int64_t low = 1, high = shards ? every.shardGroups : every.momentGroups;
    Attempt kept = std::move(all);
    while (low < high) {
      int64_t middle = low + (high - low) / 2;
      Level some = every;
      (shards ? some.shards : some.moments) = middle;
      Attempt probe = attempt(some);
      if (probe.result) {
        high = middle;
        kept = std::move(probe);
      } else if (!probe.overBudget) {
        return makeError(probe.message);
      } else {
        low = middle + 1;
        below = probe.firstLine();
      }
    }
    return finish(kept, below);
  }
  return makeError("--offload auto: even with " + describe(tried.level) +
                   " in the " + tier + " tier: " + tried.firstLine());
}
