//===- Executor.cpp - run a plan's program on one rank, two queues --------===//
//
// Synchronization, in one place: instruction i of run e is complete when
// completedIn[i] == e (a release store after its effects, an acquire load
// before depending on them). A thread that finds an event incomplete sleeps
// on `wakeUp` under `mutex`; the completing thread takes `mutex` before
// notifying, so a sleeper cannot miss the wake-up between its check and its
// wait. Failures set `failed` and wake everyone, so no thread sleeps on an
// event that will never come.
//
// Memory reuse across queues is safe by the plan's construction: the
// emitter makes every all_gather wait for the compute instruction before it,
// and the arena planner keeps a gathered copy live from its all_gather to
// its release, so the comm thread never writes arena bytes that a compute
// instruction still reads or writes.
//
//===----------------------------------------------------------------------===//

#include "runtime/Executor.h"

#include "runtime/plan/CheckedSizes.h"
#include "runtime/plan/Opcodes.h"

#include <algorithm>
#include <cstring>
#include <sstream>

using namespace zplan;

namespace {

std::string groupName(const plan::Plan &plan, uint32_t group) {
  return "@" + plan.groups(group).name();
}

constexpr int64_t kNotGathered = -1;
constexpr int64_t kAvailable = -2;

} // namespace

std::string zplan::describeInstruction(const plan::Instruction &instruction) {
  std::string text = "instruction #" + std::to_string(instruction.index()) +
                     " " + inQuotes(plan::opcodeName(instruction.opcode()));
  if (!instruction.location().empty())
    text += " at " + inQuotes(instruction.location());
  return text;
}

//===----------------------------------------------------------------------===//
// Checks before any work
//===----------------------------------------------------------------------===//

/// A reduce_scatter / all_reduce of gradients (PlanEmitter.cpp): one f32
/// operand per parameter of its group, of that parameter's size; results:
/// an arena staging buffer of the whole group (plus one shard to receive
/// into, for a reduce-scatter) and the group's f32 gradient accumulator.
static Status checkGradientReduction(const plan::Plan &plan,
                                     const plan::Instruction &instruction,
                                     const std::string &subject) {
  const plan::Group &group = plan.groups(instruction.group());
  bool scatter = instruction.opcode() == plan::OPCODE_REDUCE_SCATTER;
  if (scatter == group.persistent())
    return failure(subject, ": group ", groupName(plan, instruction.group()),
                   scatter ? " is persistent: its gradients are all-reduced"
                           : " is sharded: its gradients are reduce-scattered");
  if (group.dtype() != plan::F32)
    return failure(subject, ": gradients of group ",
                   groupName(plan, instruction.group()),
                   " are not f32; this zrun reduces f32 gradients only");
  if (instruction.operands_size() != group.parameters_size() ||
      instruction.results_size() != 2)
    return failure(subject, " has ", instruction.operands_size(),
                   " operands and ", instruction.results_size(),
                   " results; it needs one gradient per parameter of group ",
                   groupName(plan, instruction.group()), " (",
                   group.parameters_size(), ") and 2 results");
  for (int i = 0; i < instruction.operands_size(); ++i) {
    const plan::Buffer &gradient = plan.buffers(instruction.operands(i) - 1);
    const plan::Parameter &parameter = plan.parameters(group.parameters(i));
    if (gradient.dtype() != plan::F32 ||
        gradient.bytes() != parameter.num_elements() * 4)
      return failure(subject, ": operand ", i, " ", inQuotes(gradient.name()),
                     " is not an f32 gradient of parameter ",
                     inQuotes(parameter.name()));
  }
  uint64_t padded = group.padded_elements();
  uint64_t shard = padded / plan.world_size();
  const plan::Buffer &staging = plan.buffers(instruction.results(0) - 1);
  const plan::Buffer &accumulator = plan.buffers(instruction.results(1) - 1);
  if (staging.kind() != plan::Buffer::ARENA || staging.view_of() != 0 ||
      staging.bytes() < (padded + (scatter ? shard : 0)) * 4)
    return failure(subject, ": its staging buffer ", inQuotes(staging.name()),
                   " is not an arena buffer large enough for group ",
                   groupName(plan, instruction.group()));
  if (accumulator.kind() != plan::Buffer::STATE ||
      accumulator.group() != instruction.group() ||
      accumulator.bytes() < (scatter ? shard : padded) * 4)
    return failure(subject, ": its result ", inQuotes(accumulator.name()),
                   " is not the gradient accumulator of group ",
                   groupName(plan, instruction.group()));
  return Status::success();
}

Status zplan::checkProgramSupported(const plan::Plan &plan,
                                    const plan::Program &program,
                                    const Backend &backend) {
  auto bufferOf = [&](uint32_t id) -> const plan::Buffer & {
    return plan.buffers(id - 1);
  };
  for (const plan::Instruction &instruction : program.instructions()) {
    std::string subject = "program " + inQuotes(program.name()) + ", " +
                          describeInstruction(instruction);
    plan::Opcode opcode = instruction.opcode();
    // validatePlan() checked what the carry's bookkeeping names.
    if (opcode == plan::OPCODE_RELEASE || opcode == plan::OPCODE_GATHER_WAIT ||
        opcode == plan::OPCODE_REDUCE_SCATTER_WAIT ||
        opcode == plan::OPCODE_CARRY_WAIT || opcode == plan::OPCODE_CARRY_DRAIN)
      continue;
    if (opcode == plan::OPCODE_RESIDENT_RELEASE) {
      for (uint32_t id : instruction.operands()) {
        const plan::Buffer &copy = bufferOf(id);
        if (copy.kind() != plan::Buffer::RESIDENT || copy.view_of() != 0 ||
            copy.group() != instruction.group())
          return failure(subject, " releases buffer ", copy.id(), " ",
                         inQuotes(copy.name()), ", which is not the resident ",
                         "copy of its group ",
                         groupName(plan, instruction.group()));
      }
      continue;
    }
    if (opcode == plan::OPCODE_REDUCE_SCATTER ||
        opcode == plan::OPCODE_ALL_REDUCE) {
      if (Status status = checkGradientReduction(plan, instruction, subject);
          !status.ok())
        return status;
      continue;
    }
    if (instruction.queue() == plan::COMPUTE) {
      if (!backend.hasKernel(opcode))
        return failure(subject, ": the ", backend.name(),
                       " backend has no kernel for ",
                       inQuotes(plan::opcodeName(opcode)));
      continue;
    }
    bool resident = opcode == plan::OPCODE_RESIDENT_GATHER;
    bool carry = opcode == plan::OPCODE_CARRY_GATHER;
    if (opcode != plan::OPCODE_ALL_GATHER && !resident && !carry)
      return failure(subject, ": this zrun runs only all_gather, "
                              "resident_gather and carry_gather on the comm "
                              "queue");
    if (instruction.operands_size() != 1 || instruction.results_size() != 1)
      return failure(subject, " has ", instruction.operands_size(),
                     " operands and ", instruction.results_size(),
                     " results; an ", plan::opcodeName(opcode),
                     " has one of each");
    const plan::Group &group = plan.groups(instruction.group());
    const plan::Buffer &shard = bufferOf(instruction.operands(0));
    const plan::Buffer &copy = bufferOf(instruction.results(0));
    if (shard.kind() != plan::Buffer::SHARD || shard.view_of() != 0 ||
        shard.group() != instruction.group())
      return failure(subject, " gathers buffer ", shard.id(), " ",
                     inQuotes(shard.name()), ", which is not the shard of ",
                     "its group ", groupName(plan, instruction.group()));
    // An all_gather fills a transient copy in the arena; a resident_gather
    // the group's RESIDENT copy, which outlives the program; a carry_gather
    // the group's CARRY copy, which the next program reads.
    plan::Buffer::Kind kind = resident ? plan::Buffer::RESIDENT
                              : carry  ? plan::Buffer::CARRY
                                       : plan::Buffer::ARENA;
    if (copy.kind() != kind || copy.view_of() != 0 ||
        copy.bytes() < plan::groupBytes(group) ||
        ((resident || carry) && copy.group() != instruction.group()))
      return failure(subject, " gathers into buffer ", copy.id(), " ",
                     inQuotes(copy.name()), " (", copy.bytes(),
                     " bytes), which is not ",
                     resident ? "the resident copy"
                     : carry  ? "the carried copy"
                              : "an arena buffer",
                     " of at least the ", plan::groupBytes(group),
                     " bytes of group ", groupName(plan, instruction.group()));
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Setup
//===----------------------------------------------------------------------===//

Executor::Executor(const plan::Plan &plan, const plan::Program &program,
                   RankMemory &memory, comm::Communicator &communicator,
                   const ExecutorOptions &options)
    : plan(plan), program(program), memory(memory), backend(memory.backend()),
      communicator(communicator), options(options) {}

Status Executor::create(const plan::Plan &plan, const plan::Program &program,
                        RankMemory &memory, comm::Communicator &communicator,
                        const ExecutorOptions &options,
                        std::unique_ptr<Executor> &out) {
  std::unique_ptr<Executor> executor(
      new Executor(plan, program, memory, communicator, options));
  if (Status status = executor->prepare(); !status.ok())
    return status;
  executor->commThread =
      std::thread([raw = executor.get()] { raw->commThreadMain(); });
  out = std::move(executor);
  return Status::success();
}

ElementType Executor::elementTypeOf(uint32_t id) const {
  // validatePlan() refused every buffer whose dtype has no size, so every
  // dtype left has a row.
  return *elementTypeFromPlan(plan.buffers(id - 1).dtype());
}

Status Executor::prepare() {
  int count = program.instructions_size();
  auto tensorOf = [&](uint32_t id) {
    const plan::Buffer &buffer = plan.buffers(id - 1);
    TensorRef tensor;
    tensor.data = memory.address(id);
    tensor.shape.assign(buffer.shape().begin(), buffer.shape().end());
    tensor.dtype = elementTypeOf(id);
    return tensor;
  };
  kernels.resize(count);
  awaited.assign(count, false);
  completedIn.reset(new std::atomic<uint32_t>[count]);
  for (int index = 0; index < count; ++index) {
    completedIn[index].store(0, std::memory_order_relaxed);
    const plan::Instruction &instruction = program.instructions(index);
    (instruction.queue() == plan::COMM ? commQueue : computeQueue)
        .push_back(index);
    for (uint32_t waited : instruction.wait_for())
      if (program.instructions(waited).queue() != instruction.queue())
        awaited[waited] = true;
    const plan::OpcodeInfo *opcode = plan::findOpcode(instruction.opcode());
    if (!opcode || opcode->kind != plan::OpcodeKind::Kernel)
      continue;
    std::vector<TensorRef> operands, results;
    for (uint32_t id : instruction.operands())
      operands.push_back(tensorOf(id));
    for (uint32_t id : instruction.results())
      results.push_back(tensorOf(id));
    if (Status status =
            backend.prepareKernel(instruction, std::move(operands),
                                  std::move(results), kernels[index]);
        !status.ok())
      return failure(describeInstruction(instruction), ": ", status.message());
  }
  if (!commQueue.empty())
    awaited[commQueue.back()] = true;
  if (Status status =
          backend.createQueues(count, options.trace != nullptr, queues);
      !status.ok())
    return status;

  int buffers = plan.buffers_size();
  isGatheredCopy.assign(buffers + 1, false);
  copyState.reset(new std::atomic<int64_t>[buffers + 1]);
  for (int id = 0; id <= buffers; ++id)
    copyState[id].store(kNotGathered, std::memory_order_relaxed);
  for (const plan::Instruction &instruction : program.instructions())
    if (instruction.opcode() == plan::OPCODE_ALL_GATHER ||
        instruction.opcode() == plan::OPCODE_CARRY_GATHER ||
        instruction.opcode() == plan::OPCODE_CARRY_WAIT)
      isGatheredCopy[instruction.results(0)] = true;

  updatedGroups.assign(plan.groups_size(), false);
  for (const plan::Instruction &instruction : program.instructions())
    if (instruction.opcode() == plan::OPCODE_ADAMW ||
        instruction.opcode() == plan::OPCODE_SGD)
      updatedGroups[instruction.group()] = true;
  return Status::success();
}

Status Executor::takeResidentChecksums() {
  shardChecksums.assign(plan.groups_size(), 0);
  persistentChecksums.assign(plan.groups_size(), 0);
  constantChecksums.assign(plan.buffers_size() + 1, 0);
  for (const plan::Buffer &buffer : plan.buffers()) {
    if (buffer.view_of() != 0)
      continue;
    if (buffer.kind() != plan::Buffer::SHARD &&
        buffer.kind() != plan::Buffer::PERSISTENT &&
        buffer.kind() != plan::Buffer::CONSTANT)
      continue;
    uint64_t sum;
    if (Status status =
            backend.checksum(memory.address(buffer.id()), buffer.bytes(), sum);
        !status.ok())
      return status;
    if (buffer.kind() == plan::Buffer::SHARD)
      shardChecksums[buffer.group()] = sum;
    else if (buffer.kind() == plan::Buffer::PERSISTENT)
      persistentChecksums[buffer.group()] = sum;
    else
      constantChecksums[buffer.id()] = sum;
  }
  return Status::success();
}

Executor::~Executor() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  wakeUp.notify_all();
  if (commThread.joinable())
    commThread.join();
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

Status Executor::run() {
  if (failed.load(std::memory_order_acquire))
    return Status::error("the executor failed in an earlier run");
  if (Status status = checkCarryBeforeRun(); !status.ok())
    return status;
  uint32_t epoch = ++runCount;
  gatheredInRun.store(0, std::memory_order_relaxed);
  if (options.check) {
    for (int id = 0; id <= plan.buffers_size(); ++id)
      copyState[id].store(kNotGathered, std::memory_order_relaxed);
    // Another program (an optimizer step) may have updated the shards
    // since the last run: what this run must not change is what it starts
    // from.
    if (Status status = takeResidentChecksums(); !status.ok())
      return status;
  }
  bool deviceTimes = options.trace && queues->timesOnDevice();
  uint64_t deviceOrigin = 0;
  if (deviceTimes) {
    ZR_RETURN_IF_ERROR(queues->beginRun());
    deviceOrigin = options.trace->now();
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    startedRun = epoch;
  }
  wakeUp.notify_all();

  runQueue(plan::COMPUTE, epoch);
  // The run ends when the comm queue has drained too: the caller may then
  // use the communicator from this thread.
  if (!commQueue.empty())
    waitComplete(commQueue.back(), epoch);
  if (!failed.load(std::memory_order_acquire))
    if (Status status = queues->synchronize(); !status.ok())
      fail(status);
  if (!failed.load(std::memory_order_acquire) && deviceTimes)
    if (Status status = recordDeviceTimes(epoch, deviceOrigin); !status.ok())
      fail(status);
  if (!failed.load(std::memory_order_acquire) && options.check)
    if (Status status = checkResidentData(); !status.ok())
      fail(status);
  if (failed.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(mutex);
    return firstError;
  }
  return Status::success();
}

void Executor::commThreadMain() {
  // A device backend makes its device current on this thread; a failure
  // fails every run instead of ending the thread (run() waits for it).
  Status bound = backend.bindThread();
  uint32_t handled = 0;
  while (true) {
    uint32_t epoch;
    {
      std::unique_lock<std::mutex> lock(mutex);
      wakeUp.wait(lock, [&] { return stopping || startedRun != handled; });
      if (stopping)
        return;
      epoch = startedRun;
    }
    if (bound.ok())
      runQueue(plan::COMM, epoch);
    else
      fail(bound);
    handled = epoch;
  }
}

void Executor::runQueue(plan::Queue queue, uint32_t epoch) {
  for (uint32_t index : queue == plan::COMM ? commQueue : computeQueue) {
    const plan::Instruction &instruction = program.instructions(index);
    // A compute instruction's event includes the time it is blocked on the
    // comm queue (a `wait` lasts as long as the exposed part of its
    // gather); a collective's starts when it can start, so that its length
    // is the collective's.
    // Device-timed queues are traced from their events after the run
    // (recordDeviceTimes); here the host only says when it issued.
    bool traceHost = options.trace && !queues->timesOnDevice();
    bool traceBlocking = queue == plan::COMPUTE && traceHost;
    uint64_t start = traceBlocking ? options.trace->now() : 0;
    // The host-side event says the instruction waited for was issued (and,
    // on the CPU, done); the backend's queue then waits for its completion
    // on the device, where that differs.
    for (uint32_t waited : instruction.wait_for()) {
      if (!waitComplete(waited, epoch))
        return;
      if (Status status = queues->waitFor(queue, waited); !status.ok()) {
        fail(status);
        return;
      }
    }
    if (failed.load(std::memory_order_acquire))
      return;
    if (traceHost && !traceBlocking)
      start = options.trace->now();
    if (options.trace && !traceHost)
      if (Status status = queues->recordStart(queue, index); !status.ok()) {
        fail(status);
        return;
      }
    if (Status status = execute(index); !status.ok()) {
      fail(status);
      return;
    }
    if (Status status = queues->recordCompletion(queue, index); !status.ok()) {
      fail(status);
      return;
    }
    if (traceHost)
      options.trace->record(queue, index, epoch, start, options.trace->now());
    markComplete(index, epoch);
  }
}

Status Executor::recordDeviceTimes(uint32_t epoch, uint64_t originNs) {
  for (plan::Queue queue : {plan::COMPUTE, plan::COMM})
    for (uint32_t index : queue == plan::COMM ? commQueue : computeQueue) {
      uint64_t startNs, endNs;
      ZR_RETURN_IF_ERROR(queues->timesOf(index, startNs, endNs));
      options.trace->record(queue, index, epoch, originNs + startNs,
                            originNs + endNs);
    }
  return Status::success();
}

bool Executor::waitComplete(uint32_t index, uint32_t epoch) {
  if (completedIn[index].load(std::memory_order_acquire) == epoch)
    return true;
  std::unique_lock<std::mutex> lock(mutex);
  wakeUp.wait(lock, [&] {
    return completedIn[index].load(std::memory_order_acquire) == epoch ||
           failed.load(std::memory_order_acquire);
  });
  return completedIn[index].load(std::memory_order_acquire) == epoch;
}

void Executor::markComplete(uint32_t index, uint32_t epoch) {
  completedIn[index].store(epoch, std::memory_order_release);
  if (awaited[index]) {
    {
      std::lock_guard<std::mutex> lock(mutex);
    }
    wakeUp.notify_all();
  }
}

void Executor::fail(Status status) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!failed.load(std::memory_order_relaxed))
      firstError = std::move(status);
    failed.store(true, std::memory_order_release);
  }
  wakeUp.notify_all();
}

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
  case plan::OPCODE_REDUCE_SCATTER_WAIT:
    // The dependency on the collective (wait_for) is the whole effect.
    return Status::success();
  case plan::OPCODE_GATHER_WAIT:
    // The dependency on the all_gather (wait_for) is the whole effect. A
    // resident copy stays gathered for the programs after this one.
    for (uint32_t id : instruction.operands()) {
      uint32_t root = memory.rootOf(id);
      if (plan.buffers(root - 1).kind() == plan::Buffer::RESIDENT)
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
  Status status = kernels[index]->run();
  if (!status.ok())
    return failure(describeInstruction(instruction), ": ", status.message());
  return Status::success();
}

Status Executor::executeAllGather(const plan::Instruction &instruction) {
  uint32_t group = instruction.group();
  const plan::Group &entry = plan.groups(group);
  ElementType type = *elementTypeFromPlan(entry.dtype());
  uint64_t countPerRank =
      entry.padded_elements() / static_cast<uint64_t>(plan.world_size());
  uint64_t shardBytes = countPerRank * elementTypeInfo(type).bytes;
  const uint8_t *shard = memory.address(instruction.operands(0));
  uint8_t *copy = memory.address(instruction.results(0));
  if (options.check) {
    uint64_t sum;
    if (Status status = backend.checksum(shard, shardBytes, sum); !status.ok())
      return status;
    if (sum != shardChecksums[group])
      return failure(describeInstruction(instruction), ": the shard of group ",
                     groupName(plan, group),
                     " changed since the run started (checksum mismatch): an ",
                     "instruction wrote into parameter storage");
  }
  if (Status status = communicator.allGather(shard, copy, countPerRank, type);
      !status.ok())
    return failure(describeInstruction(instruction), " (group ",
                   groupName(plan, group), "): ", status.message());
  gatheredInRun.fetch_add(shardBytes * plan.world_size(),
                          std::memory_order_relaxed);
  if (options.check) {
    // The shard's checksum was just compared with the load-time one.
    uint64_t sum;
    if (Status status = backend.checksum(copy + memory.rank() * shardBytes,
                                         shardBytes, sum);
        !status.ok())
      return status;
    if (sum != shardChecksums[group])
      return failure(describeInstruction(instruction), ": this rank's ",
                     "slice of the gathered copy of group ",
                     groupName(plan, group), " differs from its shard");
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
  auto *staging =
      reinterpret_cast<float *>(memory.address(instruction.results(0)));
  auto *accumulator =
      reinterpret_cast<float *>(memory.address(instruction.results(1)));
  // The gradients at their parameters' offsets; alignment gaps and the
  // padding are zero, so they stay zero in every shard.
  ZR_RETURN_IF_ERROR(queues->zero(plan::COMM, staging, padded * sizeof(float)));
  for (int i = 0; i < instruction.operands_size(); ++i) {
    const plan::Parameter &parameter = plan.parameters(entry.parameters(i));
    ZR_RETURN_IF_ERROR(queues->copy(plan::COMM,
                                    staging + parameter.offset_elements(),
                                    memory.address(instruction.operands(i)),
                                    parameter.num_elements() * sizeof(float)));
  }
  const float *sum = staging;
  uint64_t count = padded;
  Status status = Status::success();
  if (instruction.opcode() == plan::OPCODE_ALL_REDUCE) {
    status = communicator.allReduce(staging, padded, ElementType::F32);
  } else {
    count = padded / static_cast<uint64_t>(plan.world_size());
    sum = staging + padded;
    status = communicator.reduceScatter(staging, staging + padded, count,
                                        ElementType::F32);
  }
  if (!status.ok())
    return failure(describeInstruction(instruction), " (group ",
                   groupName(plan, group), "): ", status.message());
  return queues->accumulate(plan::COMM, accumulator, sum, count);
}

Status Executor::executeRelease(const plan::Instruction &instruction) {
  for (uint32_t id : instruction.operands()) {
    uint32_t root = memory.rootOf(id);
    const plan::Buffer &buffer = plan.buffers(root - 1);
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
    const plan::Buffer &buffer = plan.buffers(root - 1);
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

//===----------------------------------------------------------------------===//
// The carry (docs/generation.md section 6)
//===----------------------------------------------------------------------===//
//
// The ledger entries live in RankMemory, shared by the executors of every
// program; the programs run one at a time, and inside one run the compute
// thread (carry_wait, release) and the comm thread (carry_gather) change an
// entry under `mutex`. The plan orders them besides: a carry_gather waits
// for the compute instruction before it, which follows the release.

std::string Executor::describeHere(const plan::Instruction &instruction) const {
  return "program " + inQuotes(program.name()) + ", " +
         describeInstruction(instruction);
}

Status Executor::checkCarryBeforeRun() const {
  uint32_t ready = memory.readyCarriedCopy();
  if (ready == 0 || program.name() == plan::kDecodeProgram ||
      program.name() == plan::kGenerateEndProgram)
    return Status::success();
  const plan::Buffer &copy = plan.buffers(ready - 1);
  return failure("program ", inQuotes(program.name()),
                 " starts while the carried gather of group ",
                 groupName(plan, copy.group()), " (",
                 memory.carriedCopy(ready).changedBy,
                 ") is not completed; only ", inQuotes(plan::kDecodeProgram),
                 " or ", inQuotes(plan::kGenerateEndProgram), " may run next");
}

Status Executor::executeCarryGather(const plan::Instruction &instruction) {
  uint32_t root = instruction.results(0);
  {
    std::lock_guard<std::mutex> lock(mutex);
    const RankMemory::CarriedCopy &entry = memory.carriedCopy(root);
    if (entry.state != RankMemory::CarriedCopy::State::Empty)
      return failure(describeInstruction(instruction),
                     ": the carried copy of group ",
                     groupName(plan, instruction.group()), " is still ",
                     entry.state == RankMemory::CarriedCopy::State::Held
                         ? "in use (handed over by "
                         : "waiting to be completed (gathered by ",
                     entry.changedBy, "); a carry_gather may not overwrite it");
  }
  if (Status status = executeAllGather(instruction); !status.ok())
    return status;
  std::optional<uint64_t> sum;
  if (options.check) {
    uint64_t value;
    if (Status status = backend.checksum(memory.address(root),
                                         plan.buffers(root - 1).bytes(), value);
        !status.ok())
      return status;
    sum = value;
  }
  std::lock_guard<std::mutex> lock(mutex);
  memory.carriedCopy(root) = {RankMemory::CarriedCopy::State::Ready,
                              describeHere(instruction), sum};
  return Status::success();
}

/// carry_wait (decode) hands the carried copy to the program; carry_drain
/// (generate_end) drops it. Both need a gather the previous program
/// carried, and --check needs its bytes unchanged since.
Status Executor::executeCarryCompletion(const plan::Instruction &instruction) {
  bool wait = instruction.opcode() == plan::OPCODE_CARRY_WAIT;
  uint32_t root = wait ? instruction.results(0) : instruction.operands(0);
  const plan::Buffer &copy = plan.buffers(root - 1);
  RankMemory::CarriedCopy entry;
  {
    std::lock_guard<std::mutex> lock(mutex);
    entry = memory.carriedCopy(root);
  }
  if (entry.state != RankMemory::CarriedCopy::State::Ready)
    return failure(
        describeInstruction(instruction), ": no carried gather of group ",
        groupName(plan, instruction.group()),
        " (the previous program was not prefill or decode",
        entry.changedBy.empty() ? "" : "; last: ", entry.changedBy, ")");
  if (entry.checksum) {
    uint64_t sum;
    if (Status status =
            backend.checksum(memory.address(root), copy.bytes(), sum);
        !status.ok())
      return status;
    if (sum != *entry.checksum)
      return failure(describeInstruction(instruction), ": the carried copy ",
                     "of group ", groupName(plan, instruction.group()),
                     " changed since its carry_gather (", entry.changedBy,
                     ") (checksum mismatch): another buffer overwrote its ",
                     "arena bytes between the two programs");
  }
  {
    std::lock_guard<std::mutex> lock(mutex);
    memory.carriedCopy(root) = {wait ? RankMemory::CarriedCopy::State::Held
                                     : RankMemory::CarriedCopy::State::Empty,
                                describeHere(instruction), std::nullopt};
  }
  if (!options.check)
    return Status::success();
  if (wait) {
    copyState[root].store(kAvailable, std::memory_order_relaxed);
    return Status::success();
  }
  return backend.poison(memory.address(root), copy.bytes(),
                        elementTypeOf(root));
}

//===----------------------------------------------------------------------===//
// --check
//===----------------------------------------------------------------------===//

std::string Executor::describeCopyRead(uint32_t id) const {
  uint32_t root = memory.rootOf(id);
  const plan::Buffer &copy = plan.buffers(root - 1);
  uint32_t groupIndex = copy.group();
  std::string group = "group " + groupName(plan, groupIndex);
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
    if (plan.buffers(root - 1).kind() == plan::Buffer::RESIDENT) {
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
                     plan.buffers(root - 1).kind() == plan::Buffer::CARRY
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
    if (buffer.view_of() != 0)
      continue;
    const std::vector<uint64_t> *expected = nullptr;
    uint64_t key = 0;
    const char *what = nullptr;
    if ((buffer.kind() == plan::Buffer::SHARD ||
         buffer.kind() == plan::Buffer::PERSISTENT) &&
        updatedGroups[buffer.group()])
      continue; // This program's optimizer step updates it.
    if (buffer.kind() == plan::Buffer::SHARD) {
      expected = &shardChecksums, key = buffer.group(), what = "shard";
    } else if (buffer.kind() == plan::Buffer::PERSISTENT) {
      expected = &persistentChecksums, key = buffer.group(),
      what = "persistent group";
    } else if (buffer.kind() == plan::Buffer::CONSTANT) {
      expected = &constantChecksums, key = buffer.id(), what = "constant";
    } else {
      continue;
    }
    uint64_t sum;
    if (Status status =
            backend.checksum(memory.address(buffer.id()), buffer.bytes(), sum);
        !status.ok())
      return status;
    if (sum != (*expected)[key])
      return failure("after the run of program ", inQuotes(program.name()),
                     ": ", what, " buffer ", buffer.id(), " ",
                     inQuotes(buffer.name()),
                     " changed during the run (checksum mismatch): an ",
                     "instruction wrote into read-only storage");
  }
  return Status::success();
}
