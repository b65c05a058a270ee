//===- PlanLoading.cpp - read a plan file ---------------------------------===//

#include "runtime/plan/PlanLoading.h"

#include "runtime/plan/ReadableFile.h"

#include <climits>

using namespace zplan;
using namespace zplan::plan;

Status zplan::plan::loadPlan(const std::string &path, Plan &plan) {
  ReadableFile file;
  if (Status status = file.open(path, "plan file"); !status.ok())
    return status;
  // A plan is one protobuf message: at most 2 GiB (parsePlan() says so
  // without reading more).
  if (file.bytes() > static_cast<uint64_t>(INT_MAX))
    return failure(file.subject(), " is ", file.bytes(),
                   " bytes, more than a protobuf message can hold (2 GiB)");
  std::string bytes(file.bytes(), '\0');
  if (Status status = file.read(0, bytes.size(), bytes.data()); !status.ok())
    return status;
  return parsePlan(bytes, path, plan);
}
