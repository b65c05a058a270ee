//===- PlanValidation.h - is a parsed plan one zrun can run? --------------===//
//
// Everything the executor later indexes without a check (buffer ids, arena
// offsets, group and instruction indices, opcodes) is checked here once, so
// that a bad plan is an error message and never an out-of-bounds access on N
// ranks. Sizes are computed with overflow checks: a corrupt number fails a
// check instead of wrapping around and passing it.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_PLANVALIDATION_H
#define ZPLAN_RUNTIME_PLAN_PLANVALIDATION_H

#include "runtime/plan/PlanFormat.h"

#include <cstdint>
#include <string_view>

namespace zplan::plan {

/// Checks that `plan` is internally consistent and was compiled for
/// `worldSize` ranks, so that the executor can index it without checks:
///  - version is kPlanVersion; world_size equals `worldSize`;
///  - buffer ids are 1, 2, ..., in order (Buffer.id == index + 1; id 0 means
///    "no buffer", as in Buffer.view_of), every buffer has a kind and a dtype
///    and `bytes` holds its shape (no negative dimension; element and byte
///    counts within 64 bits);
///  - ARENA buffers lie inside arena_bytes; a view lies inside the buffer it
///    views and view chains have no cycle; CONSTANT data has exactly `bytes`
///    bytes; SHARD and PERSISTENT buffers hold their group; a CARRY buffer
///    holds a sharded group whole, inside arena_bytes at its offset;
///  - parameters lie inside their group; groups split in world_size equal
///    shards and their weights lie inside their section of the weights file;
///  - every instruction has a known opcode (runtime/plan/Opcodes.h) and is
///    on the queue the opcode names, its operand and result
///    ids exist, its group exists (collectives), its wait_for indices are
///    other instructions of the program, and the queues together cannot
///    deadlock (no cycle through wait_for and same-queue order);
///  - generation's carry (docs/generation.md section 6): a carry_gather
///    moves its group's shard into its CARRY buffer and is the last
///    instruction of its program's comm queue; carry_wait (result: the
///    CARRY buffer) runs only in decode, carry_drain (operand: the CARRY
///    buffer) only in generate_end;
///  - offload (TierValidation.h): only STATE buffers live in the HOST or
///    NVME tier, only tier copies name them, and each copy has its one
///    tier_wait before anything else touches its staging buffer;
///  - input and output bindings name existing buffers;
///  - every program keeps the contract of its kind (ProgramContracts.h).
/// Stops at the first problem; the message names the buffer (id, name),
/// parameter, group or instruction (program, index, op, location).
Status validatePlan(const Plan &plan, uint32_t worldSize);

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_PLANVALIDATION_H
