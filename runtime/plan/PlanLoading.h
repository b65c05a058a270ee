//===- PlanLoading.h - read a plan file -----------------------------------===//
//
// Reads the plan file a user named, as ReadableFile reads every file zrun is
// given: a regular file only, exactly its size, at most the 2 GiB a protobuf
// message can hold; then parses it (PlanFormat.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_PLANLOADING_H
#define ZPLAN_RUNTIME_PLAN_PLANLOADING_H

#include "runtime/plan/PlanFormat.h"

#include <string>

namespace zplan::plan {

/// Reads and parses the plan file at `path` (see parsePlan()).
Status loadPlan(const std::string &path, Plan &plan);

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_PLANLOADING_H
