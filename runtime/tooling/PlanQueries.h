//===- PlanQueries.h - what zrun's commands ask of a validated plan -------===//
//
// Small lookups that `run` and `inspect` share: a buffer by id, its shape and
// size, a type's user-facing name, the program a command line selects. Each
// assumes the plan passed plan::validatePlan().
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_PLANQUERIES_H
#define ZPLAN_RUNTIME_TOOLING_PLANQUERIES_H

#include "runtime/plan/PlanLoader.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zplan::tooling {

/// NumPy's name for a type ("float32"), as users see it in their arrays.
std::string typeName(plan::DataType type);

std::vector<int64_t> shapeOf(const plan::Buffer &buffer);

/// Product of the dimensions (validated: no overflow).
uint64_t elementCount(const plan::Buffer &buffer);

/// Buffer `id` (1-based, validated).
const plan::Buffer &bufferOf(const plan::Plan &plan, uint32_t id);

/// The plan's identity as checkpoints record it: Plan.body_checksum in 16
/// hex digits. `train` writes it; `train --resume` and `export` check it.
std::string planIdentity(const plan::Plan &plan);

/// The binding called `name` among a program's inputs or outputs; null when
/// there is none.
const plan::Binding *
findBinding(const google::protobuf::RepeatedPtrField<plan::Binding> &bindings,
            const std::string &name);

/// The program named `name`; with no name, the only program or else
/// 'infer'. Fails listing the programs the plan has.
Status selectProgram(const plan::Plan &plan, const std::string &name,
                     const plan::Program *&program);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_PLANQUERIES_H
