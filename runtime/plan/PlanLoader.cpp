//===- PlanLoader.cpp - read, validate and locate the weights of a plan ---===//
//
// Every number in a plan comes from a file, so nothing here trusts one: sizes
// are added and multiplied with overflow checks, every index is compared to
// its table before use, and files are read with pread against the size fstat
// reported, so that a short or changing file is an error and not a short read
// the executor would notice later as garbage weights.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanLoader.h"

#include "runtime/plan/Opcodes.h"
#include "runtime/support/ElementType.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace zplan::plan;

namespace {

//===----------------------------------------------------------------------===//
// Messages
//===----------------------------------------------------------------------===//



std::string typeName(DataType type) {
  const std::string &name = DataType_Name(type);
  return name.empty() ? "dtype " + std::to_string(static_cast<int>(type))
                      : name;
}

std::string shapeText(const google::protobuf::RepeatedField<int64_t> &shape) {
  std::string text = "[";
  for (int i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

std::string describeBuffer(const Buffer &buffer) {
  return "buffer " + std::to_string(buffer.id()) + " " +
         inQuotes(buffer.name());
}

std::string describeGroup(const Plan &plan, uint32_t index) {
  return "group " + std::to_string(index) + " " +
         inQuotes(plan.groups(index).name());
}

std::string describeParameter(const Parameter &parameter) {
  return "parameter " + inQuotes(parameter.name());
}

std::string describeInstruction(const Program &program, int position) {
  const Instruction &instruction = program.instructions(position);
  std::string text = "program " + inQuotes(program.name()) + ", instruction #" +
                     std::to_string(position) + " " +
                     inQuotes(opcodeName(instruction.opcode()));
  if (!instruction.location().empty())
    text += " at " + inQuotes(instruction.location());
  return text;
}

/// `prefix` ("plan file 'x': ") names the file, when there is one.
Status versionMismatch(std::string_view prefix, uint32_t version) {
  return failure(prefix, "plan version ", version, ", this zrun reads version ",
                 kPlanVersion, "; recompile the model with the matching zcc");
}

//===----------------------------------------------------------------------===//
// Sizes
//===----------------------------------------------------------------------===//

// The plan's sizes are untrusted: a corrupt plan must fail a check, not wrap
// around and pass it. Each helper returns false on overflow.

bool checkedAdd(uint64_t a, uint64_t b, uint64_t &sum) {
  return !__builtin_add_overflow(a, b, &sum);
}

bool checkedMultiply(uint64_t a, uint64_t b, uint64_t &product) {
  return !__builtin_mul_overflow(a, b, &product);
}

/// Elements of `shape`; false for a negative dimension or overflow.
bool elementCount(const google::protobuf::RepeatedField<int64_t> &shape,
                  uint64_t &count) {
  count = 1;
  for (int64_t dimension : shape)
    if (dimension < 0 ||
        !checkedMultiply(count, static_cast<uint64_t>(dimension), count))
      return false;
  return true;
}

/// Bytes of a whole group (all shards); false on overflow.
bool groupBytes(const Group &group, uint64_t &bytes) {
  return checkedMultiply(group.padded_elements(), dataTypeSize(group.dtype()),
                         bytes);
}

/// Bytes of one rank's shard of `group`.
uint64_t shardBytes(const Group &group, uint32_t worldSize) {
  return worldSize == 0 ? 0
                        : group.padded_elements() / worldSize *
                              dataTypeSize(group.dtype());
}

bool checkedPersistentBytes(const Plan &plan, uint64_t &total) {
  total = 0;
  for (const Group &group : plan.groups()) {
    if (!group.persistent())
      continue;
    uint64_t bytes;
    if (!groupBytes(group, bytes) || !checkedAdd(total, bytes, total))
      return false;
  }
  return true;
}

/// Where the weights file's sections end; see "Weights" in PlanLoader.h.
struct WeightsLayout {
  uint64_t rankSectionsBytes = 0; // world_size * weights_bytes_per_rank
  uint64_t persistentBytes = 0;
  uint64_t persistentEnd = 0; // persistent_weights_offset + persistentBytes
  /// The least size a complete weights file has.
  uint64_t requiredBytes() const {
    return std::max(rankSectionsBytes, persistentEnd);
  }
};

Status computeWeightsLayout(const Plan &plan, WeightsLayout &layout) {
  if (!checkedMultiply(plan.world_size(), plan.weights_bytes_per_rank(),
                       layout.rankSectionsBytes) ||
      !checkedPersistentBytes(plan, layout.persistentBytes) ||
      !checkedAdd(plan.persistent_weights_offset(), layout.persistentBytes,
                  layout.persistentEnd))
    return failure("the plan's weights layout overflows 64 bits ",
                   "(weights_bytes_per_rank ", plan.weights_bytes_per_rank(),
                   ", persistent_weights_offset ",
                   plan.persistent_weights_offset(), ")");
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Files
//===----------------------------------------------------------------------===//

/// A read-only file: its descriptor (closed on destruction) and its size when
/// opened.
class InputFile {
public:
  InputFile() = default;
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;
  ~InputFile() {
    if (descriptor >= 0)
      ::close(descriptor);
  }

  /// `what` ("plan file", "weights file") names the file in messages.
  Status open(const std::string &filePath, std::string_view what) {
    path = filePath;
    kind = what;
    descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (descriptor < 0)
      return failure("cannot open ", kind, " ", inQuotes(path), ": ",
                     std::strerror(errno));
    struct stat info;
    if (::fstat(descriptor, &info) != 0)
      return failure("cannot stat ", kind, " ", inQuotes(path), ": ",
                     std::strerror(errno));
    // A directory opens fine and fails only at read; say what it is.
    if (!S_ISREG(info.st_mode))
      return failure(kind, " ", inQuotes(path), " is not a regular file");
    size = static_cast<uint64_t>(info.st_size);
    return Status::success();
  }

  /// Reads exactly `count` bytes at `offset` into `destination`.
  Status read(uint64_t offset, uint64_t count, void *destination) const {
    auto *bytes = static_cast<char *>(destination);
    while (count > 0) {
      // pread takes at most SSIZE_MAX; Linux transfers at most ~2 GiB a call.
      size_t chunk = static_cast<size_t>(std::min<uint64_t>(count, 1u << 30));
      ssize_t got =
          ::pread(descriptor, bytes, chunk, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR)
        continue;
      if (got < 0)
        return failure("cannot read ", kind, " ", inQuotes(path), " at byte ",
                       offset, ": ", std::strerror(errno));
      // The size was checked when opening: the file shrank under us.
      if (got == 0)
        return failure(kind, " ", inQuotes(path), " ended at byte ", offset,
                       " while reading it (was it changed while zrun ran?)");
      bytes += got;
      offset += static_cast<uint64_t>(got);
      count -= static_cast<uint64_t>(got);
    }
    return Status::success();
  }

  uint64_t bytes() const { return size; }

private:
  int descriptor = -1;
  uint64_t size = 0;
  std::string path;
  std::string kind;
};

/// Opens the weights file and checks it holds the whole layout. Sets
/// `hasFile` to false, without error, for a plan that has no weights at all.
Status openWeights(const std::string &planPath, const Plan &plan,
                   InputFile &file, WeightsLayout &layout, bool &hasFile) {
  hasFile = false;
  if (Status status = computeWeightsLayout(plan, layout); !status.ok())
    return status;
  if (plan.weights_file().empty()) {
    if (layout.requiredBytes() == 0)
      return Status::success();
    return failure("the plan needs ", layout.requiredBytes(),
                   " bytes of weights but names no weights file");
  }
  std::string path = weightsPath(planPath, plan);
  if (Status status = file.open(path, "weights file"); !status.ok())
    return status;
  if (file.bytes() < layout.requiredBytes())
    return failure("weights file ", inQuotes(path), " is ", file.bytes(),
                   " bytes, the plan needs at least ", layout.requiredBytes(),
                   " (", plan.world_size(), " ranks x ",
                   plan.weights_bytes_per_rank(), " bytes, then ",
                   layout.persistentBytes, " persistent bytes at offset ",
                   plan.persistent_weights_offset(),
                   "); is it truncated, or from another compilation?");
  hasFile = true;
  return Status::success();
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
    return Status::success();
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
                       typeName(group.dtype()), ")");
      if (group.padded_elements() % worldSize != 0)
        return failure(subject, " has ", group.padded_elements(),
                       " padded elements, not a multiple of the world size ",
                       worldSize, ", so it does not split in equal shards");
      uint64_t wholeBytes;
      if (!groupBytes(group, wholeBytes))
        return failure(subject, " is too large: ", group.padded_elements(),
                       " elements of ", typeName(group.dtype()),
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
    if (layout.requiredBytes() > 0 && plan.weights_file().empty())
      return failure("the plan needs ", layout.requiredBytes(),
                     " bytes of weights but names no weights file");
    if (layout.persistentBytes > 0 &&
        plan.persistent_weights_offset() < layout.rankSectionsBytes)
      return failure(
          "persistent weights start at byte ", plan.persistent_weights_offset(),
          " of the weights file, inside the ranks' sections (", worldSize,
          " x ", plan.weights_bytes_per_rank(), " bytes)");
    return Status::success();
  }

  Status validateParameters() {
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
        return failure(subject, " is ", typeName(parameter.dtype()), ", its ",
                       groupText, " is ", typeName(group.dtype()));
      uint64_t elements;
      if (!elementCount(parameter.shape(), elements) ||
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
                       typeName(buffer.dtype()), ")");
      uint64_t elements, needed;
      if (!elementCount(buffer.shape(), elements) ||
          !checkedMultiply(elements, elementSize, needed) ||
          needed > buffer.bytes())
        return failure(subject, " has shape ", shapeText(buffer.shape()),
                       " of ", typeName(buffer.dtype()), " but only ",
                       buffer.bytes(), " bytes");

      if (buffer.view_of() != 0) {
        if (Status status = checkBufferId(buffer.view_of(), subject + " views");
            !status.ok())
          return status;
        if (buffer.view_of() == buffer.id())
          return failure(subject, " views itself");
        const Buffer &viewed = plan.buffers(buffer.view_of() - 1);
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
        uint64_t end;
        if (!checkedAdd(buffer.offset(), buffer.bytes(), end) ||
            end > plan.arena_bytes())
          return failure(subject, " (", buffer.bytes(),
                         " bytes at arena offset ", buffer.offset(),
                         ") ends past the arena of ", plan.arena_bytes(),
                         " bytes");
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
        groupBytes(group, groupSize); // Overflow was ruled out above.
        uint64_t expected = shard ? shardBytes(group, worldSize) : groupSize;
        if (buffer.bytes() < expected)
          return failure(subject, " holds ", shard ? "a shard of " : "",
                         describeGroup(plan, buffer.group()), " (", expected,
                         " bytes) but has only ", buffer.bytes(), " bytes");
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
    for (uint32_t waited : instruction.wait_for()) {
      if (waited == static_cast<uint32_t>(position))
        return failure(subject, " waits for itself");
      if (waited >= static_cast<uint32_t>(program.instructions_size()))
        return failure(subject, " waits for instruction ", waited, ", but ",
                       "program ", inQuotes(program.name()), " has ",
                       program.instructions_size(), " instructions");
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

//===----------------------------------------------------------------------===//
// Public interface
//===----------------------------------------------------------------------===//

// The element-type table (runtime/support/ElementType.h) is free of
// protobuf; here, where both are visible, its plan numbers must be
// plan.proto's DataType values.
static_assert(zplan::elementTypeInfo(zplan::ElementType::F32).plan == F32);
static_assert(zplan::elementTypeInfo(zplan::ElementType::F16).plan == F16);
static_assert(zplan::elementTypeInfo(zplan::ElementType::BF16).plan == BF16);
static_assert(zplan::elementTypeInfo(zplan::ElementType::F64).plan == F64);
static_assert(zplan::elementTypeInfo(zplan::ElementType::I64).plan == I64);
static_assert(zplan::elementTypeInfo(zplan::ElementType::I32).plan == I32);
static_assert(zplan::elementTypeInfo(zplan::ElementType::I8).plan == I8);
static_assert(zplan::elementTypeInfo(zplan::ElementType::U8).plan == U8);
static_assert(zplan::elementTypeInfo(zplan::ElementType::Bool).plan == BOOL);
static_assert(sizeof(zplan::kElementTypes) / sizeof(zplan::kElementTypes[0]) ==
                  DataType_MAX,
              "one element-type row per DataType value but UNSPECIFIED");

uint64_t zplan::plan::dataTypeSize(DataType type) {
  std::optional<zplan::ElementType> element = zplan::elementTypeFromPlan(type);
  return element ? zplan::elementTypeInfo(*element).bytes : 0;
}

Status zplan::plan::parsePlan(std::string_view bytes,
                              std::string_view sourceName, Plan &plan) {
  std::string subject = "plan file " + inQuotes(sourceName);
  // An empty message parses successfully into an empty plan.
  if (bytes.empty())
    return failure(subject, " is empty");
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return failure(subject, " is ", bytes.size(),
                   " bytes, more than a protobuf message can hold (2 GiB)");
  // Parse into a fresh message so that a failure leaves `plan` as it was.
  Plan parsed;
  if (!parsed.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
    return failure(subject,
                   " is truncated or corrupt: it does not parse as a plan");
  // A prefix of a plan cut between two fields parses; what zcc always writes
  // (a version first, at least one program) tells most of those apart.
  if (parsed.version() == 0)
    return failure(subject, " is truncated or corrupt: it has no version");
  if (parsed.version() != kPlanVersion)
    return versionMismatch(subject + ": ", parsed.version());
  if (parsed.programs_size() == 0)
    return failure(subject, " is truncated or corrupt: it has no programs");
  plan.Swap(&parsed);
  return Status::success();
}

Status zplan::plan::loadPlan(const std::string &path, Plan &plan) {
  InputFile file;
  if (Status status = file.open(path, "plan file"); !status.ok())
    return status;
  std::string bytes(file.bytes(), '\0');
  if (Status status = file.read(0, bytes.size(), bytes.data()); !status.ok())
    return status;
  return parsePlan(bytes, path, plan);
}

Status zplan::plan::validatePlan(const Plan &plan, uint32_t worldSize) {
  return PlanValidator(plan, worldSize).validate();
}

std::string zplan::plan::weightsPath(const std::string &planPath,
                                     const Plan &plan) {
  // operator/ keeps an absolute right-hand side as is.
  return (std::filesystem::path(planPath).parent_path() / plan.weights_file())
      .string();
}

uint64_t zplan::plan::persistentWeightsBytes(const Plan &plan) {
  uint64_t total;
  // Saturate: an overflowing plan fails validation with a message anyway.
  return checkedPersistentBytes(plan, total) ? total : UINT64_MAX;
}

Status zplan::plan::readRankWeights(const std::string &planPath,
                                    const Plan &plan, uint32_t rank,
                                    std::vector<uint8_t> &out) {
  if (rank >= plan.world_size())
    return failure("rank ", rank, " is out of range: the plan has ",
                   plan.world_size(), " ranks");
  InputFile file;
  WeightsLayout layout;
  bool hasFile;
  if (Status status = openWeights(planPath, plan, file, layout, hasFile);
      !status.ok())
    return status;
  out.resize(plan.weights_bytes_per_rank());
  if (!hasFile)
    return Status::success();
  // rank < world_size, so this cannot overflow: the layout check computed
  // world_size * weights_bytes_per_rank.
  uint64_t offset = static_cast<uint64_t>(rank) * plan.weights_bytes_per_rank();
  return file.read(offset, out.size(), out.data());
}

Status zplan::plan::readPersistentWeights(const std::string &planPath,
                                          const Plan &plan,
                                          std::vector<uint8_t> &out) {
  InputFile file;
  WeightsLayout layout;
  bool hasFile;
  if (Status status = openWeights(planPath, plan, file, layout, hasFile);
      !status.ok())
    return status;
  out.resize(layout.persistentBytes);
  if (!hasFile)
    return Status::success();
  return file.read(plan.persistent_weights_offset(), out.size(), out.data());
}
