//===- Opcodes.h - the table of instruction opcodes -----------------------===//
//
// Every instruction kind a plan can hold (plan.proto's Opcode), with the name
// dumps, `zrun inspect`, traces and messages print for it and the queue it
// must run on. zcc emits only opcodes listed here; the loader refuses any
// other value and an instruction on the wrong queue; the executor resolves
// each instruction's opcode to its kernel or collective once, when it is
// created. Adding an instruction kind is one enum value in plan.proto and
// one row here.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_OPCODES_H
#define ZPLAN_RUNTIME_PLAN_OPCODES_H

#include "runtime/plan/plan.pb.h"

#include <optional>
#include <string>
#include <string_view>

namespace zplan::plan {

/// What running an instruction of an opcode means to the executor.
enum class OpcodeKind : uint8_t {
  /// A compute kernel over its operand and result buffers.
  Kernel,
  /// A collective over the ranks (comm queue).
  Collective,
  /// A copy between memory tiers (comm queue): tier_fetch, tier_store.
  TierCopy,
  /// Writes zeros into its result (compute queue): zero.
  Fill,
  /// No data moves: a dependency (gather_wait) or the end of a buffer's life
  /// (release), which --check tracks.
  Bookkeeping,
};

struct OpcodeInfo {
  Opcode opcode;
  /// As the nn dialect names the op without "nn." (compute), or as the
  /// zero dialect's op reads in words ("all_gather", "gather_wait").
  std::string_view name;
  /// The only queue an instruction of this opcode may be on.
  Queue queue;
  OpcodeKind kind;
  /// Instruction.group must name a group (a collective over one parameter
  /// group, or the wait that ends its all_gather).
  bool requiresGroup;
  /// Acts on a parameter group's shard or gathered copy: dumps, inspect and
  /// traces show the group (and its parameters), not the buffers. (A
  /// release may name no group, when it ends an activation's life.)
  bool showsGroup;
};

/// Every known opcode (OPCODE_UNSPECIFIED excluded), in enum order.
const OpcodeInfo *opcodesBegin();
const OpcodeInfo *opcodesEnd();

/// The row of `opcode`; nullptr for OPCODE_UNSPECIFIED and for a value this
/// build does not know (a corrupt or newer plan).
const OpcodeInfo *findOpcode(Opcode opcode);

/// The opcode called `name` ("matmul", "all_gather"); nullopt if none is.
std::optional<Opcode> opcodeFromName(std::string_view name);

/// The name of `opcode` for messages: its table name, or "opcode N" for a
/// value the table lacks.
std::string opcodeName(Opcode opcode);

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_OPCODES_H
