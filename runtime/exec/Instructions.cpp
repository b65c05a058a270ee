//===- Instructions.cpp - what each non-kernel instruction does ----------===//
//
// The executor's instruction semantics: collectives over a group (gathers
// into an arena copy or a resident copy, gradient reductions into the
// accumulators), the bookkeeping of gathered copies (wait, release), and the
// dispatch of everything else to the backend's prepared kernel. The carry's
// instructions are in Carry.cpp, the --check bookkeeping in ScheduleCheck.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Executor.h"

#include "runtime/plan/CheckedSizes.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanQueries.h"

#include <cstring>

using namespace zplan;

Status Executor::execute(uint32_t index) {
  const plan::Instruction &instruction = program.instructions(index);
  switch (instruction.opcode()) {
  case plan::OPCODE_ALL_GATHER:
  case plan::OPCODE_RESIDENT_GATHER:
    return executeAllGather(instruction);
  case plan::OPCODE_CARRY_GATHER:
    return executeCarryGather(instruction);
  case plan::OPCODE_CARRY_WAIT:
  case plan::OPCODE_CARRY_DRAIN:
    return executeCarryCompletion(instruction);
  case plan::OPCODE_RELEASE:
    return executeRelease(instruction);
  case plan::OPCODE_RESIDENT_RELEASE:
    return executeResidentRelease(instruction);
  case plan::OPCODE_REDUCE_SCATTER:
  case plan::OPCODE_ALL_REDUCE:
    return executeGradientReduction(instruction);
  case plan::OPCODE_TIER_FETCH:
  case plan::OPCODE_TIER_STORE:
    return executeTierCopy(instruction);
  case plan::OPCODE_ZERO: {
    uint32_t target = instruction.results(0);
    return queues->zero(plan::COMPUTE, memory.address(target),
                        plan::bufferOf(plan, target).bytes());
  }
  case plan::OPCODE_REDUCE_SCATTER_WAIT:
  case plan::OPCODE_TIER_WAIT:
    // The dependency on the copy or collective (wait_for) is the whole
    // effect.
    return Status::success();
  case plan::OPCODE_GATHER_WAIT:
    // The dependency on the all_gather (wait_for) is the whole effect. A
    // resident copy stays gathered for the programs after this one.
    for (uint32_t id : instruction.operands()) {
      uint32_t root = memory.rootOf(id);
      if (plan::bufferOf(plan, root).kind() == plan::Buffer::RESIDENT)
        memory.residentCopy(root) = {RankMemory::ResidentCopy::State::Gathered,
                                     std::string()};
      else if (options.check && isGatheredCopy[root])
        copyState[root].store(kAvailable, std::memory_order_relaxed);
    }
    return Status::success();
  default:
    break;
  }
  if (options.check)
    if (Status status = checkReads(instruction); !status.ok())
      return status;
  // A kernel on the host reads host memory that copies on a device's
  // queues wrote: the compute queue, which waited for them, must be done.
  if (instruction.on_host())
    if (Status status = queues->synchronizeQueue(plan::COMPUTE); !status.ok())
      return failure(describeInstruction(instruction), ": ", status.message());
  Status status = kernels[index]->run();
  if (!status.ok())
    return failure(describeInstruction(instruction), ": ", status.message());
  return Status::success();
}

/// For the watchdog's line (comm/Watchdog.h): the collective's program,
/// index, opcode, location and group.
std::string Executor::collectiveName(const plan::Instruction &instruction,
                                     uint32_t group) const {
  return "program " + inQuotes(program.name()) + " " +
         describeInstruction(instruction) + " (group " + groupName(group) + ")";
}

/// A tier_fetch reads its operand (a HOST or NVME buffer) into the arena
/// staging buffer it names as result; a tier_store writes the staging
/// buffer (operand) back. A HOST buffer is copied in the comm queue's order
/// (Queues::copyHost: a memcpy on the CPU, an asynchronous copy from pinned
/// memory on a device). An NVME buffer is read or written in place where
/// backend memory is the host's, else through pinned staging, which the
/// comm queue is synchronized on before it is reused.
Status Executor::executeTierCopy(const plan::Instruction &instruction) {
  TierStore *store = memory.tierStore();
  bool fetch = instruction.opcode() == plan::OPCODE_TIER_FETCH;
  uint32_t tiered = fetch ? instruction.operands(0) : instruction.results(0);
  uint32_t staging = fetch ? instruction.results(0) : instruction.operands(0);
  uint64_t bytes = plan::bufferOf(plan, tiered).bytes();
  // A store may fill a view (a host-side step's gradient copy in its slot,
  // TierValidation.h); everything else moves whole buffers.
  uint32_t root = memory.rootOf(tiered);
  if (!store || !store->holds(root))
    return failure(describeInstruction(instruction), ": buffer ",
                   inQuotes(plan::bufferOf(plan, tiered).name()),
                   " is not in this rank's tier store");
  // An nvme moment staged in host memory for the host-side step
  // (TierValidation.h): read or written in place on this thread. Only the
  // host touches those bytes (this thread, and the host update on the
  // compute thread), and the runQueue's waits order the two on the host.
  uint32_t stagingRoot = memory.rootOf(staging);
  if (plan::bufferOf(plan, stagingRoot).kind() == plan::Buffer::HOST_STAGING) {
    uint8_t *host = store->hostAddress(stagingRoot);
    if (!host)
      return failure(describeInstruction(instruction), ": buffer ",
                     inQuotes(plan::bufferOf(plan, staging).name()),
                     " is not in this rank's host tier");
    host += memory.offsetInRoot(staging);
    if (Status status =
            fetch ? store->read(tiered, host) : store->write(tiered, host);
        !status.ok())
      return failure(describeInstruction(instruction), ": ", status.message());
    tierCopiedInRun.fetch_add(bytes, std::memory_order_relaxed);
    return Status::success();
  }
  uint8_t *device = memory.address(staging);
  Status status = Status::success();
  if (uint8_t *host = store->hostAddress(root)) {
    host += memory.offsetInRoot(tiered);
    status = fetch ? queues->copyHost(plan::COMM, device, host, bytes, true)
                   : queues->copyHost(plan::COMM, host, device, bytes, false);
  } else if (backend.hostAddressable()) {
    status = fetch ? store->read(tiered, device) : store->write(tiered, device);
  } else {
    if (!tierScratch || tierScratch->bytes() < bytes)
      status = backend.allocateHost(bytes, "nvme tier copies", tierScratch);
    uint8_t *scratch = status.ok() ? tierScratch->data() : nullptr;
    if (status.ok() && fetch)
      status = store->read(tiered, scratch);
    if (status.ok())
      status =
          fetch ? queues->copyHost(plan::COMM, device, scratch, bytes, true)
                : queues->copyHost(plan::COMM, scratch, device, bytes, false);
    if (status.ok())
      status = queues->synchronizeQueue(plan::COMM);
    if (status.ok() && !fetch)
      status = store->write(tiered, scratch);
  }
  if (!status.ok())
    return failure(describeInstruction(instruction), ": ", status.message());
  tierCopiedInRun.fetch_add(bytes, std::memory_order_relaxed);
  return Status::success();
}

Status Executor::executeAllGather(const plan::Instruction &instruction) {
  uint32_t group = instruction.group();
  const plan::Group &entry = plan.groups(group);
  ElementType type = *elementTypeFromPlan(entry.dtype());
  // Mixed precision: the copy holds bf16; each rank rounds its f32 shard
  // into its own slice of the copy, and the gather moves the bf16 slices.
  ElementType gathered = *elementTypeFromPlan(plan::gatherType(entry));
  bool converts = gathered != type;
  uint64_t countPerRank =
      entry.padded_elements() / static_cast<uint64_t>(plan.world_size());
  uint64_t shardBytes = countPerRank * elementTypeInfo(type).bytes;
  uint64_t sliceBytes = countPerRank * elementTypeInfo(gathered).bytes;
  const uint8_t *shard = memory.address(instruction.operands(0));
  uint8_t *copy = memory.address(instruction.results(0));
  if (options.check) {
    uint64_t sum;
    if (Status status = backend.checksum(shard, shardBytes, sum); !status.ok())
      return status;
    if (sum != shardChecksums[group])
      return failure(describeInstruction(instruction), ": the shard of group ",
                     groupName(group),
                     " changed since the run started (checksum mismatch): an ",
                     "instruction wrote into parameter storage");
  }
  const uint8_t *send = shard;
  if (converts) {
    uint8_t *slice = copy + memory.rank() * sliceBytes;
    ZR_RETURN_IF_ERROR(queues->roundToBf16(
        plan::COMM, reinterpret_cast<uint16_t *>(slice),
        reinterpret_cast<const float *>(shard), countPerRank));
    send = slice;
  }
  Status gatheredStatus = Status::success();
  {
    comm::CollectiveContext named(communicator,
                                  collectiveName(instruction, group));
    gatheredStatus = communicator.allGather(send, copy, countPerRank, gathered);
  }
  if (!gatheredStatus.ok())
    return failure(describeInstruction(instruction), " (group ",
                   groupName(group), "): ", gatheredStatus.message());
  gatheredInRun.fetch_add(sliceBytes * plan.world_size(),
                          std::memory_order_relaxed);
  // This rank's slice is its shard, unless it was rounded on the way.
  if (options.check && !converts) {
    // The shard's checksum was just compared with the load-time one.
    uint64_t sum;
    if (Status status = backend.checksum(copy + memory.rank() * shardBytes,
                                         shardBytes, sum);
        !status.ok())
      return status;
    if (sum != shardChecksums[group])
      return failure(describeInstruction(instruction), ": this rank's ",
                     "slice of the gathered copy of group ", groupName(group),
                     " differs from its shard");
  }
  return Status::success();
}

// The packing and the accumulation are issued on the comm queue, where the
// collective runs: host loops on the CPU, copies and a kernel on the comm
// stream of a device.
Status
Executor::executeGradientReduction(const plan::Instruction &instruction) {
  uint32_t group = instruction.group();
  const plan::Group &entry = plan.groups(group);
  uint64_t padded = entry.padded_elements();
  auto *accumulator =
      reinterpret_cast<float *>(memory.address(instruction.results(1)));
  // Mixed precision: the gradients are rounded to bf16 as they are packed,
  // summed in bf16, and the sum is widened into the f32 accumulator. The
  // bf16 staging takes half the bytes of the f32 one it replaces.
  bool bf16 = plan::reduceType(entry) == plan::BF16;
  ElementType type = bf16 ? ElementType::BF16 : ElementType::F32;
  uint64_t elementBytes = elementTypeInfo(type).bytes;
  uint8_t *staging = memory.address(instruction.results(0));
  // The gradients at their parameters' offsets; alignment gaps and the
  // padding are zero, so they stay zero in every shard.
  ZR_RETURN_IF_ERROR(queues->zero(plan::COMM, staging, padded * elementBytes));
  for (int i = 0; i < instruction.operands_size(); ++i) {
    const plan::Parameter &parameter = plan.parameters(entry.parameters(i));
    uint8_t *target = staging + parameter.offset_elements() * elementBytes;
    const uint8_t *gradient = memory.address(instruction.operands(i));
    ZR_RETURN_IF_ERROR(
        bf16 ? queues->roundToBf16(plan::COMM,
                                   reinterpret_cast<uint16_t *>(target),
                                   reinterpret_cast<const float *>(gradient),
                                   parameter.num_elements())
             : queues->copy(plan::COMM, target, gradient,
                            parameter.num_elements() * sizeof(float)));
  }
  const uint8_t *sum = staging;
  uint64_t count = padded;
  Status status = Status::success();
  {
    comm::CollectiveContext named(communicator,
                                  collectiveName(instruction, group));
    if (instruction.opcode() == plan::OPCODE_ALL_REDUCE) {
      status = communicator.allReduce(staging, padded, type);
    } else {
      count = padded / static_cast<uint64_t>(plan.world_size());
      sum = staging + padded * elementBytes;
      status = communicator.reduceScatter(
          staging, staging + padded * elementBytes, count, type);
    }
  }
  if (!status.ok())
    return failure(describeInstruction(instruction), " (group ",
                   groupName(group), "): ", status.message());
  reducedInRun.fetch_add(plan::reducedBytes(entry), std::memory_order_relaxed);
  if (bf16)
    return queues->accumulateBf16(plan::COMM, accumulator,
                                  reinterpret_cast<const uint16_t *>(sum),
                                  count);
  return queues->accumulate(plan::COMM, accumulator,
                            reinterpret_cast<const float *>(sum), count);
}

Status Executor::executeRelease(const plan::Instruction &instruction) {
  for (uint32_t id : instruction.operands()) {
    uint32_t root = memory.rootOf(id);
    const plan::Buffer &buffer = plan::bufferOf(plan, root);
    // The copy a carry_wait handed over: its bytes are free again, for the
    // arena's other buffers and this program's carry_gather.
    if (buffer.kind() == plan::Buffer::CARRY) {
      std::lock_guard<std::mutex> lock(mutex);
      memory.carriedCopy(root) = {RankMemory::CarriedCopy::State::Empty,
                                  describeHere(instruction), std::nullopt};
    }
    if (!options.check)
      continue;
    // Only the plan's ARENA (and carried) buffers are released; poisoning a
    // shard or a constant would corrupt the next run.
    if (buffer.kind() != plan::Buffer::ARENA &&
        buffer.kind() != plan::Buffer::CARRY)
      continue;
    if (Status status = backend.poison(memory.address(root), buffer.bytes(),
                                       elementTypeOf(root));
        !status.ok())
      return status;
    if (isGatheredCopy[root])
      copyState[root].store(instruction.index(), std::memory_order_relaxed);
  }
  return Status::success();
}

/// The end of a resident copy's life (generate_end): from here on until
/// the next resident_gather, no program may read it; --check poisons it, so
/// that a read the checks miss still shows as NaN.
Status Executor::executeResidentRelease(const plan::Instruction &instruction) {
  for (uint32_t id : instruction.operands()) {
    uint32_t root = memory.rootOf(id);
    const plan::Buffer &buffer = plan::bufferOf(plan, root);
    memory.residentCopy(root) = {RankMemory::ResidentCopy::State::Released,
                                 describeHere(instruction)};
    if (options.check)
      if (Status status = backend.poison(memory.address(root), buffer.bytes(),
                                         elementTypeOf(root));
          !status.ok())
        return status;
  }
  return Status::success();
}
