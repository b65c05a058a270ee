//===- Executor.h - run a plan's program on one rank, two queues ----------===//
//
// A program is two instruction lists that run concurrently: the compute
// queue on the calling thread, the comm queue (the all-gathers) on a
// dedicated comm thread, so that a gather the schedule hoisted ahead of its
// use really overlaps the compute before it. Each queue runs its
// instructions in order; an instruction with a wait_for list first waits
// until each named instruction of the other queue has completed in this run
// (completion events: one atomic per instruction, a condition variable to
// sleep on).
//
// The hardware sits behind a Backend (runtime/Backend.h), the one the
// RankMemory was loaded into: create() resolves every compute instruction to
// a prepared kernel of that backend (the kernel and the tensor descriptors
// of its operands and results), so a run looks nothing up; the backend's
// Queues mirror the cross-queue edges on asynchronous hardware; --check's
// poison and checksums run on the backend. Queues, dependencies and the
// checks themselves are the executor's, the same for every backend.
//
// The executor allocates nothing while running: every buffer lives in the
// RankMemory set up at load (a kernel's own copies of weights, below, are
// the backend's).
//
// The implementation is split by concern: Executor.cpp (setup, the two
// queues and their events), Instructions.cpp (what each non-kernel
// instruction does), Carry.cpp (the carried gather across programs),
// ScheduleCheck.cpp (--check's reads and checksums); ProgramSupport.h holds
// the checks made before an executor is created.
//
// The weights an infer or logprobs program only reads -- shards,
// persistent groups and constants that none of its instructions names as a
// result -- reach their kernels with TensorRef::weightsVersion set, unless
// the plan was made for a memory budget (zcc --memory-budget, whose bytes
// no kernel may add to). A kernel may keep a copy derived from such a
// weight (the CPU GEMM packs it once instead of on every call,
// runtime/cpu/StationaryWeights.h) until RankMemory::weightsVersion()
// moves. A run of any other program moves it, before and after: an
// optimizer step, a tier fetch or a resident gather may write weights;
// so does a run of an infer or logprobs program that names a weight among
// its results.
//
// --check mode (ExecutorOptions::check) turns schedule bugs into errors that
// name the instruction and the parameter:
//  1. every gathered copy is filled with NaN right after its release, so a
//     stale read shows as NaN in the output;
//  2. before a compute instruction runs, each operand that is (a view of) a
//     gathered copy must be gathered in this run and not released since;
//     a resident copy (generation) must be gathered by a resident_gather
//     of an earlier program and not released since (RankMemory keeps its
//     state across programs), and is poisoned at its resident_release;
//  3. every shard's checksum is taken when a run starts and compared before
//     each all-gather that sends it, and after the gather this rank's slice
//     of the copy must equal its shard; persistent groups and constants are
//     compared at the end of every run (except the groups the program's own
//     optimizer step updates).
//  4. generation's carried copy (docs/generation.md section 6) is checked
//     like a gathered copy (no read before its carry_wait, poisoned at its
//     release), and its checksum at the carry_wait or carry_drain must be
//     the one its carry_gather left in the previous program, so that a plan
//     that lets another buffer overwrite it between the two is caught.
// Without --check the carry's ledger (RankMemory::CarriedCopy) is still
// kept: a carry_wait with no carried gather before it, a carry_gather over
// a copy still in use, and a program other than decode or generate_end
// starting while a carried gather waits are errors that name them.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_EXEC_EXECUTOR_H
#define ZPLAN_RUNTIME_EXEC_EXECUTOR_H

#include "runtime/Backend.h"
#include "runtime/comm/Communicator.h"
#include "runtime/exec/Memory.h"
#include "runtime/exec/ProgramSupport.h"
#include "runtime/exec/Trace.h"
#include "runtime/plan/plan.pb.h"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace zplan {

struct ExecutorOptions {
  /// Poison released copies, check reads of released copies and shard
  /// checksums (see the file comment).
  bool check = false;
  /// Where to record one event per instruction run; null for none. Must
  /// outlive the executor and have room reserved (TraceRecorder::reserve).
  TraceRecorder *trace = nullptr;
  /// The backend whose kernels run the instructions a plan puts on the host
  /// (Instruction.on_host, the host-side optimizer step): the CPU's. Such
  /// an instruction reads the tier store's host buffers in place. Null
  /// refuses any (a program without them never needs it).
  Backend *hostKernels = nullptr;
};

class Executor {
public:
  /// Prepares to run `program` (which must pass checkProgramSupported()) on
  /// this rank's `memory` and its backend: resolves every compute
  /// instruction's kernel, creates the backend's queues, and starts the
  /// comm thread. `plan`, `program`,
  /// `memory` and `communicator` must outlive the executor.
  static Status create(const plan::Plan &plan, const plan::Program &program,
                       RankMemory &memory, comm::Communicator &communicator,
                       const ExecutorOptions &options,
                       std::unique_ptr<Executor> &out);

  Executor(const Executor &) = delete;
  Executor &operator=(const Executor &) = delete;
  /// Stops and joins the comm thread.
  ~Executor();

  /// Runs the program once: the compute queue on the calling thread, the
  /// comm queue on the comm thread. Returns when both queues are done, or
  /// with the first error of either. After an error the executor runs no
  /// more (the caller aborts every rank: the others may wait in a
  /// collective this rank will never join).
  Status run();

  /// The bytes the collectives of the last run gathered on this rank: the
  /// whole size of every group an all_gather, resident_gather or
  /// carry_gather moved (a carried gather counts to the run that issues it)
  /// (what `zrun --stats` reports per program; 0 for a decode step that
  /// reads only resident copies).
  uint64_t bytesGatheredLastRun() const {
    return gatheredInRun.load(std::memory_order_relaxed);
  }
  /// The bytes of gradients the last run's reduce_scatters and all_reduces
  /// sent into their collectives on this rank: each group's whole padded
  /// size in its reduce dtype (half for a bf16 reduction).
  uint64_t bytesReducedLastRun() const {
    return reducedInRun.load(std::memory_order_relaxed);
  }

  /// The bytes the last run's tier copies (tier_fetch, tier_store) moved
  /// between the HOST or NVME tier and the arena on this rank.
  uint64_t bytesTierCopiedLastRun() const {
    return tierCopiedInRun.load(std::memory_order_relaxed);
  }

private:
  Executor(const plan::Plan &plan, const plan::Program &program,
           RankMemory &memory, comm::Communicator &communicator,
           const ExecutorOptions &options);

  Status prepare();
  void commThreadMain();

  /// Runs the instructions of one queue, in order, for run `epoch`.
  void runQueue(plan::Queue queue, uint32_t epoch);
  Status execute(uint32_t index);
  Status executeAllGather(const plan::Instruction &instruction);
  /// The name of the collective `instruction` issues, for the
  /// communicator's watchdog (comm::CollectiveContext).
  std::string collectiveName(const plan::Instruction &instruction,
                             uint32_t group) const;
  Status executeRelease(const plan::Instruction &instruction);
  /// tier_fetch and tier_store (TierStore.h), on the comm thread.
  Status executeTierCopy(const plan::Instruction &instruction);
  Status executeResidentRelease(const plan::Instruction &instruction);
  /// The carry: carry_gather (a gather that fills the ledger's copy),
  /// carry_wait and carry_drain (bookkeeping on the ledger).
  Status executeCarryGather(const plan::Instruction &instruction);
  Status executeCarryCompletion(const plan::Instruction &instruction);
  /// Fails unless no carried gather waits, or this program completes it.
  Status checkCarryBeforeRun() const;
  /// "program 'decode', instruction #3 'carry_wait' at '@g'".
  std::string describeHere(const plan::Instruction &instruction) const;
  /// reduce_scatter / all_reduce of a group's gradients into its
  /// accumulator (see checkProgramSupported).
  Status executeGradientReduction(const plan::Instruction &instruction);
  /// --check: the checksums of shards, persistent groups and constants now.
  Status checksumOf(const plan::Buffer &buffer, uint64_t &out) const;
  Status takeResidentChecksums();
  /// Where the checksum of `buffer` is kept when it is a shard, a
  /// persistent group or a constant (not a view), with `what` it is; null
  /// for every other buffer.
  uint64_t *checksumSlot(const plan::Buffer &buffer, const char *&what);
  Status checkReads(const plan::Instruction &instruction) const;
  Status checkResidentData();
  /// The element type of buffer `id`'s elements (validated plans have one).
  ElementType elementTypeOf(uint32_t id) const;
  /// Describes what operand `id` of a compute instruction reads inside a
  /// gathered copy: "parameter 'w' (group @group3)" or "group @group3".
  std::string describeCopyRead(uint32_t id) const;
  /// "@group3".
  std::string groupName(uint32_t group) const;

  /// --trace on device-timed queues: every instruction's device times of
  /// run `epoch`, shifted to the trace's clock at `originNs` (beginRun()).
  Status recordDeviceTimes(uint32_t epoch, uint64_t originNs);
  /// Blocks until instruction `index` completed in run `epoch`; false when
  /// the run failed instead.
  bool waitComplete(uint32_t index, uint32_t epoch);
  void markComplete(uint32_t index, uint32_t epoch);
  void fail(Status status);

  const plan::Plan &plan;
  const plan::Program &program;
  RankMemory &memory;
  Backend &backend;
  comm::Communicator &communicator;
  ExecutorOptions options;

  /// Per instruction: its resolved kernel (compute ops; null otherwise).
  std::vector<std::unique_ptr<PreparedKernel>> kernels;
  std::unique_ptr<Queues> queues;
  /// Instruction indices of each queue, in order.
  std::vector<uint32_t> computeQueue;
  std::vector<uint32_t> commQueue;
  /// Whether a thread may sleep waiting for the instruction (it is in
  /// another queue's wait_for, or ends the comm queue): only then does
  /// completing it take the lock to wake sleepers.
  std::vector<bool> awaited;

  // Completion events: completedIn[i] is the last run in which instruction
  // i completed (runs count from 1).
  std::unique_ptr<std::atomic<uint32_t>[]> completedIn;
  std::mutex mutex;
  std::condition_variable wakeUp;
  uint32_t startedRun = 0; // guarded by mutex
  bool stopping = false;   // guarded by mutex
  std::atomic<bool> failed{false};
  Status firstError = Status::success(); // guarded by mutex
  std::thread commThread;
  uint32_t runCount = 0;
  /// Bytes gathered in the current (or last) run; the comm thread adds.
  std::atomic<uint64_t> gatheredInRun{0};
  std::atomic<uint64_t> reducedInRun{0};
  std::atomic<uint64_t> tierCopiedInRun{0};
  /// Pinned host bytes an nvme tier copy passes through where the
  /// backend's memory is not the host's (comm thread only).
  std::unique_ptr<BackendMemory> tierScratch;

  // --check state.
  /// copyState values besides a release's index.
  static constexpr int64_t kNotGathered = -1;
  static constexpr int64_t kAvailable = -2;
  /// Per buffer id: whether it is a gathered copy (an all_gather,
  /// carry_gather or carry_wait result).
  std::vector<bool> isGatheredCopy;
  /// Per buffer id of a gathered copy: kNotGathered, kAvailable, or the
  /// index of the release that ended it.
  std::unique_ptr<std::atomic<int64_t>[]> copyState;
  /// Per group: the checksum of this rank's shard at load.
  std::vector<uint64_t> shardChecksums;
  /// Per group: the checksum of a persistent group at load.
  std::vector<uint64_t> persistentChecksums;
  std::vector<uint64_t> constantChecksums; // per CONSTANT buffer id
  /// Per group: whether this program's optimizer step updates it (its
  /// shard may change during the run).
  std::vector<bool> updatedGroups;
  /// Whether a run may write weights: it moves the weights' version, before
  /// and after (the file comment).
  bool mayWriteWeights = true;
};

} // namespace zplan

#endif // ZPLAN_RUNTIME_EXEC_EXECUTOR_H
