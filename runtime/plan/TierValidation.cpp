//===- TierValidation.cpp - offload: no read outside the device tier ------===//

#include "runtime/plan/TierValidation.h"

#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanQueries.h"

#include <map>
#include <set>
#include <string>
#include <vector>

using namespace zplan;
using namespace zplan::plan;

namespace {

const char *tierName(Buffer::Tier tier) {
  switch (tier) {
  case Buffer::HOST:
    return "host";
  case Buffer::NVME:
    return "nvme";
  default:
    return "device";
  }
}

class TierChecker {
public:
  TierChecker(const Plan &plan, const Program &program)
      : plan(plan), program(program) {}

  Status check() {
    // staging buffer -> the copy (index) that has it until its tier_wait.
    std::map<uint32_t, int> inFlight;
    // copy index -> its tier_waits.
    std::map<int, int> waits;
    int lastCompute = -1;
    // fetch index -> the comm instructions that read its staging buffer;
    // the instructions some compute instruction so far waits for.
    std::map<int, std::vector<int>> readers;
    std::set<int> waitedFor;
    // tiered buffer -> the copy that has it until its tier_wait.
    std::map<uint32_t, int> tieredInFlight;
    for (int index = 0; index < program.instructions_size(); ++index) {
      const Instruction &instruction = program.instructions(index);
      Opcode opcode = instruction.opcode();
      bool copy = opcode == OPCODE_TIER_FETCH || opcode == OPCODE_TIER_STORE;
      if (copy) {
        ZR_RETURN_IF_ERROR(checkCopy(index, lastCompute));
        uint32_t staging = stagingOf(instruction);
        // Tracked by the buffer that owns the bytes (a host-side step's
        // gradient copy is a view of a slot that copies take in turn).
        uint32_t tiered = rootBufferOf(plan, tieredOf(instruction)).id();
        for (auto [id, flights] : {std::pair{staging, &inFlight},
                                   std::pair{tiered, &tieredInFlight}})
          if (flights->count(id))
            return failure(describeInstruction(program, index), " copies ",
                           describeBuffer(bufferOf(plan, id)),
                           ", which instruction #", (*flights)[id],
                           " still copies (no tier_wait between them)");
        ZR_RETURN_IF_ERROR(checkOverlap(index, staging, inFlight));
        inFlight[staging] = index;
        tieredInFlight[tiered] = index;
        waits[index] = 0;
        continue;
      }
      if (opcode == OPCODE_TIER_WAIT) {
        ZR_RETURN_IF_ERROR(checkWait(index, inFlight, waits));
        int copy = static_cast<int>(instruction.wait_for(0));
        tieredInFlight.erase(
            rootBufferOf(plan, tieredOf(program.instructions(copy))).id());
        // A carry_gather is waited for by the end of its run (the comm
        // queue drains; nothing in the program waits for it): its staging
        // buffer's tier_wait must end the program, so that no instruction
        // after it can take the bytes the collective reads.
        bool endsProgram = index == program.instructions_size() - 1;
        for (int reader : readers[copy]) {
          bool carried =
              program.instructions(reader).opcode() == OPCODE_CARRY_GATHER;
          if (carried ? endsProgram : waitedFor.count(reader))
            continue;
          return failure(
              describeInstruction(program, index),
              " ends the staging buffer of instruction #", copy, " ",
              inQuotes(opcodeName(program.instructions(copy).opcode())),
              " before instruction #", reader, " ",
              inQuotes(opcodeName(program.instructions(reader).opcode())),
              ", which reads it, is waited for",
              carried ? " (a carried gather: by the program's end, so this "
                        "tier_wait must be its last instruction)"
                      : "",
              ": the arena may reuse its bytes while the collective still "
              "reads them");
        }
      } else if (instruction.on_host()) {
        ZR_RETURN_IF_ERROR(
            checkHostInstruction(index, tieredInFlight, inFlight));
      } else {
        if (opcode == OPCODE_ZERO)
          ZR_RETURN_IF_ERROR(checkZero(index));
        for (const auto *ids :
             {&instruction.operands(), &instruction.results()})
          for (uint32_t id : *ids) {
            const Buffer &root = rootBufferOf(plan, id);
            if (root.tier() != Buffer::DEVICE)
              return failure(
                  describeInstruction(program, index), " names ",
                  describeBuffer(bufferOf(plan, id)), ", which lives in the ",
                  tierName(root.tier()),
                  " tier: only tier_fetch, tier_store and an update that "
                  "runs on the host may name it (no device kernel or "
                  "collective can read memory outside the device)");
            auto found = inFlight.find(root.id());
            if (found == inFlight.end())
              continue;
            // A collective after a tier_fetch on the comm queue, which runs
            // in order, may read what it fetched (an offloaded shard's
            // gather); its tier_wait must then come after the wait for
            // that collective, which reads the staging buffer until then.
            bool operand = ids == &instruction.operands();
            if (instruction.queue() == COMM && operand &&
                program.instructions(found->second).opcode() ==
                    OPCODE_TIER_FETCH &&
                !isResultOf(instruction, root.id())) {
              readers[found->second].push_back(index);
              continue;
            }
            return failure(describeInstruction(program, index), " names ",
                           describeBuffer(bufferOf(plan, id)),
                           " while instruction #", found->second,
                           " still copies it (before its tier_wait)");
          }
      }
      if (instruction.queue() == COMPUTE) {
        lastCompute = index;
        for (uint32_t waited : instruction.wait_for())
          waitedFor.insert(static_cast<int>(waited));
      }
    }
    for (const auto &[copy, count] : waits)
      if (count != 1)
        return failure(describeInstruction(program, copy), " has ", count,
                       " tier_waits; a tier copy has exactly one");
    return Status::success();
  }

private:
  /// A tier copy's buffer outside the device (a fetch's operand, a store's
  /// result) and its buffer on the device (the other one).
  static uint32_t tieredOf(const Instruction &copy) {
    return copy.opcode() == OPCODE_TIER_FETCH ? copy.operands(0)
                                              : copy.results(0);
  }
  static uint32_t stagingOf(const Instruction &copy) {
    return copy.opcode() == OPCODE_TIER_FETCH ? copy.results(0)
                                              : copy.operands(0);
  }

  /// Two copies in flight at once into views of one host staging buffer
  /// (nvme moments staged for the host-side step) must not share bytes.
  /// (Arena staging buffers are whole buffers: the arena plan keeps them
  /// apart.)
  Status checkOverlap(int index, uint32_t staging,
                      const std::map<uint32_t, int> &inFlight) const {
    const Buffer &view = bufferOf(plan, staging);
    const Buffer &root = rootBufferOf(plan, staging);
    if (root.kind() != Buffer::HOST_STAGING)
      return Status::success();
    for (const auto &[other, copy] : inFlight) {
      const Buffer &busy = bufferOf(plan, other);
      if (rootBufferOf(plan, other).id() != root.id() ||
          busy.view_offset() >= view.view_offset() + view.bytes() ||
          view.view_offset() >= busy.view_offset() + busy.bytes())
        continue;
      return failure(describeInstruction(program, index), " copies ",
                     describeBuffer(view), ", whose bytes in ",
                     describeBuffer(root), " overlap those of ",
                     describeBuffer(busy), ", which instruction #", copy,
                     " still copies (no tier_wait between them)");
    }
    return Status::success();
  }

  bool isResultOf(const Instruction &instruction, uint32_t root) const {
    for (uint32_t id : instruction.results())
      if (rootBufferOf(plan, id).id() == root)
        return true;
    return false;
  }

  /// An instruction that runs on the host (the host-side optimizer step):
  /// an optimizer update, every operand and result a buffer of the host
  /// tier (the host reads neither device memory nor the nvme file) that no
  /// tier copy still has.
  Status checkHostInstruction(int index, const std::map<uint32_t, int> &flights,
                              const std::map<uint32_t, int> &staged) const {
    const Instruction &instruction = program.instructions(index);
    if (instruction.opcode() != OPCODE_ADAMW &&
        instruction.opcode() != OPCODE_SGD)
      return failure(describeInstruction(program, index),
                     " runs on the host; only an optimizer update (adamw, "
                     "sgd) may");
    for (const auto *ids : {&instruction.operands(), &instruction.results()})
      for (uint32_t id : *ids) {
        const Buffer &root = rootBufferOf(plan, id);
        if (root.tier() != Buffer::HOST)
          return failure(describeInstruction(program, index),
                         " runs on the host but names ",
                         describeBuffer(bufferOf(plan, id)),
                         ", which lives in the ", tierName(root.tier()),
                         " tier: a host kernel reads host memory only (copy "
                         "it in with a tier_store first)");
        // By the buffer that owns the bytes (a gradient's host copy), or
        // by the view a copy fills (an nvme moment staged in host memory).
        for (auto [map, key] :
             {std::pair{&flights, root.id()}, std::pair{&staged, id}})
          if (auto found = map->find(key); found != map->end())
            return failure(describeInstruction(program, index), " names ",
                           describeBuffer(bufferOf(plan, id)),
                           " while instruction #", found->second,
                           " still copies it (before its tier_wait)");
      }
    return Status::success();
  }

  /// A zero: it clears one training-state buffer of the device (a
  /// gradient accumulator whose bytes a tier_store took to the host).
  Status checkZero(int index) const {
    const Instruction &instruction = program.instructions(index);
    if (instruction.operands_size() != 0 || instruction.results_size() != 1)
      return failure(describeInstruction(program, index), " has ",
                     instruction.operands_size(), " operands and ",
                     instruction.results_size(),
                     " results; a zero has one result and no operand");
    const Buffer &target = bufferOf(plan, instruction.results(0));
    if (target.kind() != Buffer::STATE || target.view_of() != 0)
      return failure(describeInstruction(program, index), " zeroes ",
                     describeBuffer(target),
                     ", which is not a training-state buffer (STATE)");
    return Status::success();
  }

  /// One tier_fetch or tier_store: what it moves, and that it waits for
  /// the compute instruction before it.
  Status checkCopy(int index, int lastCompute) const {
    const Instruction &instruction = program.instructions(index);
    bool fetch = instruction.opcode() == OPCODE_TIER_FETCH;
    if (instruction.operands_size() != 1 || instruction.results_size() != 1)
      return failure(describeInstruction(program, index), " has ",
                     instruction.operands_size(), " operands and ",
                     instruction.results_size(),
                     " results; a tier copy has one of each");
    uint32_t tieredId = tieredOf(instruction);
    const Buffer &tiered = bufferOf(plan, tieredId);
    const Buffer &staging = bufferOf(plan, stagingOf(instruction));
    // A view only as a store's target in host staging (a gradient's copy
    // in its slot).
    const Buffer &tieredRoot = rootBufferOf(plan, tieredId);
    if (tieredRoot.tier() == Buffer::DEVICE ||
        (tiered.view_of() != 0 &&
         (fetch || tieredRoot.kind() != Buffer::HOST_STAGING)))
      return failure(describeInstruction(program, index),
                     (fetch ? " fetches " : " stores into "),
                     describeBuffer(tiered),
                     ", which is not a buffer of the host or nvme tier");
    // The other side: an arena staging buffer, or (the host-side step) a
    // gradient accumulator or the hyper-parameters, stored to the host, or
    // the parameters a host master copy mirrors, fetched back, or a view
    // of host staging that an nvme moment is fetched into and stored back
    // from (ZeRO-Infinity's step: the host does not read the file in
    // place).
    bool hostStepStore = !fetch && staging.kind() == Buffer::STATE &&
                         tiered.kind() == Buffer::HOST_STAGING;
    bool masterFetch = fetch && tiered.mirrors() == staging.id();
    const Buffer &stagingRoot = rootBufferOf(plan, staging.id());
    bool nvmeThroughHost = tieredRoot.tier() == Buffer::NVME &&
                           stagingRoot.kind() == Buffer::HOST_STAGING;
    if (nvmeThroughHost) {
      if (staging.bytes() < tiered.bytes())
        return failure(describeInstruction(program, index),
                       (fetch ? " fetches into " : " stores "),
                       describeBuffer(staging), " (", staging.bytes(),
                       " bytes), smaller than the ", tiered.bytes(),
                       " bytes of ", describeBuffer(tiered));
    } else if (staging.view_of() != 0 || staging.tier() != Buffer::DEVICE ||
               staging.bytes() < tiered.bytes() ||
               (staging.kind() != Buffer::ARENA && !hostStepStore &&
                !masterFetch)) {
      return failure(describeInstruction(program, index),
                     (fetch ? " fetches into " : " stores "),
                     describeBuffer(staging), " (", staging.bytes(),
                     " bytes), which is not an arena buffer of at least the ",
                     tiered.bytes(), " bytes of ", describeBuffer(tiered));
    }
    if (lastCompute >= 0) {
      bool waits = false;
      for (uint32_t waited : instruction.wait_for())
        waits |= waited == static_cast<uint32_t>(lastCompute);
      if (!waits)
        return failure(
            describeInstruction(program, index),
            " does not wait for instruction #", lastCompute, " ",
            inQuotes(opcodeName(program.instructions(lastCompute).opcode())),
            ", the compute instruction before it: it could touch "
            "the staging buffer while that instruction runs");
    }
    return Status::success();
  }

  /// One tier_wait: it ends exactly one copy still in flight, whose
  /// staging buffer is its operand.
  Status checkWait(int index, std::map<uint32_t, int> &inFlight,
                   std::map<int, int> &waits) const {
    const Instruction &instruction = program.instructions(index);
    if (instruction.wait_for_size() != 1 || instruction.operands_size() != 1)
      return failure(describeInstruction(program, index), " waits for ",
                     instruction.wait_for_size(), " instructions with ",
                     instruction.operands_size(),
                     " operands; a tier_wait ends one tier copy, its "
                     "staging buffer its operand");
    int copy = static_cast<int>(instruction.wait_for(0));
    Opcode waited = program.instructions(copy).opcode();
    if (waited != OPCODE_TIER_FETCH && waited != OPCODE_TIER_STORE)
      return failure(describeInstruction(program, index), " waits for ",
                     describeInstruction(program, copy),
                     ", which is not a tier copy");
    auto found = waits.find(copy);
    if (found == waits.end())
      return failure(describeInstruction(program, index), " waits for ",
                     describeInstruction(program, copy),
                     ", which comes after it");
    ++found->second;
    uint32_t staging = instruction.operands(0);
    auto flight = inFlight.find(staging);
    if (flight == inFlight.end() || flight->second != copy)
      return failure(describeInstruction(program, index), " names ",
                     describeBuffer(bufferOf(plan, staging)),
                     ", which is not the staging buffer of ",
                     describeInstruction(program, copy));
    inFlight.erase(flight);
    return Status::success();
  }

  const Plan &plan;
  const Program &program;
};

} // namespace

Status zplan::plan::validateTierCopies(const Plan &plan,
                                       const Program &program) {
  return TierChecker(plan, program).check();
}
