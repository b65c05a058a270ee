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

#include "runtime/exec/Executor.h"

#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanQueries.h"

#include <algorithm>

using namespace zplan;

std::string Executor::groupName(uint32_t group) const {
  return "@" + plan.groups(group).name();
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
  return *elementTypeFromPlan(plan::bufferOf(plan, id).dtype());
}

Status Executor::prepare() {
  int count = program.instructions_size();
  auto tensorOf = [&](uint32_t id) {
    const plan::Buffer &buffer = plan::bufferOf(plan, id);
    TensorRef tensor;
    tensor.data = memory.address(id);
    tensor.shape.assign(buffer.shape().begin(), buffer.shape().end());
    tensor.dtype = elementTypeOf(id);
    return tensor;
  };
  // The weights this program only reads (the file comment of Executor.h):
  // those of an infer or logprobs program that no instruction writes.
  std::vector<bool> written(plan.buffers_size() + 1, false);
  for (const plan::Instruction &instruction : program.instructions())
    for (uint32_t id : instruction.results())
      written[memory.rootOf(id)] = true;
  bool forward = program.kind() == plan::PROGRAM_KIND_INFER ||
                 program.kind() == plan::PROGRAM_KIND_LOGPROBS;
  mayWriteWeights = !forward;
  for (uint32_t root = 1; root < written.size(); ++root)
    if (written[root] && memory.holdsWeights(root))
      mayWriteWeights = true;
  // A plan made for a memory budget promises its bytes: no kernel keeps
  // a copy beside them.
  bool copiesAllowed = !mayWriteWeights && plan.memory_budget() == 0;
  auto readOnlyWeight = [&](uint32_t id) {
    return copiesAllowed && memory.holdsWeights(id) &&
           !written[memory.rootOf(id)] && memory.address(id) != nullptr;
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
    // An instruction on the host (the host-side optimizer step) reads the
    // tier store's host buffers in place, with the CPU's kernels, on the
    // compute thread (TierValidation.h proved every buffer it names is in
    // the host tier and that the copies around it are waited for).
    bool onHost = instruction.on_host();
    if (onHost && (!options.hostKernels || !memory.tierStore()))
      return failure(describeInstruction(instruction),
                     " runs on the host, but this executor was given no ",
                     options.hostKernels ? "host tier" : "host kernels");
    auto tensorFor = [&](uint32_t id) {
      TensorRef tensor = tensorOf(id);
      if (onHost)
        tensor.data = memory.tierStore()->hostAddress(memory.rootOf(id)) +
                      memory.offsetInRoot(id);
      else if (readOnlyWeight(id))
        tensor.weightsVersion = &memory.weightsVersion();
      return tensor;
    };
    std::vector<TensorRef> operands, results;
    for (uint32_t id : instruction.operands())
      operands.push_back(tensorFor(id));
    for (uint32_t id : instruction.results())
      results.push_back(tensorFor(id));
    Backend &kernelBackend = onHost ? *options.hostKernels : backend;
    if (Status status =
            kernelBackend.prepareKernel(instruction, std::move(operands),
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
  if (mayWriteWeights)
    memory.weightsWritten();
  gatheredInRun.store(0, std::memory_order_relaxed);
  reducedInRun.store(0, std::memory_order_relaxed);
  tierCopiedInRun.store(0, std::memory_order_relaxed);
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
  if (mayWriteWeights) // whatever the run wrote, failed or not
    memory.weightsWritten();
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
