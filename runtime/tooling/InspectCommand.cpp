//===- InspectCommand.cpp - zrun PLAN inspect -----------------------------===//

#include "runtime/tooling/InspectCommand.h"

#include "runtime/plan/CheckedSizes.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/plan/ProgramContracts.h"
#include "runtime/session/Session.h"
#include "runtime/support/Checksum.h"
#include "runtime/support/ShapeText.h"
#include "runtime/tooling/Diagnostics.h"
#include "runtime/tooling/Npy.h"
#include "runtime/tooling/TrainCommand.h"

#include <cstdio>
#include <iostream>
#include <map>

using namespace zplan;
using namespace zplan::tooling;
using plan::bufferOf;
using plan::shapeOf;
using plan::typeName;

namespace {

std::string groupLabel(const plan::Plan &plan, uint32_t group) {
  const plan::Group &entry = plan.groups(group);
  std::string text = "@" + entry.name() + " [";
  for (int i = 0; i < entry.parameters_size(); ++i)
    text += (i ? ", " : "") + plan.parameters(entry.parameters(i)).name();
  return text + "]";
}

std::string bufferList(const plan::Plan &plan,
                       const google::protobuf::RepeatedField<uint32_t> &ids) {
  std::string text;
  for (int i = 0; i < ids.size(); ++i)
    text += (i ? ", " : "") + bufferOf(plan, ids[i]).name();
  return text;
}

} // namespace

void zplan::tooling::printInspect(const std::string &path,
                                  const plan::Plan &plan,
                                  const plan::Program *only, std::ostream &os) {
  uint64_t persistent = plan::persistentWeightsBytes(plan);
  os << "plan: " << path << "\n"
     << "version: " << plan.version() << "\n"
     << "identity: " << checksumText(plan.body_checksum())
     << " (its weights file records it)\n"
     << "world size: " << plan.world_size() << "\n"
     << "hardware: " << plan.hardware() << "\n"
     << "model: " << plan.model() << "\n"
     << "memory budget: "
     << (plan.memory_budget() ? std::to_string(plan.memory_budget()) + " B"
                              : std::string("none"))
     << " per rank\n";
  if (plan.has_train_defaults()) {
    os << "training defaults (zcc --ds-config):";
    for (const std::string &word : trainDefaultWords(plan.train_defaults()))
      os << " " << word;
    os << "\n";
  }
  os << "arena: " << plan.arena_bytes() << " B per rank\n"
     << "weights: " << inQuotes(plan.weights_file()) << ", "
     << plan.weights_bytes_per_rank() << " B of shards per rank, " << persistent
     << " B persistent\n";
  uint64_t state = 0, caches = 0, resident = 0, carried = 0;
  // Offload (docs/offload.md): the bytes of STATE and SHARD buffers in the
  // host and nvme tiers.
  uint64_t stateHost = 0, stateNvme = 0, shardHost = 0, shardNvme = 0;
  // The host-side optimizer step's copies (HOST_STAGING), apart.
  uint64_t hostStaging = 0;
  int cacheCount = 0, residentCount = 0, carriedCount = 0;
  for (const plan::Buffer &buffer : plan.buffers()) {
    if (buffer.view_of() != 0)
      continue;
    if (buffer.kind() == plan::Buffer::STATE)
      state += buffer.bytes();
    if (buffer.kind() == plan::Buffer::HOST_STAGING) {
      hostStaging += buffer.bytes();
      continue;
    }
    bool shard = buffer.kind() == plan::Buffer::SHARD;
    if (buffer.tier() == plan::Buffer::HOST)
      (shard ? shardHost : stateHost) += buffer.bytes();
    if (buffer.tier() == plan::Buffer::NVME)
      (shard ? shardNvme : stateNvme) += buffer.bytes();
    if (buffer.kind() == plan::Buffer::CACHE)
      caches += buffer.bytes(), ++cacheCount;
    if (buffer.kind() == plan::Buffer::RESIDENT)
      resident += buffer.bytes(), ++residentCount;
    if (buffer.kind() == plan::Buffer::CARRY)
      carried += buffer.bytes(), ++carriedCount;
  }
  if (state) {
    os << "training state: " << state
       << " B per rank (gradient shards and optimizer moments)";
    // Offload: the moments outside the device.
    if (stateHost)
      os << "; " << stateHost << " B of it in the host tier";
    if (stateNvme)
      os << "; " << stateNvme << " B of it in the nvme tier under "
         << inQuotes(plan.offload_dir());
    os << "\n";
  }
  if (shardHost)
    os << "parameter shards: " << shardHost << " B per rank in the host tier\n";
  if (shardNvme)
    os << "parameter shards: " << shardNvme
       << " B per rank in the nvme tier under " << inQuotes(plan.offload_dir())
       << "\n";
  if (hostStaging)
    os << "host staging: " << hostStaging
       << " B per rank (the optimizer step on the host reads its copies of "
          "the gradients, the hyper-parameters and any moments from the "
          "nvme tier there)\n";
  if (cacheCount)
    os << "KV cache: " << caches << " B per rank (" << cacheCount
       << " buffers)\n";
  if (residentCount)
    os << "resident groups: " << resident << " B per rank (" << residentCount
       << " groups gathered in generate_begin)\n";
  if (carriedCount)
    os << "carried groups: " << carried << " B per rank of the arena ("
       << carriedCount
       << " groups gathered at the end of prefill and decode for the next "
          "decode, at fixed offsets)\n";
  os << "parameters: " << plan.parameters_size()
     << ", buffers: " << plan.buffers_size()
     << ", constants: " << plan.constants_size() << "\n";
  // Mixed precision's compute dtype: matmuls of bf16 operands (f32
  // accumulation), over every program.
  int matmuls = 0, bf16Matmuls = 0;
  for (const plan::Program &program : plan.programs())
    for (const plan::Instruction &instruction : program.instructions())
      if (instruction.opcode() == plan::OPCODE_MATMUL) {
        ++matmuls;
        bf16Matmuls +=
            plan::bufferOf(plan, instruction.operands(0)).dtype() == plan::BF16;
      }
  if (bf16Matmuls)
    os << "matmuls: " << bf16Matmuls << " of " << matmuls
       << " multiply bfloat16 operands, accumulating in float32\n";

  os << "groups: " << plan.groups_size() << "\n";
  for (int index = 0; index < plan.groups_size(); ++index) {
    const plan::Group &group = plan.groups(index);
    uint64_t used = 0;
    for (uint32_t parameter : group.parameters())
      used += plan.parameters(parameter).num_elements();
    os << "  " << index << "  @" << group.name() << "  "
       << group.parameters_size() << " params, " << used << " elements, "
       << group.padded_elements() << " padded elements, "
       << typeName(group.dtype())
       << (group.persistent() ? ", persistent" : ", sharded");
    // Mixed precision: the shard above is the master; copies and gradient
    // reductions may travel in another type.
    if (plan::gatherType(group) != group.dtype())
      os << ", gathered as " << typeName(plan::gatherType(group));
    if (plan::reduceType(group) != group.dtype())
      os << ", reduced as " << typeName(plan::reduceType(group));
    os << (group.frozen() ? ", frozen (no gradient, no optimizer state)" : "")
       << ":";
    for (uint32_t index : group.parameters()) {
      const plan::Parameter &parameter = plan.parameters(index);
      os << " " << parameter.name();
      // The initializers read as this parameter: `copy` or `copy^T`.
      for (int c = 0; c < parameter.tied_copies_size(); ++c)
        os << (c ? ", " : " (tied: ") << parameter.tied_copies(c).name()
           << (parameter.tied_copies(c).transposed() ? "^T" : "")
           << (c + 1 == parameter.tied_copies_size() ? ")" : "");
    }
    os << "\n";
  }

  for (const plan::Program &program : plan.programs()) {
    if (only && &program != only)
      continue;
    std::map<std::string, int> byOp;
    int compute = 0, comm = 0;
    for (const plan::Instruction &instruction : program.instructions()) {
      ++byOp[plan::opcodeName(instruction.opcode())];
      ++(instruction.queue() == plan::COMM ? comm : compute);
    }
    os << "program " << inQuotes(program.name()) << ": "
       << program.instructions_size() << " instructions (" << compute
       << " compute, " << comm << " comm), peak arena "
       << program.peak_arena_bytes() << " B, kind "
       << plan::programKindName(program.kind());
    // docs/generation.md section 8: how the ranks' decode loops stay
    // together.
    if (program.kind() == plan::PROGRAM_KIND_DECODE)
      os << (program.lockstep_period() == 0
                 ? std::string(", no lockstep (no collective)")
                 : ", lockstep every " +
                       std::to_string(program.lockstep_period()) +
                       (program.lockstep_period() == 1 ? " step" : " steps"));
    // docs/rl.md section 3: what the runtime divides the window's gradient
    // by.
    if (program.loss_normalization() == plan::LOSS_NORMALIZATION_TOKEN_SUM)
      os << ", loss summed over completion tokens (divided by the window's "
            "global count)";
    os << "\n  ops:";
    const char *separator = " ";
    for (const auto &[op, count] : byOp) {
      os << separator << op << " " << count;
      separator = ", ";
    }
    os << "\n";
    for (const auto &[bindings, kind] :
         {std::pair{&program.inputs(), "input"},
          std::pair{&program.outputs(), "output"}})
      for (const plan::Binding &binding : *bindings) {
        const plan::Buffer &buffer = bufferOf(plan, binding.buffer());
        os << "  " << kind << " " << binding.name() << ": "
           << shapeText(shapeOf(buffer)) << " " << typeName(buffer.dtype())
           << " (buffer " << binding.buffer() << ", role "
           << plan::bindingRoleName(binding.role()) << ")\n";
      }
    for (const plan::Instruction &instruction : program.instructions()) {
      char head[64];
      std::snprintf(head, sizeof(head), "  %5u  %-8s %-19s ",
                    instruction.index(),
                    instruction.queue() == plan::COMM ? "comm"
                    : instruction.on_host()           ? "host"
                                                      : "compute",
                    plan::opcodeName(instruction.opcode()).c_str());
      os << head;
      const plan::OpcodeInfo *info = plan::findOpcode(instruction.opcode());
      bool namesGroup = info && info->showsGroup;
      if (namesGroup)
        os << groupLabel(plan, instruction.group());
      else
        os << bufferList(plan, instruction.operands()) << " -> "
           << bufferList(plan, instruction.results());
      if (instruction.wait_for_size() > 0) {
        os << "  wait_for";
        for (uint32_t waited : instruction.wait_for())
          os << " #" << waited;
      }
      // A compute result is named after its ONNX node: print the location
      // only when it says something the names do not.
      bool namedByResult = instruction.results_size() > 0 &&
                           bufferOf(plan, instruction.results(0)).name() ==
                               instruction.location();
      if (!instruction.location().empty() && !namedByResult && !namesGroup)
        os << "  at " << instruction.location();
      os << "\n";
    }
  }
}

int zplan::tooling::runInspect(const Arguments &arguments) {
  plan::Plan plan;
  Status status = session::openPlan(arguments.planPath, 0, plan);
  const plan::Program *program = nullptr;
  if (status.ok() && !arguments.program.empty())
    status = plan::selectProgram(plan, arguments.program, program);
  if (!status.ok()) {
    printError(status.message());
    return 1;
  }
  printInspect(arguments.planPath, plan, program, std::cout);
  return 0;
}
