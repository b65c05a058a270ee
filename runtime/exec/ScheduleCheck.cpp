//===- ScheduleCheck.cpp - zrun --check: reads, poison and checksums ------===//
//
// The checks of --check that are not an instruction's own (Executor.h, file
// comment, items 2 and 3): which gathered copies an instruction may read
// now, and the checksums of the storage no instruction may write.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Executor.h"

#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanQueries.h"

using namespace zplan;

uint64_t *Executor::checksumSlot(const plan::Buffer &buffer,
                                 const char *&what) {
  if (buffer.view_of() != 0)
    return nullptr;
  switch (buffer.kind()) {
  case plan::Buffer::SHARD:
    what = "shard";
    return &shardChecksums[buffer.group()];
  case plan::Buffer::PERSISTENT:
    what = "persistent group";
    return &persistentChecksums[buffer.group()];
  case plan::Buffer::CONSTANT:
    what = "constant";
    return &constantChecksums[buffer.id()];
  default:
    return nullptr;
  }
}

Status Executor::takeResidentChecksums() {
  shardChecksums.assign(plan.groups_size(), 0);
  persistentChecksums.assign(plan.groups_size(), 0);
  constantChecksums.assign(plan.buffers_size() + 1, 0);
  for (const plan::Buffer &buffer : plan.buffers()) {
    const char *what;
    if (uint64_t *slot = checksumSlot(buffer, what))
      ZR_RETURN_IF_ERROR(checksumOf(buffer, *slot));
  }
  return Status::success();
}

/// The checksum of a buffer's bytes now: on the device, or (an offloaded
/// shard) as the tier store holds them.
Status Executor::checksumOf(const plan::Buffer &buffer, uint64_t &out) const {
  if (buffer.tier() != plan::Buffer::DEVICE)
    return memory.tierStore()->checksumOf(buffer.id(), out);
  return backend.checksum(memory.address(buffer.id()), buffer.bytes(), out);
}

std::string Executor::describeCopyRead(uint32_t id) const {
  uint32_t root = memory.rootOf(id);
  const plan::Buffer &copy = plan::bufferOf(plan, root);
  uint32_t groupIndex = copy.group();
  std::string group = "group " + groupName(groupIndex);
  if (id == root)
    return group;
  const plan::Group &entry = plan.groups(groupIndex);
  uint64_t elementSize = plan::dataTypeSize(entry.dtype());
  uint64_t offset = memory.offsetInRoot(id);
  for (uint32_t parameterIndex : entry.parameters()) {
    const plan::Parameter &parameter = plan.parameters(parameterIndex);
    uint64_t begin = parameter.offset_elements() * elementSize;
    uint64_t end = begin + parameter.num_elements() * elementSize;
    if (offset >= begin && offset < end)
      return "parameter " + inQuotes(parameter.name()) + " (" + group + ")";
  }
  return group;
}

Status Executor::checkReads(const plan::Instruction &instruction) const {
  for (uint32_t id : instruction.operands()) {
    uint32_t root = memory.rootOf(id);
    if (plan::bufferOf(plan, root).kind() == plan::Buffer::RESIDENT) {
      const RankMemory::ResidentCopy &copy = memory.residentCopy(root);
      if (copy.state == RankMemory::ResidentCopy::State::Gathered)
        continue;
      if (copy.state == RankMemory::ResidentCopy::State::NotGathered)
        return failure(describeInstruction(instruction), " reads ",
                       describeCopyRead(id),
                       " from its resident copy, which no resident_gather ",
                       "has filled (run generate_begin first)");
      return failure(
          describeInstruction(instruction), " reads ", describeCopyRead(id),
          " from its resident copy after its release by ", copy.releasedBy);
    }
    if (!isGatheredCopy[root])
      continue;
    int64_t state = copyState[root].load(std::memory_order_relaxed);
    if (state == kAvailable)
      continue;
    if (state == kNotGathered)
      return failure(describeInstruction(instruction), " reads ",
                     describeCopyRead(id), " before it is gathered (no ",
                     plan::bufferOf(plan, root).kind() == plan::Buffer::CARRY
                         ? "carry_wait for it"
                         : "wait for its all_gather",
                     " ran before it in this run)");
    return failure(describeInstruction(instruction), " reads ",
                   describeCopyRead(id), " after its release at instruction #",
                   state);
  }
  return Status::success();
}

Status Executor::checkResidentData() {
  for (const plan::Buffer &buffer : plan.buffers()) {
    if ((buffer.kind() == plan::Buffer::SHARD ||
         buffer.kind() == plan::Buffer::PERSISTENT) &&
        updatedGroups[buffer.group()])
      continue; // This program's optimizer step updates it.
    const char *what;
    uint64_t *expected = checksumSlot(buffer, what);
    if (!expected)
      continue;
    uint64_t sum;
    ZR_RETURN_IF_ERROR(checksumOf(buffer, sum));
    if (sum != *expected)
      return failure("after the run of program ", inQuotes(program.name()),
                     ": ", what, " buffer ", buffer.id(), " ",
                     inQuotes(buffer.name()),
                     " changed during the run (checksum mismatch): an ",
                     "instruction wrote into read-only storage");
  }
  return Status::success();
}
