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

#include "runtime/plan/plan.pb.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zplan::plan {

/// The only Plan.version this reader accepts. Bump it, in the same change as
/// plan.proto, whenever the meaning of a field changes.
inline constexpr uint32_t kPlanVersion = 2;

// Status lives in runtime/support; these names keep plan:: spellings
// working while the runtime moves to the support layer's.
using zplan::failure;
using zplan::inQuotes;
using zplan::Status;

/// Bytes per element of `type`; 0 for DATA_TYPE_UNSPECIFIED and for values
/// this reader does not know (a newer plan's enum value).
uint64_t dataTypeSize(DataType type);

/// Parses the bytes of a plan file. `sourceName` (the file name) only goes
/// into error messages. Fails when the bytes are empty, do not parse, or
/// parse into something that is not a complete plan (version 0, no
/// programs), and when the version is not kPlanVersion; `plan` is then left
/// as it was. Does not validate: call validatePlan() with the launcher's
/// world size. (zrun may read the file on one rank and broadcast the bytes.)
Status parsePlan(std::string_view bytes, std::string_view sourceName,
                 Plan &plan);

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

//===----------------------------------------------------------------------===//
// Weights
//
// The weights file (Plan.weights_file, relative to the plan's directory)
// holds world_size sections of weights_bytes_per_rank bytes, rank r's at
// r * weights_bytes_per_rank, each the concatenation of that rank's shard of
// every non-persistent group (at Group.weights_offset inside the section);
// then, at persistent_weights_offset, the persistent section: every
// persistent group whole (at Group.weights_offset inside that section).
// A rank reads only its own section and the persistent one.
//===----------------------------------------------------------------------===//

/// The weights file of the plan at `planPath`: weights_file resolved against
/// the plan file's directory (an absolute weights_file is kept as is).
std::string weightsPath(const std::string &planPath, const Plan &plan);

/// Bytes of the persistent section: the sum of the persistent groups' full
/// sizes (padded_elements * dtype size).
uint64_t persistentWeightsBytes(const Plan &plan);

/// Reads rank `rank`'s section of the weights file into `out` (resized to
/// weights_bytes_per_rank). Fails, naming the file and both sizes, when the
/// file is missing or shorter than the whole layout needs (every rank checks
/// the whole file, so that a short file fails on all ranks alike rather than
/// on the last ones only).
Status readRankWeights(const std::string &planPath, const Plan &plan,
                       uint32_t rank, std::vector<uint8_t> &out);

/// Reads the persistent section into `out` (resized to
/// persistentWeightsBytes(plan)); fails as readRankWeights() does.
Status readPersistentWeights(const std::string &planPath, const Plan &plan,
                             std::vector<uint8_t> &out);

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_PLANLOADER_H
