//===- PlanQueries.h - look-ups into a validated plan ---------------------===//
//
// The small questions every layer above the plan asks of it: a buffer by id,
// its shape and size, a program by kind and a binding by role (how the
// runtime finds what it feeds and reads; ProgramContracts.h says which exist),
// a program or binding by name (how people name them on the command line),
// and the plan's identity as checkpoints record it. Each assumes the plan
// passed validatePlan(): ids are in range and element counts do not overflow.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_PLANQUERIES_H
#define ZPLAN_RUNTIME_PLAN_PLANQUERIES_H

#include "runtime/plan/plan.pb.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zplan::plan {

/// Buffer `id` (1-based).
const Buffer &bufferOf(const Plan &plan, uint32_t id);

/// The buffer that owns buffer `id`'s storage: `id` itself, or the end of
/// its view_of chain (validatePlan() proves every chain ends).
const Buffer &rootBufferOf(const Plan &plan, uint32_t id);

/// The buffer a gather (all_gather, resident_gather, carry_gather) at
/// `position` of `program` gathers from: the root of its operand, or, when
/// that is an arena buffer the last writer of which before `position` is a
/// tier_fetch (offloaded parameters, docs/offload.md), the buffer that
/// tier_fetch read: the group's shard in its tier.
const Buffer &gatheredShardOf(const Plan &plan, const Program &program,
                              int position);

/// "buffer 7 'group0 (adam m)'", for messages.
std::string describeBuffer(const Buffer &buffer);

/// "program 'infer', instruction #3 'matmul' at '/model/MatMul'", for
/// messages (the location only when the instruction has one).
std::string describeInstruction(const Program &program, int position);

std::vector<int64_t> shapeOf(const Buffer &buffer);

/// Product of the dimensions.
uint64_t elementCount(const Buffer &buffer);

/// NumPy's name for a type ("float32"), as users see it in their arrays;
/// "dtype N" for a value this reader does not know.
std::string typeName(DataType type);

/// The program of `kind`; null when the plan has none.
const Program *findProgram(const Plan &plan, ProgramKind kind);

/// The binding of `role` among a program's inputs or outputs; null when
/// there is none (a validated program has at most one of each role but
/// BINDING_ROLE_DATA).
const Binding *
findBinding(const google::protobuf::RepeatedPtrField<Binding> &bindings,
            BindingRole role);

/// The binding called `name` among a program's inputs or outputs; null when
/// there is none.
const Binding *
findBinding(const google::protobuf::RepeatedPtrField<Binding> &bindings,
            const std::string &name);

/// The program a command line names: `name`; with no name, the only program
/// or else the infer program. Fails listing the programs the plan has.
Status selectProgram(const Plan &plan, const std::string &name,
                     const Program *&program);

/// The plan's identity as checkpoints record it: Plan.body_checksum in 16
/// hex digits. `train` writes it; `train --resume` and `export` check it.
std::string planIdentity(const Plan &plan);

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_PLANQUERIES_H
