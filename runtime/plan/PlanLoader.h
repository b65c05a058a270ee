//===- PlanLoader.h - read, validate and locate the weights of a plan -----===//
//
// zrun's first step on every rank: read the plan file zcc wrote, refuse it
// with a one-line reason when it is not a plan this zrun can run (corrupt,
// another version, another world size, an id or offset out of range), and
// read this rank's section of the weights file beside it. Everything the
// executor later indexes without a check (buffer ids, arena offsets, group
// and instruction indices) is checked here once, so that a bad plan is an
// error message and never an out-of-bounds access on N ranks.
//
// No exceptions and no LLVM: zrun builds with plain flags. Every function
// reports failure through Status.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_PLANLOADER_H
#define ZPLAN_RUNTIME_PLAN_PLANLOADER_H

#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/Weights.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zplan::plan {

/// Reads and parses the plan file at `path` (see parsePlan()).
Status loadPlan(const std::string &path, Plan &plan);

/// Checks that `plan` is internally consistent and was compiled for
/// `worldSize` ranks, so that the executor can index it without checks:
///  - version is kPlanVersion; world_size equals `worldSize`;
///  - buffer ids are 1, 2, ..., in order (Buffer.id == index + 1; id 0 means
///    "no buffer", as in Buffer.view_of), every buffer has a kind and a dtype
///    and `bytes` holds its shape;
///  - ARENA buffers lie inside arena_bytes; a view lies inside the buffer it
///    views and view chains have no cycle; CONSTANT data has exactly `bytes`
///    bytes; SHARD and PERSISTENT buffers hold their group;
///  - parameters lie inside their group; groups split in world_size equal
///    shards and their weights lie inside their section of the weights file;
///  - every instruction has a known opcode (runtime/plan/Opcodes.h) and is
///    on the queue the opcode names, its operand and result
///    ids exist, its group exists (collectives), its wait_for indices are
///    other instructions of the program, and the queues together cannot
///    deadlock (no cycle through wait_for and same-queue order);
///  - input and output bindings name existing buffers.
/// Stops at the first problem; the message names the buffer (id, name),
/// parameter, group or instruction (program, index, op, location).
Status validatePlan(const Plan &plan, uint32_t worldSize);

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_PLANLOADER_H
