//===- Timeline.cpp - the report's memory timeline across programs --------===//
//
// The bytes come from the plan's buffer table and each program's arena
// peak, which is what zrun allocates: the state buffers outside the arena by
// kind, and the arena once, as large as the largest program's peak. The
// generation state exists only between generate_begin and the end of
// generate_end (docs/one-plan.md section 5), so the step after
// generate_end holds the training state again, plus any resident copy
// generate_end fails to release (read from its instructions); the last line
// compares the numbers.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/Timeline.h"

#include "runtime/plan/PlanQueries.h"
#include "runtime/plan/ProgramContracts.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

using namespace zplan;

namespace {

/// One rank's bytes outside the arena, by what holds them.
struct StateBytes {
  uint64_t persistent = 0;
  uint64_t generation = 0;
};

} // namespace

static StateBytes stateBytes(const plan::Plan &plan) {
  StateBytes bytes;
  for (const plan::Buffer &buffer : plan.buffers()) {
    // A view (a parameter inside its group) owns no storage.
    if (buffer.view_of() != 0)
      continue;
    switch (buffer.kind()) {
    case plan::Buffer::SHARD:
    case plan::Buffer::PERSISTENT:
    case plan::Buffer::STATE:
      bytes.persistent += buffer.bytes();
      break;
    // A CARRY buffer lives in the arena, at a fixed offset.
    case plan::Buffer::CACHE:
    case plan::Buffer::RESIDENT:
      bytes.generation += buffer.bytes();
      break;
    default:
      break;
    }
  }
  return bytes;
}

/// The RESIDENT buffers generate_end does not release: the resident copies
/// that would outlive the generation. (The KV caches are the runtime's to
/// free at generate_end, docs/one-plan.md section 5.)
static uint64_t unreleasedResidentBytes(const plan::Plan &plan) {
  llvm::DenseSet<uint32_t> released;
  if (const plan::Program *end =
          plan::findProgram(plan, plan::PROGRAM_KIND_GENERATE_END))
    for (const plan::Instruction &instruction : end->instructions())
      if (instruction.opcode() == plan::OPCODE_RESIDENT_RELEASE)
        released.insert(instruction.operands().begin(),
                        instruction.operands().end());
  uint64_t bytes = 0;
  for (const plan::Buffer &buffer : plan.buffers())
    if (buffer.kind() == plan::Buffer::RESIDENT && buffer.view_of() == 0 &&
        !released.contains(buffer.id()))
      bytes += buffer.bytes();
  return bytes;
}

/// The arena peak of the program of `kind`, if the plan has one.
static std::optional<uint64_t> arenaPeak(const plan::Plan &plan,
                                         plan::ProgramKind kind) {
  if (const plan::Program *program = plan::findProgram(plan, kind))
    return program->peak_arena_bytes();
  return std::nullopt;
}

std::vector<TimelineStep> zplan::buildTimeline(const plan::Plan &plan) {
  std::optional<uint64_t> train =
      arenaPeak(plan, plan::PROGRAM_KIND_TRAIN_MICRO_STEP);
  std::optional<uint64_t> optimizer =
      arenaPeak(plan, plan::PROGRAM_KIND_OPTIMIZER_STEP);
  bool generation = arenaPeak(plan, plan::PROGRAM_KIND_DECODE).has_value();
  std::optional<uint64_t> infer = arenaPeak(plan, plan::PROGRAM_KIND_INFER);
  if (!train || !optimizer || (!generation && !infer))
    return {};
  StateBytes bytes = stateBytes(plan);
  std::vector<TimelineStep> steps;
  auto add = [&](std::string label, uint64_t arena, bool generating) {
    steps.push_back({std::move(label), bytes.persistent,
                     generating ? bytes.generation : 0, arena});
  };
  add("train_micro_step x K", *train, false);
  add("optimizer_step", *optimizer, false);
  if (generation) {
    for (plan::ProgramKind kind :
         {plan::PROGRAM_KIND_GENERATE_BEGIN, plan::PROGRAM_KIND_PREFILL,
          plan::PROGRAM_KIND_DECODE, plan::PROGRAM_KIND_GENERATE_END})
      add(kind == plan::PROGRAM_KIND_DECODE ? "decode x M"
                                            : plan::programKindName(kind),
          arenaPeak(plan, kind).value_or(0), true);
    add("after generate_end", 0, false);
    steps.back().generationBytes = unreleasedResidentBytes(plan);
  } else {
    add("infer", *infer, false);
    add("after infer", 0, false);
  }
  add("train_micro_step", *train, false);
  return steps;
}

std::string zplan::formatTimeline(const std::vector<TimelineStep> &steps) {
  if (steps.empty())
    return "";
  std::string text;
  llvm::raw_string_ostream os(text);
  // steps: training..., the other programs..., "after X", training.
  const TimelineStep &steady = steps.front();
  const TimelineStep &after = steps[steps.size() - 2];
  uint64_t arena = 0;
  for (const TimelineStep &step : steps)
    arena = std::max(arena, step.arenaPeakBytes);
  bool generation = after.label == "after generate_end";
  os << "timeline: per-rank bytes, train -> "
     << (generation ? "generate" : "infer")
     << " -> train (the arena is one allocation of " << arena
     << " B, the largest program's peak)\n";
  os << llvm::format("  %-22s %16s %16s %16s %16s\n", (const char *)"step",
                     (const char *)"persistent", (const char *)"generation",
                     (const char *)"arena-peak", (const char *)"total");
  for (const TimelineStep &step : steps)
    os << llvm::format("  %-22s %14llu B %14llu B %14llu B %14llu B\n",
                       step.label.c_str(),
                       (unsigned long long)step.persistentBytes,
                       (unsigned long long)step.generationBytes,
                       (unsigned long long)step.arenaPeakBytes,
                       (unsigned long long)step.totalBytes());
  uint64_t held = after.persistentBytes + after.generationBytes;
  uint64_t training = steady.persistentBytes + steady.generationBytes;
  os << "timeline: " << after.label << " a rank holds " << held
     << " B outside the arena; the training steady state holds " << training
     << " B: " << (held == training ? "equal" : "NOT equal") << "\n";
  return text;
}
