//===- Carry.cpp - the executor's side of the cross-step carry ------------===//
//
// docs/generation.md section 6: a carried gather is issued at the end of
// prefill or decode and completed by the next decode (carry_wait) or dropped
// by generate_end (carry_drain).
//
// The ledger entries live in RankMemory, shared by the executors of every
// program; the programs run one at a time, and inside one run the compute
// thread (carry_wait, release) and the comm thread (carry_gather) change an
// entry under `mutex`. The plan orders them besides: a carry_gather waits
// for the compute instruction before it, which follows the release.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Executor.h"

#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/plan/ProgramContracts.h"

using namespace zplan;

std::string Executor::describeHere(const plan::Instruction &instruction) const {
  return "program " + inQuotes(program.name()) + ", " +
         describeInstruction(instruction);
}

Status Executor::checkCarryBeforeRun() const {
  uint32_t ready = memory.readyCarriedCopy();
  if (ready == 0 || program.kind() == plan::PROGRAM_KIND_DECODE ||
      program.kind() == plan::PROGRAM_KIND_GENERATE_END)
    return Status::success();
  const plan::Buffer &copy = plan::bufferOf(plan, ready);
  return failure(
      "program ", inQuotes(program.name()),
      " starts while the carried gather of group ", groupName(copy.group()),
      " (", memory.carriedCopy(ready).changedBy, ") is not completed; only ",
      inQuotes(plan::programKindName(plan::PROGRAM_KIND_DECODE)), " or ",
      inQuotes(plan::programKindName(plan::PROGRAM_KIND_GENERATE_END)),
      " may run next");
}

Status Executor::executeCarryGather(const plan::Instruction &instruction) {
  uint32_t root = instruction.results(0);
  {
    std::lock_guard<std::mutex> lock(mutex);
    const RankMemory::CarriedCopy &entry = memory.carriedCopy(root);
    if (entry.state != RankMemory::CarriedCopy::State::Empty)
      return failure(describeInstruction(instruction),
                     ": the carried copy of group ",
                     groupName(instruction.group()), " is still ",
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
    if (Status status = backend.checksum(
            memory.address(root), plan::bufferOf(plan, root).bytes(), value);
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
  const plan::Buffer &copy = plan::bufferOf(plan, root);
  RankMemory::CarriedCopy entry;
  {
    std::lock_guard<std::mutex> lock(mutex);
    entry = memory.carriedCopy(root);
  }
  if (entry.state != RankMemory::CarriedCopy::State::Ready)
    return failure(
        describeInstruction(instruction), ": no carried gather of group ",
        groupName(instruction.group()),
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
                     "of group ", groupName(instruction.group()),
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
