//===- TimelineTest.cpp - the report's timeline across programs -----------===//
//
// buildTimeline / formatTimeline (compiler/plan/Timeline.h) on hand-made
// plans: the bytes by kind at each step of train -> generate -> train, the
// generation state only from generate_begin to generate_end, and the last
// line's verdict, which turns to "NOT equal" when generate_end leaves a
// resident copy unreleased. A plan without training programs has none.
//
//===----------------------------------------------------------------------===//

#include "compiler/plan/Timeline.h"
#include "runtime/plan/ProgramContracts.h"

#include <gtest/gtest.h>

#include <string>

using namespace zplan;

namespace {

/// Adds a buffer of `kind` and `bytes`; returns its id.
uint32_t addBuffer(plan::Plan &plan, plan::Buffer::Kind kind, uint64_t bytes,
                   uint32_t viewOf = 0) {
  plan::Buffer *buffer = plan.add_buffers();
  buffer->set_id(plan.buffers_size());
  buffer->set_kind(kind);
  buffer->set_bytes(bytes);
  buffer->set_view_of(viewOf);
  return buffer->id();
}

/// A program as zcc names it, of the kind of that name.
plan::Program *addProgram(plan::Plan &plan, const std::string &name,
                          uint64_t peak) {
  plan::Program *program = plan.add_programs();
  program->set_name(name);
  for (int kind = plan::ProgramKind_MIN; kind <= plan::ProgramKind_MAX; ++kind)
    if (plan::programKindName(static_cast<plan::ProgramKind>(kind)) == name)
      program->set_kind(static_cast<plan::ProgramKind>(kind));
  program->set_peak_arena_bytes(peak);
  return program;
}

/// A train,generate plan: shards 100 B, training state 200 B, a KV cache of
/// 50 B and one resident copy of 400 B (with a parameter viewing it), which
/// generate_end releases when `release`.
plan::Plan combinedPlan(bool release) {
  plan::Plan plan;
  addBuffer(plan, plan::Buffer::SHARD, 100);
  addBuffer(plan, plan::Buffer::STATE, 200);
  addBuffer(plan, plan::Buffer::CACHE, 50);
  uint32_t resident = addBuffer(plan, plan::Buffer::RESIDENT, 400);
  addBuffer(plan, plan::Buffer::RESIDENT, 16, resident);
  addBuffer(plan, plan::Buffer::ARENA, 1000);
  addProgram(plan, "infer", 300);
  addProgram(plan, "train_micro_step", 1000);
  addProgram(plan, "optimizer_step", 8);
  addProgram(plan, "generate_begin", 0);
  addProgram(plan, "prefill", 70);
  addProgram(plan, "decode", 30);
  plan::Program *end = addProgram(plan, "generate_end", 0);
  if (release) {
    plan::Instruction *instruction = end->add_instructions();
    instruction->set_opcode(plan::OPCODE_RESIDENT_RELEASE);
    instruction->add_operands(resident);
  }
  return plan;
}

TEST(Timeline, GenerationStateOnlyBetweenBeginAndEnd) {
  std::vector<TimelineStep> steps = buildTimeline(combinedPlan(true));
  std::vector<std::string> labels;
  for (const TimelineStep &step : steps)
    labels.push_back(step.label);
  EXPECT_EQ(labels,
            (std::vector<std::string>{"train_micro_step x K", "optimizer_step",
                                      "generate_begin", "prefill", "decode x M",
                                      "generate_end", "after generate_end",
                                      "train_micro_step"}));
  for (const TimelineStep &step : steps)
    EXPECT_EQ(step.persistentBytes, 300u) << step.label;
  EXPECT_EQ(steps[0].generationBytes, 0u);
  EXPECT_EQ(steps[0].totalBytes(), 1300u);
  EXPECT_EQ(steps[3].generationBytes, 450u);
  EXPECT_EQ(steps[3].totalBytes(), 820u);
  EXPECT_EQ(steps[5].generationBytes, 450u);
  EXPECT_EQ(steps[6].generationBytes, 0u);
  EXPECT_EQ(steps[6].totalBytes(), 300u);
  std::string text = formatTimeline(steps);
  EXPECT_NE(text.find("timeline: per-rank bytes, train -> generate -> train "
                      "(the arena is one allocation of 1000 B"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("timeline: after generate_end a rank holds 300 B "
                      "outside the arena; the training steady state holds "
                      "300 B: equal\n"),
            std::string::npos)
      << text;
}

TEST(Timeline, AnUnreleasedResidentCopyIsNotTheSteadyState) {
  std::vector<TimelineStep> steps = buildTimeline(combinedPlan(false));
  EXPECT_EQ(steps[6].generationBytes, 400u);
  std::string text = formatTimeline(steps);
  EXPECT_NE(text.find("after generate_end a rank holds 700 B outside the "
                      "arena; the training steady state holds 300 B: NOT "
                      "equal"),
            std::string::npos)
      << text;
}

TEST(Timeline, TrainInferAndPlansWithoutTraining) {
  plan::Plan plan = combinedPlan(true);
  // train,infer: no generation programs.
  plan::Plan trainInfer;
  trainInfer.mutable_buffers()->CopyFrom(plan.buffers());
  addProgram(trainInfer, "infer", 300);
  addProgram(trainInfer, "train_micro_step", 1000);
  addProgram(trainInfer, "optimizer_step", 8);
  std::vector<TimelineStep> steps = buildTimeline(trainInfer);
  ASSERT_EQ(steps.size(), 5u);
  EXPECT_EQ(steps[2].label, "infer");
  EXPECT_EQ(steps[2].totalBytes(), 600u);
  EXPECT_NE(formatTimeline(steps).find("train -> infer -> train"),
            std::string::npos);
  // A generation plan: no training, no timeline.
  plan::Plan generation;
  addProgram(generation, "decode", 30);
  EXPECT_TRUE(buildTimeline(generation).empty());
  EXPECT_EQ(formatTimeline({}), "");
}

} // namespace
