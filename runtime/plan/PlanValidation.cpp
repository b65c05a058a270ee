//===- PlanValidation.cpp - is a parsed plan one zrun can run? ------------===//
//
// Every number in a plan comes from a file, so nothing here trusts one: sizes
// are added and multiplied with overflow checks (CheckedSizes.h), negative
// dimensions are refused before they are multiplied, and every index is
// compared to its table before use.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanValidation.h"
#include "runtime/plan/TierValidation.h"

#include "runtime/plan/CheckedSizes.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/plan/ProgramContracts.h"
#include "runtime/plan/Weights.h"
#include "runtime/support/ShapeText.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

using namespace zplan;
using namespace zplan::plan;

namespace {

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//

std::string describeGroup(const Plan &plan, uint32_t index) {
  return "group " + std::to_string(index) + " " +
         inQuotes(plan.groups(index).name());
}

std::string describeParameter(const Parameter &parameter) {
  return "parameter " + inQuotes(parameter.name());
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

/// Checks one plan against one world size; each method checks one table and
/// returns the first problem. Later methods rely on what earlier ones proved
/// (a buffer's group index is valid before its group's size is read).
class PlanValidator {
public:
  PlanValidator(const Plan &plan, uint32_t worldSize)
      : plan(plan), worldSize(worldSize) {}

  Status validate() {
    if (plan.version() != kPlanVersion)
      return versionMismatch("", plan.version());
    if (plan.world_size() == 0)
      return failure("the plan has world size 0; it is truncated or corrupt");
    if (plan.world_size() != worldSize)
      return failure("plan was compiled for ", plan.world_size(),
                     " ranks, launched with ", worldSize,
                     "; recompile it with --world-size ", worldSize,
                     " or launch ", plan.world_size(), " ranks");
    // In order, and lazily: each step indexes tables the earlier ones
    // checked.
    using Step = Status (PlanValidator::*)();
    for (Step step :
         {&PlanValidator::validateGroups, &PlanValidator::validateParameters,
          &PlanValidator::validateBuffers, &PlanValidator::validateViewChains,
          &PlanValidator::validatePrograms})
      if (Status status = (this->*step)(); !status.ok())
        return status;
    return checkProgramContracts(plan);
  }

private:
  Status validateGroups() {
    WeightsLayout layout;
    if (Status status = computeWeightsLayout(plan, layout); !status.ok())
      return status;
    for (int index = 0; index < plan.groups_size(); ++index) {
      const Group &group = plan.groups(index);
      std::string subject = describeGroup(plan, index);
      if (dataTypeSize(group.dtype()) == 0)
        return failure(subject, " has no valid dtype (",
                       planTypeName(group.dtype()), ")");
      if (group.padded_elements() % worldSize != 0)
        return failure(subject, " has ", group.padded_elements(),
                       " padded elements, not a multiple of the world size ",
                       worldSize, ", so it does not split in equal shards");
      // Mixed precision: an f32 group may gather and reduce in bf16;
      // nothing else converts.
      for (auto [field, type] :
           {std::pair{"gather_dtype", group.gather_dtype()},
            std::pair{"reduce_dtype", group.reduce_dtype()}})
        if (type != DATA_TYPE_UNSPECIFIED && type != group.dtype() &&
            !(type == BF16 && group.dtype() == F32))
          return failure(subject, " has ", field, " ", planTypeName(type),
                         " over dtype ", planTypeName(group.dtype()),
                         "; only an f32 group may gather or reduce in bf16");
      uint64_t wholeBytes;
      if (!checkedGroupBytes(group, wholeBytes))
        return failure(subject, " is too large: ", group.padded_elements(),
                       " elements of ", planTypeName(group.dtype()),
                       " overflow 64 bits");
      for (uint32_t parameterIndex : group.parameters()) {
        if (parameterIndex >= static_cast<uint32_t>(plan.parameters_size()))
          return failure(subject, " lists parameter index ", parameterIndex,
                         ", but the plan has ", plan.parameters_size(),
                         " parameters");
        const Parameter &parameter = plan.parameters(parameterIndex);
        if (parameter.group() != static_cast<uint32_t>(index))
          return failure(subject, " lists ", describeParameter(parameter),
                         ", which says it is in group ", parameter.group());
      }
      // The file layout: a shard in every rank's section, or the whole group
      // in the persistent section.
      uint64_t end;
      if (group.persistent()) {
        if (!checkedAdd(group.weights_offset(), wholeBytes, end) ||
            end > layout.persistentBytes)
          return failure(subject, " (persistent, ", wholeBytes,
                         " bytes at weights offset ", group.weights_offset(),
                         ") ends past the persistent section of ",
                         layout.persistentBytes, " bytes");
      } else {
        uint64_t shard = shardBytes(group, worldSize);
        if (!checkedAdd(group.weights_offset(), shard, end) ||
            end > plan.weights_bytes_per_rank())
          return failure(
              subject, ": its shard (", shard, " bytes at weights offset ",
              group.weights_offset(), ") ends past a rank's section of ",
              plan.weights_bytes_per_rank(), " bytes (weights_bytes_per_rank)");
      }
    }
    if (layout.dataBytes() > 0 && plan.weights_file().empty())
      return failure("the plan needs ", layout.dataBytes(),
                     " bytes of weights but names no weights file");
    // Every byte of the file is in a section a checksum covers: the
    // persistent section starts right where the ranks' sections end.
    if (plan.persistent_weights_offset() != layout.rankSectionsBytes)
      return failure(
          "persistent weights start at byte ", plan.persistent_weights_offset(),
          " of the weights file, not right after the ranks' sections (",
          worldSize, " x ", plan.weights_bytes_per_rank(), " bytes)");
    return Status::success();
  }

  Status validateParameters() {
    // Every initializer a parameter stands for -- its own name and its tied
    // copies' -- once in the plan (zrun export writes each of them).
    std::set<std::string> initializers;
    for (const Parameter &parameter : plan.parameters())
      initializers.insert(parameter.name());
    for (const Parameter &parameter : plan.parameters())
      for (const TiedCopy &copy : parameter.tied_copies()) {
        std::string subject = describeParameter(parameter) +
                              ": its tied copy " + inQuotes(copy.name());
        if (copy.name().empty() || !initializers.insert(copy.name()).second)
          return failure(subject,
                         " is empty or names an initializer that another "
                         "parameter or copy names too");
        if (copy.transposed() && parameter.shape_size() != 2)
          return failure(subject,
                         " is transposed, but the parameter has "
                         "shape ",
                         shapeText(parameter.shape()));
      }
    // How many groups list each parameter: exactly its own group must.
    std::vector<int> listings(plan.parameters_size(), 0);
    for (const Group &group : plan.groups())
      for (uint32_t parameterIndex : group.parameters())
        ++listings[parameterIndex];

    for (int index = 0; index < plan.parameters_size(); ++index) {
      const Parameter &parameter = plan.parameters(index);
      std::string subject = describeParameter(parameter);
      if (parameter.group() >= static_cast<uint32_t>(plan.groups_size()))
        return failure(subject, " is in group ", parameter.group(),
                       ", but the plan has ", plan.groups_size(), " groups");
      const Group &group = plan.groups(parameter.group());
      std::string groupText = describeGroup(plan, parameter.group());
      if (listings[index] != 1)
        return failure(subject, " is listed by ", listings[index],
                       " groups; exactly its own, ", groupText,
                       ", must list it");
      if (parameter.dtype() != group.dtype())
        return failure(subject, " is ", planTypeName(parameter.dtype()),
                       ", its ", groupText, " is ",
                       planTypeName(group.dtype()));
      uint64_t bytes;
      if (Status status = checkShapeBytes(subject, parameter.shape(),
                                          parameter.dtype(), bytes);
          !status.ok())
        return status;
      uint64_t elements;
      if (!checkedElementCount(parameter.shape(), elements) ||
          elements != parameter.num_elements())
        return failure(subject, " has shape ", shapeText(parameter.shape()),
                       " but num_elements ", parameter.num_elements());
      uint64_t end;
      if (!checkedAdd(parameter.offset_elements(), parameter.num_elements(),
                      end) ||
          end > group.padded_elements())
        return failure(subject, " (", parameter.num_elements(),
                       " elements at offset ", parameter.offset_elements(),
                       ") ends past its ", groupText, " of ",
                       group.padded_elements(), " padded elements");
    }
    return Status::success();
  }

  /// Fails unless `id` names a buffer; `what` says who names it ("buffer 4
  /// 'w' views", "... operand 1 is").
  Status checkBufferId(uint32_t id, const std::string &what) const {
    if (id >= 1 && id <= static_cast<uint32_t>(plan.buffers_size()))
      return Status::success();
    std::string range =
        plan.buffers_size() == 0
            ? std::string()
            : " (ids 1 to " + std::to_string(plan.buffers_size()) + ")";
    return failure(what, " buffer id ", id, ", but the plan has ",
                   plan.buffers_size(), " buffers", range);
  }

  /// The bytes of `shape` of `type`: refused, each with its own message,
  /// for a negative dimension and for element or byte counts past 64 bits.
  static Status
  checkShapeBytes(const std::string &subject,
                  const google::protobuf::RepeatedField<int64_t> &shape,
                  DataType type, uint64_t &bytes) {
    for (int64_t dimension : shape)
      if (dimension < 0)
        return failure(subject, " has a negative dimension in shape ",
                       shapeText(shape));
    uint64_t elements;
    if (!checkedElementCount(shape, elements))
      return failure(subject, " has shape ", shapeText(shape),
                     ", whose element count overflows 64 bits");
    if (!checkedMultiply(elements, dataTypeSize(type), bytes))
      return failure(subject, " has shape ", shapeText(shape), " of ",
                     planTypeName(type), ", whose size in bytes overflows ",
                     "64 bits");
    return Status::success();
  }

  /// An ARENA or CARRY buffer lies inside arena_bytes at its offset.
  Status checkInArena(const Buffer &buffer, const std::string &subject) const {
    uint64_t end;
    if (checkedAdd(buffer.offset(), buffer.bytes(), end) &&
        end <= plan.arena_bytes())
      return Status::success();
    return failure(subject, " (", buffer.bytes(), " bytes at arena offset ",
                   buffer.offset(), ") ends past the arena of ",
                   plan.arena_bytes(), " bytes");
  }

  /// A RESIDENT or CARRY buffer (`role`: "resident", "carried") is one
  /// sharded group's gathered copy: its group exists, is not persistent
  /// (whole on every rank already), and fits in the buffer.
  Status checkWholeGroupCopy(const Buffer &buffer, const std::string &subject,
                             const char *role) const {
    if (buffer.group() >= static_cast<uint32_t>(plan.groups_size()))
      return failure(subject, " is the ", role, " copy of group ",
                     buffer.group(), ", but the plan has ", plan.groups_size(),
                     " groups");
    const Group &group = plan.groups(buffer.group());
    if (group.persistent())
      return failure(subject, " is a ", role, " copy of ",
                     describeGroup(plan, buffer.group()),
                     ", which is persistent (whole on every rank already)");
    // Overflow was ruled out before (a gathered copy is no larger than the
    // group in its dtype).
    uint64_t groupSize = gatheredBytes(group);
    if (buffer.bytes() < groupSize)
      return failure(subject, " is the ", role, " copy of ",
                     describeGroup(plan, buffer.group()), " (", groupSize,
                     " bytes) but has only ", buffer.bytes(), " bytes");
    return Status::success();
  }

  Status validateBuffers() {
    for (int index = 0; index < plan.buffers_size(); ++index) {
      const Buffer &buffer = plan.buffers(index);
      std::string subject = describeBuffer(buffer);
      // Ids are positions so that the executor finds a buffer by indexing.
      if (buffer.id() != static_cast<uint32_t>(index) + 1)
        return failure("buffer at index ", index, " (", inQuotes(buffer.name()),
                       ") has id ", buffer.id(),
                       "; buffer ids must be their index + 1 (1, 2, ...)");
      if (!Buffer::Kind_IsValid(buffer.kind()) ||
          buffer.kind() == Buffer::KIND_UNSPECIFIED)
        return failure(subject, " has no valid kind (",
                       static_cast<int>(buffer.kind()), ")");
      uint64_t elementSize = dataTypeSize(buffer.dtype());
      if (elementSize == 0)
        return failure(subject, " has no valid dtype (",
                       planTypeName(buffer.dtype()), ")");
      uint64_t needed = 0;
      if (Status status =
              checkShapeBytes(subject, buffer.shape(), buffer.dtype(), needed);
          !status.ok())
        return status;
      if (needed > buffer.bytes())
        return failure(subject, " has shape ", shapeText(buffer.shape()),
                       " of ", planTypeName(buffer.dtype()), " but only ",
                       buffer.bytes(), " bytes");

      // Offload (TierValidation.h): only training state, parameter shards
      // and the host step's staging may live outside the device, and only
      // buffers that own their storage; the staging lives in host memory.
      if (!Buffer::Tier_IsValid(buffer.tier()))
        return failure(subject, " has no valid tier (",
                       static_cast<int>(buffer.tier()), ")");
      if (buffer.tier() != Buffer::DEVICE &&
          ((buffer.kind() != Buffer::STATE && buffer.kind() != Buffer::SHARD &&
            buffer.kind() != Buffer::HOST_STAGING) ||
           buffer.view_of() != 0))
        return failure(subject, " lives in the ",
                       buffer.tier() == Buffer::HOST ? "host" : "nvme",
                       " tier; only training state, parameter shards and "
                       "host staging (a STATE, SHARD or HOST_STAGING buffer, "
                       "not a view) may live outside the device");
      // A host master copy (the host-side step) mirrors one group's
      // parameters on the device: same group, same bytes.
      if (buffer.mirrors() != 0) {
        if (Status status =
                checkBufferId(buffer.mirrors(), subject + " mirrors");
            !status.ok())
          return status;
        const Buffer &source = bufferOf(plan, buffer.mirrors());
        if (buffer.kind() != Buffer::STATE || buffer.tier() != Buffer::HOST ||
            buffer.view_of() != 0 ||
            (source.kind() != Buffer::SHARD &&
             source.kind() != Buffer::PERSISTENT) ||
            source.tier() != Buffer::DEVICE || source.view_of() != 0 ||
            source.group() != buffer.group() ||
            source.bytes() != buffer.bytes())
          return failure(subject, " mirrors ", describeBuffer(source),
                         "; a mirror is training state in the host tier, "
                         "the same bytes as its group's shard or persistent "
                         "buffer on the device");
      }
      if (buffer.kind() == Buffer::HOST_STAGING && buffer.view_of() == 0 &&
          buffer.tier() != Buffer::HOST)
        return failure(subject,
                       " is host staging (HOST_STAGING) outside the host "
                       "tier");

      if (buffer.view_of() != 0) {
        if (Status status = checkBufferId(buffer.view_of(), subject + " views");
            !status.ok())
          return status;
        if (buffer.view_of() == buffer.id())
          return failure(subject, " views itself");
        const Buffer &viewed = bufferOf(plan, buffer.view_of());
        uint64_t end;
        if (!checkedAdd(buffer.view_offset(), buffer.bytes(), end) ||
            end > viewed.bytes())
          return failure(subject, " (", buffer.bytes(), " bytes at offset ",
                         buffer.view_offset(), ") ends past ",
                         describeBuffer(viewed), " of ", viewed.bytes(),
                         " bytes, which it views");
        // A view owns no storage: checking it against the buffer it views
        // (above) is all there is. Its kind is the viewed buffer's.
        continue;
      }

      switch (buffer.kind()) {
      case Buffer::ARENA: {
        if (Status status = checkInArena(buffer, subject); !status.ok())
          return status;
        // A gathered group names its group; other arena buffers leave 0.
        if (buffer.group() != 0 &&
            buffer.group() >= static_cast<uint32_t>(plan.groups_size()))
          return failure(subject, " holds group ", buffer.group(),
                         ", but the plan has ", plan.groups_size(), " groups");
        break;
      }
      case Buffer::CONSTANT: {
        if (buffer.constant() >= static_cast<uint32_t>(plan.constants_size()))
          return failure(subject, " is constant ", buffer.constant(),
                         ", but the plan has ", plan.constants_size(),
                         " constants");
        uint64_t dataBytes = plan.constants(buffer.constant()).data().size();
        if (dataBytes != buffer.bytes())
          return failure(subject, " has ", buffer.bytes(),
                         " bytes, but its constant ", buffer.constant(),
                         " holds ", dataBytes);
        break;
      }
      case Buffer::SHARD:
      case Buffer::PERSISTENT: {
        bool shard = buffer.kind() == Buffer::SHARD;
        if (buffer.group() >= static_cast<uint32_t>(plan.groups_size()))
          return failure(subject, " holds group ", buffer.group(),
                         ", but the plan has ", plan.groups_size(), " groups");
        const Group &group = plan.groups(buffer.group());
        if (!shard && !group.persistent())
          return failure(subject, " is PERSISTENT, but its ",
                         describeGroup(plan, buffer.group()),
                         " is not persistent");
        uint64_t groupSize;
        checkedGroupBytes(group, groupSize); // Overflow was ruled out above.
        uint64_t expected = shard ? shardBytes(group, worldSize) : groupSize;
        if (buffer.bytes() < expected)
          return failure(subject, " holds ", shard ? "a shard of " : "",
                         describeGroup(plan, buffer.group()), " (", expected,
                         " bytes) but has only ", buffer.bytes(), " bytes");
        break;
      }
      case Buffer::STATE: {
        if (buffer.group() >= static_cast<uint32_t>(plan.groups_size()))
          return failure(subject, " holds the state of group ", buffer.group(),
                         ", but the plan has ", plan.groups_size(), " groups");
        const Group &group = plan.groups(buffer.group());
        if (group.frozen())
          return failure(subject, " holds the state of ",
                         describeGroup(plan, buffer.group()),
                         ", which is frozen (it has none)");
        uint64_t elements = group.persistent()
                                ? group.padded_elements()
                                : group.padded_elements() / worldSize;
        if (buffer.dtype() != F32 || buffer.bytes() < elements * 4)
          return failure(subject, " holds f32 state of ",
                         describeGroup(plan, buffer.group()), " (",
                         elements * 4, " bytes) but has ", buffer.bytes(),
                         " bytes of ", DataType_Name(buffer.dtype()));
        break;
      }
      case Buffer::CACHE: {
        // One layer's keys or values [B, H, L, D] (docs/generation.md section
        // 5); bf16 under mixed precision (docs/mixed-precision.md).
        if (buffer.shape_size() != 4 ||
            (buffer.dtype() != F32 && buffer.dtype() != F64 &&
             buffer.dtype() != BF16))
          return failure(subject, " is a KV cache of shape ",
                         shapeText(buffer.shape()), " of ",
                         planTypeName(buffer.dtype()),
                         "; a cache is a float tensor [B, H, L, D]");
        break;
      }
      case Buffer::CARRY: {
        if (Status status = checkWholeGroupCopy(buffer, subject, "carried");
            !status.ok())
          return status;
        // It lives in the arena, at the same offset in every program.
        if (Status status = checkInArena(buffer, subject); !status.ok())
          return status;
        break;
      }
      case Buffer::RESIDENT: {
        if (Status status = checkWholeGroupCopy(buffer, subject, "resident");
            !status.ok())
          return status;
        break;
      }
      default:
        break;
      }
    }
    return Status::success();
  }

  /// A view of a view is fine; a cycle of views has no storage.
  Status validateViewChains() {
    enum class Mark : uint8_t { Unvisited, OnPath, Done };
    std::vector<Mark> marks(plan.buffers_size(), Mark::Unvisited);
    std::vector<int> path;
    for (int start = 0; start < plan.buffers_size(); ++start) {
      path.clear();
      int index = start;
      // view_of ids were checked by validateBuffers(); 0 ends a chain.
      while (index >= 0 && marks[index] == Mark::Unvisited) {
        marks[index] = Mark::OnPath;
        path.push_back(index);
        index = static_cast<int>(plan.buffers(index).view_of()) - 1;
      }
      if (index >= 0 && marks[index] == Mark::OnPath)
        return failure(describeBuffer(plan.buffers(index)),
                       " is part of a cycle of views (view_of)");
      for (int visited : path)
        marks[visited] = Mark::Done;
    }
    return Status::success();
  }

  Status validatePrograms() {
    for (int programIndex = 0; programIndex < plan.programs_size();
         ++programIndex) {
      const Program &program = plan.programs(programIndex);
      // zrun picks a program by name.
      if (program.name().empty())
        return failure("program #", programIndex, " has no name");
      for (int other = 0; other < programIndex; ++other)
        if (plan.programs(other).name() == program.name())
          return failure("programs #", other, " and #", programIndex,
                         " are both named ", inQuotes(program.name()));
      if (program.peak_arena_bytes() > plan.arena_bytes())
        return failure("program ", inQuotes(program.name()), " peaks at ",
                       program.peak_arena_bytes(),
                       " arena bytes, more than the arena of ",
                       plan.arena_bytes(), " bytes");
      for (int position = 0; position < program.instructions_size(); ++position)
        if (Status status = validateInstruction(program, position);
            !status.ok())
          return status;
      if (Status status = validateNoDeadlock(program); !status.ok())
        return status;
      if (Status status = validateCarry(program); !status.ok())
        return status;
      if (Status status = validateTierCopies(plan, program); !status.ok())
        return status;
      for (const auto &[bindings, kind] :
           {std::pair{&program.inputs(), "input"},
            std::pair{&program.outputs(), "output"}})
        for (const Binding &binding : *bindings)
          if (Status status = checkBufferId(
                  binding.buffer(),
                  "program " + inQuotes(program.name()) + " " + kind + " " +
                      inQuotes(binding.name()) + " is bound to");
              !status.ok())
            return status;
    }
    return Status::success();
  }

  Status validateInstruction(const Program &program, int position) const {
    const Instruction &instruction = program.instructions(position);
    std::string subject = describeInstruction(program, position);
    if (instruction.index() != static_cast<uint32_t>(position))
      return failure(subject, " has index ", instruction.index(),
                     "; an instruction's index must be its position");
    const OpcodeInfo *opcode = findOpcode(instruction.opcode());
    if (!opcode)
      return failure(subject, " has ",
                     instruction.opcode() == OPCODE_UNSPECIFIED
                         ? "no opcode"
                         : "an unknown opcode (a newer or corrupt plan)");
    if (instruction.queue() != COMPUTE && instruction.queue() != COMM)
      return failure(subject, " has no queue (",
                     static_cast<int>(instruction.queue()), ")");
    if (instruction.queue() != opcode->queue)
      return failure(subject, " is on the ", Queue_Name(instruction.queue()),
                     " queue; ", inQuotes(opcode->name), " runs on ",
                     Queue_Name(opcode->queue));
    for (const auto &[ids, kind] :
         {std::pair{&instruction.operands(), "operand"},
          std::pair{&instruction.results(), "result"}})
      for (int i = 0; i < ids->size(); ++i)
        if (Status status =
                checkBufferId(ids->Get(i), subject + ": " + kind + " " +
                                               std::to_string(i) + " is");
            !status.ok())
          return status;
    // An all_reduce may reduce a value that is no group (a loss), and a
    // release may end an activation's life: a group is optional for them.
    if ((instruction.group() != 0 || opcode->requiresGroup) &&
        instruction.group() >= static_cast<uint32_t>(plan.groups_size()))
      return failure(subject, " names group ", instruction.group(),
                     ", but the plan has ", plan.groups_size(), " groups");
    // A frozen group has no gradient and is never updated.
    bool trains =
        instruction.opcode() == OPCODE_REDUCE_SCATTER ||
        instruction.opcode() == OPCODE_ADAMW ||
        instruction.opcode() == OPCODE_SGD ||
        (instruction.opcode() == OPCODE_ALL_REDUCE && instruction.group() != 0);
    if (trains && plan.groups(instruction.group()).frozen())
      return failure(subject, " reduces or updates ",
                     describeGroup(plan, instruction.group()),
                     ", which is frozen (no gradient, no optimizer state)");
    for (uint32_t waited : instruction.wait_for()) {
      if (waited == static_cast<uint32_t>(position))
        return failure(subject, " waits for itself");
      if (waited >= static_cast<uint32_t>(program.instructions_size()))
        return failure(subject, " waits for instruction ", waited, ", but ",
                       "program ", inQuotes(program.name()), " has ",
                       program.instructions_size(), " instructions");
    }
    return validateGenerationInstruction(program, position, subject);
  }

  /// A gather's operand is (a view of) its group's SHARD, or the staging
  /// buffer a tier_fetch of that SHARD filled (offloaded parameters).
  Status checkGathersItsShard(const Program &program, int position,
                              const std::string &subject) const {
    const Instruction &instruction = program.instructions(position);
    const Buffer &shard = gatheredShardOf(plan, program, position);
    if (shard.kind() == Buffer::SHARD && shard.group() == instruction.group())
      return Status::success();
    return failure(subject, " gathers ", describeBuffer(shard),
                   ", which is not the shard of its ",
                   describeGroup(plan, instruction.group()));
  }

  /// The operand and result counts an opcode takes.
  static Status checkArity(const Instruction &instruction,
                           const std::string &subject, int operands,
                           int results) {
    if (instruction.operands_size() == operands &&
        instruction.results_size() == results)
      return Status::success();
    return failure(subject, " has ", instruction.operands_size(),
                   " operands and ", instruction.results_size(),
                   " results; it takes ", operands, " and ", results);
  }

  /// The instructions of generation (docs/generation.md section 5): what each
  /// operand must be, so that the kernels and the executor's residency
  /// bookkeeping can rely on it. positions are [B, S] of i64 or i32.
  Status validateGenerationInstruction(const Program &program, int position,
                                       const std::string &subject) const {
    const Instruction &instruction = program.instructions(position);
    auto operand = [&](int i) -> const Buffer & {
      return bufferOf(plan, instruction.operands(i));
    };
    auto checkPositions = [&](const Buffer &positions, int64_t batch,
                              int64_t sequence) -> Status {
      if ((positions.dtype() != I64 && positions.dtype() != I32) ||
          positions.shape_size() != 2 || positions.shape(0) != batch ||
          positions.shape(1) != sequence)
        return failure(subject, ": its positions ", describeBuffer(positions),
                       " are ", shapeText(positions.shape()), " of ",
                       planTypeName(positions.dtype()), "; expected [", batch,
                       ", ", sequence, "] of i64 or i32");
      return Status::success();
    };
    switch (instruction.opcode()) {
    case OPCODE_CACHE_APPEND: {
      if (Status status = checkArity(instruction, subject, 3, 1); !status.ok())
        return status;
      const Buffer &cache = operand(0), &entries = operand(1);
      const Buffer &root = rootBufferOf(plan, cache.id());
      if (root.kind() != Buffer::CACHE)
        return failure(subject, " appends to ", describeBuffer(cache),
                       ", which is not a KV cache (a CACHE buffer)");
      if (rootBufferOf(plan, instruction.results(0)).id() != root.id())
        return failure(subject, ": its result ",
                       describeBuffer(bufferOf(plan, instruction.results(0))),
                       " is not its cache ", describeBuffer(root),
                       "; cache_append writes in place");
      if (cache.shape_size() != 4 || entries.shape_size() != 4 ||
          entries.shape(0) != cache.shape(0) ||
          entries.shape(1) != cache.shape(1) ||
          entries.shape(3) != cache.shape(3) ||
          entries.dtype() != cache.dtype())
        return failure(subject, ": new entries ", describeBuffer(entries),
                       " are ", shapeText(entries.shape()), " of ",
                       planTypeName(entries.dtype()), ", the cache ",
                       shapeText(cache.shape()), " of ",
                       planTypeName(cache.dtype()),
                       "; expected [B, H, S, D] of the cache's type");
      return checkPositions(operand(2), entries.shape(0), entries.shape(2));
    }
    case OPCODE_CACHED_ATTENTION: {
      if (Status status = checkArity(instruction, subject, 4, 1); !status.ok())
        return status;
      const Buffer &query = operand(0), &key = operand(1), &value = operand(2);
      if (query.shape_size() != 4 || key.shape_size() != 4 ||
          value.shape_size() != 4 || key.shape(0) != query.shape(0) ||
          key.shape(1) != query.shape(1) || key.shape(3) != query.shape(3) ||
          value.shape(0) != query.shape(0) ||
          value.shape(1) != query.shape(1) || value.shape(2) != key.shape(2))
        return failure(subject, ": query ", shapeText(query.shape()), ", key ",
                       shapeText(key.shape()), ", value ",
                       shapeText(value.shape()),
                       " are not [B, H, S, D], [B, H, L, D], [B, H, L, Dv]");
      return checkPositions(operand(3), query.shape(0), query.shape(2));
    }
    case OPCODE_CARRY_GATHER:
    case OPCODE_CARRY_WAIT:
    case OPCODE_CARRY_DRAIN: {
      bool gather = instruction.opcode() == OPCODE_CARRY_GATHER;
      bool drain = instruction.opcode() == OPCODE_CARRY_DRAIN;
      if (Status status =
              checkArity(instruction, subject, gather || drain, !drain);
          !status.ok())
        return status;
      if (gather) {
        if (Status status = checkGathersItsShard(program, position, subject);
            !status.ok())
          return status;
      }
      // The CARRY buffer itself, not a view: the ledger (RankMemory) keys
      // on it.
      const Buffer &copy = plan.buffers(
          (drain ? instruction.operands(0) : instruction.results(0)) - 1);
      if (copy.kind() != Buffer::CARRY || copy.view_of() != 0 ||
          copy.group() != instruction.group())
        return failure(subject, " names ", describeBuffer(copy),
                       ", which is not the carried copy of its ",
                       describeGroup(plan, instruction.group()));
      return Status::success();
    }
    case OPCODE_RESIDENT_GATHER:
    case OPCODE_RESIDENT_RELEASE: {
      bool gather = instruction.opcode() == OPCODE_RESIDENT_GATHER;
      if (Status status = checkArity(instruction, subject, 1, gather ? 1 : 0);
          !status.ok())
        return status;
      if (gather) {
        if (Status status = checkGathersItsShard(program, position, subject);
            !status.ok())
          return status;
      }
      const Buffer &copy = rootBufferOf(plan, gather ? instruction.results(0)
                                                     : instruction.operands(0));
      if (copy.kind() != Buffer::RESIDENT ||
          copy.group() != instruction.group())
        return failure(subject, gather ? " gathers into " : " releases ",
                       describeBuffer(copy), ", which is not the resident ",
                       "copy of its ",
                       describeGroup(plan, instruction.group()));
      return Status::success();
    }
    default:
      return Status::success();
    }
  }

  /// Where the carry's instructions may stand (docs/generation.md section
  /// 6): a carry_gather ends its program's comm queue (the run ends when
  /// the comm queue drains, so the copy is complete when the next program
  /// starts); only decode completes a carried gather with carry_wait, only
  /// generate_end drops the last one with carry_drain.
  Status validateCarry(const Program &program) const {
    int lastComm = -1;
    for (int i = 0; i < program.instructions_size(); ++i)
      if (program.instructions(i).queue() == COMM)
        lastComm = i;
    for (int i = 0; i < program.instructions_size(); ++i) {
      Opcode opcode = program.instructions(i).opcode();
      std::string subject = describeInstruction(program, i);
      if (opcode == OPCODE_CARRY_GATHER && i != lastComm)
        return failure(subject, " is followed on the comm queue by ",
                       describeInstruction(program, lastComm),
                       "; a carry_gather must be its program's last ",
                       "collective");
      if (opcode == OPCODE_CARRY_WAIT && program.kind() != PROGRAM_KIND_DECODE)
        return failure(subject, ": only program ",
                       inQuotes(programKindName(PROGRAM_KIND_DECODE)),
                       " may wait for a carried gather");
      if (opcode == OPCODE_CARRY_DRAIN &&
          program.kind() != PROGRAM_KIND_GENERATE_END)
        return failure(subject, ": only program ",
                       inQuotes(programKindName(PROGRAM_KIND_GENERATE_END)),
                       " may drain a carried gather");
    }
    return Status::success();
  }

  /// Each queue runs its instructions in order and an instruction starts
  /// only after those in its wait_for; a cycle through these two kinds of
  /// edge would hang the executor on every rank, so find it here.
  Status validateNoDeadlock(const Program &program) const {
    int count = program.instructions_size();
    // predecessors[i]: the instructions that must complete before i starts.
    std::vector<std::vector<int>> predecessors(count);
    std::vector<std::vector<int>> successors(count);
    int lastOnQueue[3] = {-1, -1, -1}; // by Queue value, checked valid above
    for (int i = 0; i < count; ++i) {
      const Instruction &instruction = program.instructions(i);
      int &last = lastOnQueue[instruction.queue()];
      if (last >= 0)
        predecessors[i].push_back(last);
      last = i;
      for (uint32_t waited : instruction.wait_for())
        predecessors[i].push_back(static_cast<int>(waited));
      for (int predecessor : predecessors[i])
        successors[predecessor].push_back(i);
    }

    // Kahn's algorithm: whatever never becomes ready is on or behind a cycle.
    std::vector<int> waiting(count), ready;
    for (int i = 0; i < count; ++i)
      if ((waiting[i] = static_cast<int>(predecessors[i].size())) == 0)
        ready.push_back(i);
    int started = 0;
    while (!ready.empty()) {
      int next = ready.back();
      ready.pop_back();
      ++started;
      for (int successor : successors[next])
        if (--waiting[successor] == 0)
          ready.push_back(successor);
    }
    if (started == count)
      return Status::success();

    // Walk back through unfinished predecessors (every unfinished instruction
    // has one) until an instruction repeats: the walk between is a cycle.
    std::vector<int> stepOf(count, -1);
    std::vector<int> walk;
    int current = 0;
    while (waiting[current] == 0)
      ++current;
    while (stepOf[current] < 0) {
      stepOf[current] = static_cast<int>(walk.size());
      walk.push_back(current);
      for (int predecessor : predecessors[current])
        if (waiting[predecessor] != 0) {
          current = predecessor;
          break;
        }
    }
    // The walk went backwards; print the cycle in execution order, from its
    // lowest index so that the same cycle always reads the same.
    std::vector<int> cycle(walk.rbegin(), walk.rend() - stepOf[current]);
    std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()),
                cycle.end());
    std::string cycleText;
    for (int index : cycle)
      cycleText += "#" + std::to_string(index) + " " +
                   inQuotes(opcodeName(program.instructions(index).opcode())) +
                   " -> ";
    cycleText += "#" + std::to_string(cycle.front());
    return failure("program ", inQuotes(program.name()),
                   " would deadlock: instructions wait for each other in a "
                   "cycle (through wait_for and queue order): ",
                   cycleText);
  }

  const Plan &plan;
  uint32_t worldSize;
};

} // namespace

Status zplan::plan::validatePlan(const Plan &plan, uint32_t worldSize) {
  return PlanValidator(plan, worldSize).validate();
}
