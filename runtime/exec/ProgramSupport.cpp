//===- ProgramSupport.cpp - can an executor run this program? -------------===//

#include "runtime/exec/ProgramSupport.h"

#include "runtime/plan/CheckedSizes.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanQueries.h"

using namespace zplan;

namespace {

std::string groupName(const plan::Plan &plan, uint32_t group) {
  return "@" + plan.groups(group).name();
}

} // namespace

std::string zplan::describeInstruction(const plan::Instruction &instruction) {
  std::string text = "instruction #" + std::to_string(instruction.index()) +
                     " " + inQuotes(plan::opcodeName(instruction.opcode()));
  if (!instruction.location().empty())
    text += " at " + inQuotes(instruction.location());
  return text;
}

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
    const plan::Buffer &gradient =
        plan::bufferOf(plan, instruction.operands(i));
    const plan::Parameter &parameter = plan.parameters(group.parameters(i));
    if (gradient.dtype() != plan::F32 ||
        gradient.bytes() != parameter.num_elements() * 4)
      return failure(subject, ": operand ", i, " ", inQuotes(gradient.name()),
                     " is not an f32 gradient of parameter ",
                     inQuotes(parameter.name()));
  }
  uint64_t padded = group.padded_elements();
  uint64_t shard = padded / plan.world_size();
  const plan::Buffer &staging = plan::bufferOf(plan, instruction.results(0));
  const plan::Buffer &accumulator =
      plan::bufferOf(plan, instruction.results(1));
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
    return plan::bufferOf(plan, id);
  };
  for (const plan::Instruction &instruction : program.instructions()) {
    std::string subject = "program " + inQuotes(program.name()) + ", " +
                          describeInstruction(instruction);
    plan::Opcode opcode = instruction.opcode();
    // validatePlan() checked what the carry's bookkeeping, the tier copies
    // and zero name; the executor runs them itself.
    if (opcode == plan::OPCODE_RELEASE || opcode == plan::OPCODE_GATHER_WAIT ||
        opcode == plan::OPCODE_REDUCE_SCATTER_WAIT ||
        opcode == plan::OPCODE_CARRY_WAIT ||
        opcode == plan::OPCODE_CARRY_DRAIN ||
        opcode == plan::OPCODE_TIER_FETCH ||
        opcode == plan::OPCODE_TIER_STORE || opcode == plan::OPCODE_TIER_WAIT ||
        opcode == plan::OPCODE_ZERO)
      continue;
    // An update on the host runs on the CPU's kernels, whatever the backend
    // (the executor's hostKernels), and validatePlan() allowed only
    // optimizer updates there.
    if (instruction.on_host())
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
    // The shard itself, or (offloaded parameters) the staging buffer a
    // tier_fetch of it filled, which TierValidation checked.
    const plan::Buffer &operand = bufferOf(instruction.operands(0));
    const plan::Buffer &shard = plan::gatheredShardOf(
        plan, program, static_cast<int>(instruction.index()));
    const plan::Buffer &copy = bufferOf(instruction.results(0));
    if (shard.kind() != plan::Buffer::SHARD || operand.view_of() != 0 ||
        shard.group() != instruction.group())
      return failure(subject, " gathers buffer ", operand.id(), " ",
                     inQuotes(operand.name()), ", which is not the shard of ",
                     "its group ", groupName(plan, instruction.group()));
    // An all_gather fills a transient copy in the arena; a resident_gather
    // the group's RESIDENT copy, which outlives the program; a carry_gather
    // the group's CARRY copy, which the next program reads.
    plan::Buffer::Kind kind = resident ? plan::Buffer::RESIDENT
                              : carry  ? plan::Buffer::CARRY
                                       : plan::Buffer::ARENA;
    if (copy.kind() != kind || copy.view_of() != 0 ||
        copy.bytes() < plan::gatheredBytes(group) ||
        ((resident || carry) && copy.group() != instruction.group()))
      return failure(subject, " gathers into buffer ", copy.id(), " ",
                     inQuotes(copy.name()), " (", copy.bytes(),
                     " bytes), which is not ",
                     resident ? "the resident copy"
                     : carry  ? "the carried copy"
                              : "an arena buffer",
                     " of at least the ", plan::gatheredBytes(group),
                     " bytes of group ", groupName(plan, instruction.group()));
  }
  return Status::success();
}
