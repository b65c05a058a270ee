//===- OffloadChoice.h - zcc --offload auto -------------------------------===//
//
// `--offload auto` (docs/offload.md) offloads only as much as the device
// budget (--memory-budget) requires: the plan search runs without offload
// first, and when no plan fits the budget, again with more offloaded, in
// order of the copies each byte costs per step:
//
//  1. the optimizer's moments (a training plan): each byte is copied in and
//     out once per optimizer step, that is once per K micro-steps;
//  2. the parameter shards too: each byte is copied in at least once per
//     micro-step (every gather of it), and in and out once more per
//     optimizer step.
//
// For each kind, every group's first; when that fits, the fewest groups
// that fit, the largest first (compiler/analysis/OffloadSelection.h), by
// bisection on their count: offloading more does not add device bytes, so
// a count that fits stands for the counts above it. A model of G groups
// takes at most 2 + 2 * ceil(log2 G) searches after the first.
//
// The tier is nvme when --offload-dir names a directory, else cpu (host
// memory). What was chosen, and why, ends the search summary (the report
// and the ir dump) and is one of zcc's notes.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_OFFLOADCHOICE_H
#define ZPLAN_COMPILER_OFFLOADCHOICE_H

#include "compiler/ModulePlanSearch.h"

#include <string>

namespace zplan {

/// The plan search of compileModel() under `--offload auto`: the result of
/// the first level that fits, with `resolved` the options it was compiled
/// with (--offload-optimizer, --offload-params and their group counts set) and
/// `choice` one line saying what was offloaded. Fails as searchModulePlan()
/// does when even the last level does not fit, naming what was offloaded.
llvm::Expected<PlanSearchResult>
chooseOffload(mlir::ModuleOp module, const CompileOptions &options,
              const CostModel &cost, std::string &diagnostics,
              SearchedPlans &searched, CompileOptions &resolved,
              std::string &choice);

} // namespace zplan

#endif // ZPLAN_COMPILER_OFFLOADCHOICE_H
