//===- Dumps.cpp - the schedule, memory and report text dumps -------------===//

#include "compiler/plan/Dumps.h"

#include "runtime/plan/PlanQueries.h"

#include "compiler/plan/Simulator.h"
#include "runtime/plan/CheckedSizes.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanLoader.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <set>
#include <tuple>

using namespace zplan;

std::string zplan::formatSize(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  if (unit == 0)
    os << bytes << " B";
  else
    os << llvm::format("%.2f ", value) << units[unit];
  os.flush();
  return text;
}

std::string zplan::formatSeconds(double seconds) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (seconds >= 1)
    os << llvm::format("%.3f s", seconds);
  else if (seconds >= 1e-3)
    os << llvm::format("%.3f ms", seconds * 1e3);
  else
    os << llvm::format("%.3f us", seconds * 1e6);
  os.flush();
  return text;
}

/// A collective's operands as a person reads them: the group and its
/// parameters (the first few).
static std::string describeGroup(const plan::Plan &plan, uint32_t index) {
  const plan::Group &group = plan.groups(index);
  std::string text = "@" + group.name() + " [";
  int shown = 0;
  for (uint32_t parameter : group.parameters()) {
    if (shown == 3) {
      text += ", +" + std::to_string(group.parameters_size() - 3) + " more";
      break;
    }
    text += (shown++ ? ", " : "") + plan.parameters(parameter).name();
  }
  return text + "]";
}

std::string zplan::formatScheduleDump(const EmittedPlan &emitted) {
  const plan::Plan &plan = emitted.plan;
  std::string text;
  llvm::raw_string_ostream os(text);
  for (auto [p, program] : llvm::enumerate(plan.programs())) {
    const ArenaPlan &arena =
        emitted.programs.size() > p ? emitted.programs[p].arena : emitted.arena;
    os << "// schedule: program '" << program.name() << "', "
       << program.instructions_size() << " instructions, world size "
       << plan.world_size() << "\n";
    os << "//    #  queue    op                     bytes  live-after  "
          "operands\n";
    for (const plan::Instruction &instruction : program.instructions()) {
      uint64_t bytes = 0;
      std::string operands;
      plan::Opcode opcode = instruction.opcode();
      // A group's copy: the result of the instructions that fill or hand
      // it over, the operand of those that wait for or drop it.
      bool gather = opcode == plan::OPCODE_ALL_GATHER ||
                    opcode == plan::OPCODE_RESIDENT_GATHER ||
                    opcode == plan::OPCODE_CARRY_GATHER ||
                    opcode == plan::OPCODE_CARRY_WAIT;
      if (gather || opcode == plan::OPCODE_GATHER_WAIT ||
          opcode == plan::OPCODE_RELEASE ||
          opcode == plan::OPCODE_RESIDENT_RELEASE ||
          opcode == plan::OPCODE_CARRY_DRAIN) {
        const plan::Buffer &copy = plan.buffers(
            gather ? instruction.results(0) - 1 : instruction.operands(0) - 1);
        bytes = copy.bytes();
        operands = describeGroup(plan, instruction.group());
      } else if (opcode == plan::OPCODE_REDUCE_SCATTER ||
                 opcode == plan::OPCODE_ALL_REDUCE ||
                 opcode == plan::OPCODE_REDUCE_SCATTER_WAIT ||
                 opcode == plan::OPCODE_ADAMW || opcode == plan::OPCODE_SGD) {
        // A group's gradients reduced (their full size), or its shard
        // updated.
        const plan::Group &group = plan.groups(instruction.group());
        bytes = plan::groupBytes(group);
        if (opcode == plan::OPCODE_ADAMW || opcode == plan::OPCODE_SGD)
          bytes = plan::bufferOf(plan, instruction.operands(0)).bytes();
        operands = describeGroup(plan, instruction.group());
      } else if (opcode == plan::OPCODE_CACHE_APPEND) {
        // Written in place: the bytes are the new entries, not the cache.
        bytes = plan::bufferOf(plan, instruction.operands(1)).bytes();
        operands = plan::bufferOf(plan, instruction.operands(0)).name() +
                   " <- " +
                   plan::bufferOf(plan, instruction.operands(1)).name();
      } else if (opcode == plan::OPCODE_ZERO) {
        // Its one result is what it clears.
        const plan::Buffer &target =
            plan::bufferOf(plan, instruction.results(0));
        bytes = target.bytes();
        operands = instruction.location() + " (" + target.name() + ")";
      } else {
        for (uint32_t id : instruction.results())
          bytes += plan::bufferOf(plan, id).bytes();
        for (int i = 0; i < instruction.operands_size(); ++i)
          operands += (i ? ", " : "") +
                      plan::bufferOf(plan, instruction.operands(i)).name();
        if (!instruction.location().empty())
          operands = instruction.location() + " (" + operands + ")";
      }
      uint64_t live =
          instruction.index() < static_cast<uint32_t>(arena.liveBytes.size())
              ? arena.liveBytes[instruction.index()]
              : 0;
      // An update on the host runs on the compute queue's thread, in its
      // order; the column says where it runs.
      os << llvm::format("%6u  %-7s  %-19s %10llu  %10llu  ",
                         instruction.index(),
                         instruction.queue() == plan::COMM ? "comm"
                         : instruction.on_host()           ? "host"
                                                           : "compute",
                         plan::opcodeName(opcode).c_str(),
                         static_cast<unsigned long long>(bytes),
                         static_cast<unsigned long long>(live))
         << operands << "\n";
    }
  }
  os.flush();
  return text;
}

std::string zplan::formatMemoryDump(const EmittedPlan &emitted) {
  const plan::Plan &plan = emitted.plan;
  const ArenaPlan &arena = emitted.arena;
  std::string text;
  llvm::raw_string_ostream os(text);
  os << "// memory: per rank, world size " << plan.world_size() << "\n";
  os << "resident (shards + persistent groups): " << emitted.residentBytes
     << " B (" << formatSize(emitted.residentBytes) << ")\n";
  // Generation keeps its KV caches and resident copies outside the arena
  // too (counted in the line above).
  if (emitted.kvCacheBytes)
    os << "  of which KV cache: " << emitted.kvCacheBytes << " B ("
       << formatSize(emitted.kvCacheBytes) << ")\n";
  if (emitted.residentCopyBytes)
    os << "  of which resident copies: " << emitted.residentCopyBytes << " B ("
       << formatSize(emitted.residentCopyBytes) << ")\n";
  // Offload (docs/offload.md): state outside the device, not in the totals
  // below; each program stages what it reads through the arena.
  auto tierOf = [&](plan::Buffer::Kind kind) -> const char * {
    for (const plan::Buffer &buffer : plan.buffers())
      if (buffer.kind() == kind && buffer.tier() != plan::Buffer::DEVICE)
        return buffer.tier() == plan::Buffer::HOST ? "host" : "nvme";
    return "device";
  };
  for (auto [bytes, kind, what] :
       {std::tuple{emitted.offloadedShardBytes, plan::Buffer::SHARD,
                   "parameter shards"},
        std::tuple{emitted.offloadedMomentBytes, plan::Buffer::STATE,
                   "optimizer moments"}})
    if (bytes)
      os << "offloaded to " << tierOf(kind) << " (" << what << "): " << bytes
         << " B (" << formatSize(bytes) << ")\n";
  if (emitted.hostStepGroups) {
    os << "optimizer step on the host: " << emitted.hostStepGroups
       << (emitted.hostStepGroups == 1 ? " group" : " groups")
       << (emitted.hostStagedMomentBytes
               ? " (moments in host memory, or staged there from nvme)"
               : " (moments in host memory)")
       << ", host staging " << emitted.hostStagingBytes << " B ("
       << formatSize(emitted.hostStagingBytes)
       << (emitted.hostStagedMomentBytes
               ? ": the gradients' and hyper-parameters' copies, and the "
                 "nvme moments of up to three groups)"
               : ": the gradients' and hyper-parameters' copies)");
    // Parameters on the device are updated through a master copy.
    if (emitted.hostMasterBytes)
      os << ", master copies " << emitted.hostMasterBytes << " B ("
         << formatSize(emitted.hostMasterBytes)
         << ": the parameters the device keeps)";
    os << "\n";
  }
  if (emitted.offloadedShardBytes || emitted.offloadedMomentBytes) {
    os << "tier copies per run:";
    const char *separator = " ";
    for (auto [index, program] : llvm::enumerate(plan.programs()))
      if (uint64_t bytes = emitted.programs[index].tierCopyBytes) {
        os << separator << program.name() << " " << bytes << " B";
        separator = ", ";
      }
    os << "\n";
  }
  os << "arena: " << arena.arenaBytes << " B (" << formatSize(arena.arenaBytes)
     << ")\n";
  os << "lower bound: " << arena.lowerBound << " B ("
     << formatSize(arena.lowerBound) << "), peak at instruction #"
     << arena.peakIndex << "\n";
  double ratio = arena.lowerBound ? static_cast<double>(arena.arenaBytes) /
                                        static_cast<double>(arena.lowerBound)
                                  : 1.0;
  os << "arena / lower bound: " << llvm::format("%.3f", ratio) << "\n";
  uint64_t total = emitted.residentBytes + arena.arenaBytes;
  os << "total per rank: " << total << " B (" << formatSize(total) << ")";
  if (plan.memory_budget())
    os << ", budget " << plan.memory_budget() << " B ("
       << formatSize(plan.memory_budget()) << ")";
  os << "\n// live arena bytes after each instruction (bar: share of peak)\n";
  for (size_t i = 0; i < arena.liveBytes.size(); ++i) {
    int width = arena.lowerBound
                    ? static_cast<int>(40.0 * arena.liveBytes[i] /
                                       static_cast<double>(arena.lowerBound))
                    : 0;
    os << llvm::format("%6zu %12llu ", i,
                       static_cast<unsigned long long>(arena.liveBytes[i]))
       << std::string(width, '#') << "\n";
  }
  os.flush();
  return text;
}

std::string zplan::formatReport(
    llvm::ArrayRef<std::pair<SchedulePolicy, const EmittedPlan *>> policies) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (policies.empty())
    return text;
  const plan::Plan &first = policies.front().second->plan;
  os << "// report: model " << first.model() << ", world size "
     << first.world_size() << ", hardware " << first.hardware() << ", budget "
     << (first.memory_budget() ? formatSize(first.memory_budget())
                               : std::string("none"))
     << "\n";
  // Mixed precision (docs/mixed-precision.md): the types each group's
  // shards, gathered copies and gradient reductions use, counted by group.
  auto typeText = [](plan::DataType type) {
    return llvm::StringRef(plan::planTypeName(type)).lower();
  };
  bool trains = plan::findProgram(first, plan::PROGRAM_KIND_OPTIMIZER_STEP);
  std::map<std::string, int> precisions;
  for (const plan::Group &group : first.groups())
    ++precisions["shards " + typeText(group.dtype()) +
                 (group.persistent()
                      ? std::string(" (persistent)")
                      : ", gathered " + typeText(plan::gatherType(group))) +
                 (!trains ? std::string()
                  : group.frozen()
                      ? std::string(", frozen")
                      : ", reduced " + typeText(plan::reduceType(group)))];
  for (const auto &[text, count] : precisions)
    os << "precision: " << count << " group(s): " << text << "\n";
  // compute-dtype: how many matmuls (over every program) multiply bf16
  // operands, accumulating in f32 (zplan-mixed-precision rounds the result
  // of each such matmul to bf16).
  int matmuls = 0, bf16Matmuls = 0;
  for (const plan::Program &program : first.programs())
    for (const plan::Instruction &instruction : program.instructions())
      if (instruction.opcode() == plan::OPCODE_MATMUL) {
        ++matmuls;
        const plan::Buffer &lhs =
            first.buffers(static_cast<int>(instruction.operands(0)) - 1);
        bf16Matmuls += lhs.dtype() == plan::BF16;
      }
  if (bf16Matmuls)
    os << "precision: " << bf16Matmuls << " of " << matmuls
       << " matmul(s) multiply bf16 operands, accumulating in f32, and round "
          "their results to bf16\n";
  for (int p = 0; p < first.programs_size(); ++p) {
    os << "program '" << first.programs(p).name() << "'\n";
    os << "  policy    gathered       collectives  peak/rank      "
          "simulated    exposed-comm\n";
    std::string traffic;
    for (auto &[policy, emitted] : policies) {
      std::string name = spell(policy).str();
      const plan::Plan &plan = emitted->plan;
      const plan::Program &program = plan.programs(p);
      uint64_t gathered = 0, reduced = 0;
      int collectives = 0;
      for (const plan::Instruction &instruction : program.instructions()) {
        if (instruction.queue() != plan::COMM)
          continue;
        ++collectives;
        if (instruction.opcode() == plan::OPCODE_ALL_GATHER ||
            instruction.opcode() == plan::OPCODE_RESIDENT_GATHER ||
            instruction.opcode() == plan::OPCODE_CARRY_GATHER)
          gathered += plan::bufferOf(plan, instruction.results(0)).bytes();
        else
          reduced += plan::reducedBytes(plan.groups(instruction.group()));
      }
      const EmittedProgram *data =
          emitted->programs.size() > static_cast<size_t>(p)
              ? &emitted->programs[p]
              : nullptr;
      Timeline timeline =
          simulate(program, data ? data->seconds : emitted->seconds,
                   emitted->cost ? &*emitted->cost : nullptr);
      uint64_t peak =
          emitted->residentBytes +
          (data ? data->arena.arenaBytes : emitted->arena.arenaBytes);
      os << llvm::format("  %-8s  %-13s  %11d  %-13s  %-11s  %s\n",
                         name.c_str(), formatSize(gathered).c_str(),
                         collectives, formatSize(peak).c_str(),
                         formatSeconds(timeline.totalSeconds).c_str(),
                         formatSeconds(timeline.exposedCommSeconds).c_str());
      // Training traffic in units of the model's parameter bytes: ZeRO-3
      // all-gathers 2 psi per step (forward and backward) and
      // reduce-scatters 1 psi.
      if (reduced) {
        uint64_t psi = 0;
        for (const plan::Parameter &parameter : plan.parameters())
          psi +=
              parameter.num_elements() * plan::dataTypeSize(parameter.dtype());
        traffic += llvm::formatv(
            "  {0,-8}  all-gathered {1:F2} psi, reduced {2:F2} psi per "
            "micro-step (psi = {3} of parameters)\n",
            name, gathered / double(psi), reduced / double(psi),
            formatSize(psi));
      }
    }
    os << traffic;
  }

  // Decisions of the first policy: persistence, and gathers per group.
  const EmittedPlan &chosen = *policies.front().second;
  std::map<uint32_t, int> gathers;
  for (const plan::Instruction &instruction :
       chosen.plan.programs(chosen.primary).instructions())
    // A carried group's gather (for the next decode) counts once per step.
    if (instruction.opcode() == plan::OPCODE_ALL_GATHER ||
        instruction.opcode() == plan::OPCODE_CARRY_GATHER)
      ++gathers[instruction.group()];
  // Generation: a group with a RESIDENT buffer is gathered once, in
  // generate_begin, not by the program counted above.
  std::set<uint32_t> resident;
  for (const plan::Buffer &buffer : chosen.plan.buffers())
    if (buffer.kind() == plan::Buffer::RESIDENT)
      resident.insert(buffer.group());
  os << "groups (" << spell(policies.front().first) << " policy):\n";
  for (int g = 0; g < chosen.plan.groups_size(); ++g) {
    const plan::Group &group = chosen.plan.groups(g);
    uint64_t bytes = plan::groupBytes(group);
    os << "  @" << group.name() << ": " << group.parameters_size()
       << " parameter(s), " << formatSize(bytes) << ", ";
    if (group.persistent()) {
      os << "persistent: kept whole on every rank (each parameter at or "
            "below the persistence threshold)"
         << (group.frozen() ? ", frozen (no gradient, no optimizer state)" : "")
         << "\n";
      continue;
    }
    if (resident.count(g)) {
      os << "resident: gathered once in generate_begin, read by every "
            "token, released in generate_end\n";
      continue;
    }
    int count = gathers[g];
    if (group.frozen())
      os << "frozen (no gradient, no optimizer state), ";
    os << "gathered " << count << (count == 1 ? " time" : " times");
    if (count > 1)
      os << (policies.front().first == SchedulePolicy::Jit
                 ? " (hook-style: released when another group is used)"
                 : " (released between uses to stay within the budget)");
    os << "\n";
  }
  if (!chosen.tiedCopies.empty() || !chosen.untied.empty() ||
      !chosen.frozen.empty()) {
    os << "parameters: " << chosen.plan.parameters_size() << ", "
       << chosen.frozen.size() << " frozen, " << chosen.tiedCopies.size()
       << " tied " << (chosen.tiedCopies.size() == 1 ? "copy" : "copies")
       << " (initializers read as a parameter, not parameters themselves)\n";
    for (const std::string &line : chosen.tiedCopies)
      os << "  tied: " << line << "\n";
    for (const std::string &line : chosen.untied)
      os << "  untied: " << line << "\n";
    for (const std::string &line : chosen.frozen)
      os << "  frozen: " << line << "\n";
  }
  if (!chosen.recomputedBlocks.empty()) {
    os << "recompute: " << chosen.recomputedBlocks.size() << " of "
       << chosen.blocks
       << " blocks recomputed (activation checkpointing) to fit the budget:";
    for (const std::string &block : chosen.recomputedBlocks)
      os << " " << block;
    os << "\n";
  }
  os.flush();
  return text;
}

std::string zplan::formatGenerationReport(
    llvm::ArrayRef<std::pair<SchedulePolicy, const GenerationCost *>>
        policies) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (policies.empty())
    return text;
  const GenerationCost &chosen = *policies.front().second;
  // Data parallel (docs/generation.md section 8): each rank decodes its own
  // B rows; the table's tokens/s are one rank's.
  os << "generation: batch " << chosen.batch << " per rank";
  if (chosen.worldSize > 1)
    os << " (" << chosen.batch * chosen.worldSize << " over "
       << chosen.worldSize << " ranks)";
  os << ", KV cache " << formatSize(chosen.kvCacheBytes) << " per rank\n";
  os << "  policy    resident   resident-bytes  gathered/token  "
        "decode/token  tokens/s     exposed/token  prefill      "
        "first-token\n";
  for (auto &[policy, cost] : policies) {
    std::string name = spell(policy).str();
    // Time to the first token: generate_begin's resident gathers, then
    // prefill.
    double firstToken = cost->begin.seconds + cost->prefill.seconds;
    std::string groups =
        std::to_string(cost->residentGroups) + "/" +
        std::to_string(cost->residentGroups + cost->streamedGroups);
    os << llvm::format(
        "  %-8s  %-9s  %-14s  %-14s  %-12s  %-11.1f  %-13s  "
        "%-11s  %s\n",
        name.c_str(), groups.c_str(), formatSize(cost->residentBytes).c_str(),
        formatSize(cost->decode.gatheredBytes).c_str(),
        formatSeconds(cost->decode.seconds).c_str(), cost->tokensPerSecond(),
        formatSeconds(cost->decode.exposedCommSeconds).c_str(),
        formatSeconds(cost->prefill.seconds).c_str(),
        formatSeconds(firstToken).c_str());
  }
  for (auto &[policy, cost] : policies.drop_front())
    if (cost->tokensPerSecond() > 0 && chosen.tokensPerSecond() > 0)
      os << llvm::formatv("  {0} / {1}: {2:F2}x tokens/s\n",
                          spell(policies.front().first), spell(policy),
                          chosen.tokensPerSecond() / cost->tokensPerSecond());
  // Cross-step prefetch (docs/generation.md section 6): what carrying the
  // first streamed group into the previous program's tail saves per token,
  // against the same schedule without it.
  for (auto &[policy, cost] : policies) {
    if (cost->carriedGroup.empty())
      continue;
    os << "carried group (" << spell(policy) << " policy): ";
    if (!cost->carrySkipped.empty()) {
      os << "none: @" << cost->carriedGroup << " ("
         << formatSize(cost->carriedBytes) << ") " << cost->carrySkipped
         << "\n";
      continue;
    }
    os << "@" << cost->carriedGroup << ", " << formatSize(cost->carriedBytes)
       << ", gathered in the tail of the previous prefill/decode\n";
    os << llvm::formatv(
        "  exposed comm/token: {0} with the carry, {1} without; "
        "decode/token {2} vs {3}; tokens/s {4:F1} vs {5:F1}\n",
        formatSeconds(cost->decode.exposedCommSeconds),
        formatSeconds(cost->decodeWithoutCarry.exposedCommSeconds),
        formatSeconds(cost->decode.seconds),
        formatSeconds(cost->decodeWithoutCarry.seconds),
        cost->tokensPerSecond(), cost->tokensPerSecondWithoutCarry());
  }
  // Lockstep (docs/generation.md section 8): what keeping the ranks' decode
  // loops together costs per token.
  for (auto &[policy, cost] : policies) {
    os << "lockstep (" << spell(policy) << " policy): ";
    if (cost->lockstepPeriod == 0) {
      os << "none: decode has no collective, each rank stops when its rows "
            "finish\n";
      continue;
    }
    double perStep = cost->agreementSecondsPerStep();
    os << llvm::formatv(
        "the ranks agree on their running rows every {0} decode step{1}: an "
        "8 B all-reduce of {2}, {3}/token ({4:F2}% of decode/token)\n",
        cost->lockstepPeriod, cost->lockstepPeriod == 1 ? "" : "s",
        formatSeconds(cost->agreementSeconds), formatSeconds(perStep),
        cost->decode.seconds > 0 ? 100.0 * perStep / cost->decode.seconds
                                 : 0.0);
  }
  os << "residency (" << spell(policies.front().first)
     << " policy): " << chosen.residentGroups << " of "
     << chosen.residentGroups + chosen.streamedGroups
     << " sharded groups resident";
  if (chosen.budgetBytes)
    os << " under the budget " << formatSize(chosen.budgetBytes) << ": "
       << formatSize(chosen.fixedBytes)
       << " shards, persistent groups and KV cache + "
       << formatSize(chosen.residentBytes) << " resident copies + "
       << formatSize(chosen.workingSetBytes)
       << " working set of prefill/decode (activations, streamed copies)";
  else if (policies.front().first == SchedulePolicy::Jit)
    os << " (jit: every group gathered and released per use, per token)";
  else
    os << " (no budget: every group kept gathered across tokens)";
  os << "\n";
  os.flush();
  return text;
}
