//===- PlanFormat.h - the bytes of a plan file
//-----------------------------===//
//
// A plan file is a serialized Plan message (plan.proto) whose last 10 bytes
// are its body_checksum field: the checksum of every byte before it. The
// checksum is checked before anything is parsed, so that a flipped bit is
// "the file is corrupt", not a plan that parses into different numbers and
// runs to wrong results; and it is the plan's identity, which the weights
// file records (Weights.h). This file also holds the facts about the format
// itself: its version and its element types.
//
// No exceptions and no LLVM: zrun builds with plain flags. Every function
// reports failure through Status.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_PLANFORMAT_H
#define ZPLAN_RUNTIME_PLAN_PLANFORMAT_H

#include "runtime/plan/plan.pb.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace zplan::plan {

/// The only Plan.version this reader accepts. Bump it, in the same change as
/// plan.proto, whenever the meaning of a field changes.
inline constexpr uint32_t kPlanVersion = 8;

/// "plan version 7, this zrun reads version 2; recompile ...", after
/// `prefix` ("plan file 'x': "), which names the file when there is one.
Status versionMismatch(std::string_view prefix, uint32_t version);

/// Bytes per element of `type`; 0 for DATA_TYPE_UNSPECIFIED and for values
/// this reader does not know (a newer plan's enum value).
uint64_t dataTypeSize(DataType type);

/// plan.proto's name of `type` ("F32"), or "dtype N" for an unknown value.
std::string planTypeName(DataType type);

/// The encoded body_checksum field that ends every plan file: a 2-byte tag
/// and a little-endian 64-bit value.
inline constexpr size_t kPlanTrailerBytes = 10;

/// Sets every constant's checksum to that of its data. zcc calls it once a
/// plan is complete; a plan whose constants were not stamped does not load.
void stampConstantChecksums(Plan &plan);

/// The bytes of a plan file for `plan`: its serialization without
/// body_checksum, then body_checksum, the checksum of those bytes. Sets
/// `identity` (if given) to that checksum, the plan's identity.
std::string serializePlan(const Plan &plan, uint64_t *identity = nullptr);

/// Parses the bytes of a plan file. `sourceName` (the file name) only goes
/// into error messages. Fails when the bytes are empty, do not end in their
/// checksum, fail it, do not parse, or parse into something that is not a
/// complete plan (version 0, no programs), when the version is not
/// kPlanVersion, and when a constant fails its checksum; `plan` is then left
/// as it was. Does not validate: call validatePlan() with the launcher's
/// world size. (zrun may read the file on one rank and broadcast the bytes.)
Status parsePlan(std::string_view bytes, std::string_view sourceName,
                 Plan &plan);

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_PLANFORMAT_H
