//===- ProgramContractsTest.cpp - kinds and roles in the plan -------------===//
//
// A plan says what each program is and what each binding carries
// (plan.proto version 6). These tests build one small plan with a program of
// every kind, bindings named unlike zcc names them, and check that
//  - the look-ups find programs by kind and bindings by role, whatever
//    their names;
//  - checkProgramContracts() accepts it and refuses each break of the
//    contract (runtime/plan/ProgramContracts.h) with a message naming the
//    program, the binding and what was expected;
//  - a plan of version 2, written before kinds and roles, is refused by its
//    version before anything else is read.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/ProgramContracts.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanQueries.h"

#include "test/unit/PlanBuilder.h"
#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

using namespace zplan::plan;
using zplan::testing::bind;
using zplan::testing::contains;
using zplan::testing::errorOf;

namespace {

/// A buffer's id, for the bindings below.
uint32_t addBuffer(Plan &plan, const std::string &name, Buffer::Kind kind,
                   std::vector<int64_t> shape, DataType dtype = F32) {
  return zplan::testing::addBuffer(plan, name, kind, std::move(shape), dtype)
      ->id();
}

Program *addProgram(Plan &plan, const std::string &name, ProgramKind kind) {
  Program *program = plan.add_programs();
  program->set_name(name);
  program->set_kind(kind);
  return program;
}

/// One group; B = 2, T = 4 for training, P = 3, V = 16 and L = 8 for
/// generation. The bindings' names are not zcc's: only the roles count.
Plan makePlan() {
  Plan plan;
  plan.set_version(kPlanVersion);
  plan.set_world_size(1);
  Group *group = plan.add_groups();
  group->set_name("g");
  group->set_padded_elements(4);
  group->set_dtype(F32);

  Program *infer = addProgram(plan, "forward", PROGRAM_KIND_INFER);
  bind(infer->mutable_inputs(), "tokens",
       addBuffer(plan, "tokens", Buffer::ARENA, {2, 4}, I64),
       BINDING_ROLE_DATA);
  bind(infer->mutable_inputs(), "mask",
       addBuffer(plan, "mask", Buffer::ARENA, {2, 4}, I64), BINDING_ROLE_DATA);
  bind(infer->mutable_outputs(), "scores",
       addBuffer(plan, "scores", Buffer::ARENA, {2, 4, 16}),
       BINDING_ROLE_LOGITS);

  Program *step = addProgram(plan, "step", PROGRAM_KIND_TRAIN_MICRO_STEP);
  bind(step->mutable_inputs(), "tokens",
       addBuffer(plan, "step tokens", Buffer::ARENA, {2, 4}, I64),
       BINDING_ROLE_INPUT_IDS);
  bind(step->mutable_inputs(), "targets",
       addBuffer(plan, "targets", Buffer::ARENA, {2, 4}, I64),
       BINDING_ROLE_LABELS);
  bind(step->mutable_outputs(), "objective",
       addBuffer(plan, "objective", Buffer::ARENA, {}), BINDING_ROLE_LOSS);
  Instruction *reduce = step->add_instructions();
  reduce->set_opcode(OPCODE_REDUCE_SCATTER);
  reduce->set_queue(COMM);
  reduce->set_group(0);

  Program *optimizer = addProgram(plan, "update", PROGRAM_KIND_OPTIMIZER_STEP);
  bind(optimizer->mutable_inputs(), "knobs",
       addBuffer(plan, "knobs", Buffer::ARENA, {HyperParameter_ARRAYSIZE}),
       BINDING_ROLE_HYPER_PARAMETERS);

  addProgram(plan, "begin", PROGRAM_KIND_GENERATE_BEGIN);
  Program *prefill = addProgram(plan, "first", PROGRAM_KIND_PREFILL);
  bind(prefill->mutable_inputs(), "prompt",
       addBuffer(plan, "prompt", Buffer::ARENA, {2, 3}, I64),
       BINDING_ROLE_INPUT_IDS);
  bind(prefill->mutable_inputs(), "where",
       addBuffer(plan, "where", Buffer::ARENA, {2, 3}, I64),
       BINDING_ROLE_POSITIONS);
  bind(prefill->mutable_inputs(), "last",
       addBuffer(plan, "last", Buffer::ARENA, {2}, I64),
       BINDING_ROLE_LAST_INDEX);
  bind(prefill->mutable_outputs(), "next",
       addBuffer(plan, "next", Buffer::ARENA, {2, 16}), BINDING_ROLE_LOGITS);
  Program *decode = addProgram(plan, "then", PROGRAM_KIND_DECODE);
  bind(decode->mutable_inputs(), "token",
       addBuffer(plan, "token", Buffer::ARENA, {2, 1}, I64),
       BINDING_ROLE_INPUT_IDS);
  bind(decode->mutable_inputs(), "at",
       addBuffer(plan, "at", Buffer::ARENA, {2, 1}, I64),
       BINDING_ROLE_POSITIONS);
  bind(decode->mutable_outputs(), "after",
       addBuffer(plan, "after", Buffer::ARENA, {2, 16}), BINDING_ROLE_LOGITS);
  addProgram(plan, "end", PROGRAM_KIND_GENERATE_END);
  addBuffer(plan, "cache", Buffer::CACHE, {2, 1, 8, 4});
  return plan;
}

/// The contract's verdict on makePlan() changed by `change`.
std::string verdict(const std::function<void(Plan &)> &change) {
  Plan plan = makePlan();
  change(plan);
  return errorOf(checkProgramContracts(plan));
}

Program &programOf(Plan &plan, ProgramKind kind) {
  for (Program &program : *plan.mutable_programs())
    if (program.kind() == kind)
      return program;
  ADD_FAILURE() << "no program of kind " << kind;
  return *plan.mutable_programs(0);
}

Buffer &bufferOfBinding(Plan &plan, const Binding &binding) {
  return *plan.mutable_buffers(static_cast<int>(binding.buffer()) - 1);
}

TEST(ProgramContracts, LookUpsGoByKindAndRoleNotName) {
  Plan plan = makePlan();
  ASSERT_EQ(errorOf(checkProgramContracts(plan)), "");
  const Program *step = findProgram(plan, PROGRAM_KIND_TRAIN_MICRO_STEP);
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->name(), "step");
  const Binding *labels = findBinding(step->inputs(), BINDING_ROLE_LABELS);
  ASSERT_NE(labels, nullptr);
  EXPECT_EQ(labels->name(), "targets");
  EXPECT_EQ(findBinding(step->inputs(), BINDING_ROLE_POSITIONS), nullptr);
  const Program *decode = findProgram(plan, PROGRAM_KIND_DECODE);
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(findBinding(decode->outputs(), BINDING_ROLE_LOGITS)->name(),
            "after");
  // By name too, for the command line; the kind-named infer program is the
  // one `zrun run` picks without --program.
  const Program *selected = nullptr;
  ASSERT_EQ(errorOf(selectProgram(plan, "", selected)), "");
  EXPECT_EQ(selected->name(), "forward");
  EXPECT_EQ(findBinding(selected->inputs(), std::string("mask"))->buffer(), 2u);
  // A plan without one kind has no program of it.
  plan.mutable_programs()->DeleteSubrange(2, 1);
  EXPECT_EQ(findProgram(plan, PROGRAM_KIND_OPTIMIZER_STEP), nullptr);
}

TEST(ProgramContracts, KindNamesAreZccsProgramNames) {
  EXPECT_EQ(programKindName(PROGRAM_KIND_TRAIN_MICRO_STEP), "train_micro_step");
  EXPECT_EQ(programKindName(PROGRAM_KIND_GENERATE_END), "generate_end");
  EXPECT_EQ(programKindName(static_cast<ProgramKind>(42)), "kind 42");
  EXPECT_EQ(bindingRoleName(BINDING_ROLE_HYPER_PARAMETERS), "hyper_parameters");
}

TEST(ProgramContracts, EveryProgramHasOneKnownKind) {
  EXPECT_EQ(verdict([](Plan &plan) {
              plan.mutable_programs(0)->set_kind(PROGRAM_KIND_UNSPECIFIED);
            }),
            "program 'forward' is of no kind; recompile the model with the "
            "matching zcc");
  EXPECT_TRUE(contains(verdict([](Plan &plan) {
                         plan.mutable_programs(0)->set_kind(
                             static_cast<ProgramKind>(42));
                       }),
                       "program 'forward' is of kind 42, which this zrun does "
                       "not know"));
  EXPECT_EQ(verdict([](Plan &plan) {
              programOf(plan, PROGRAM_KIND_GENERATE_END)
                  .set_kind(PROGRAM_KIND_GENERATE_BEGIN);
            }),
            "programs 'begin' and 'end' are both generate_begin programs");
}

TEST(ProgramContracts, BindingsHaveTheRolesOfTheirKind) {
  // A role the kind does not take.
  EXPECT_EQ(verdict([](Plan &plan) {
              bind(programOf(plan, PROGRAM_KIND_PREFILL).mutable_inputs(),
                   "attention_mask", 1, BINDING_ROLE_DATA);
            }),
            "program 'first''s input 'attention_mask' has role data; a "
            "prefill program's inputs have roles input_ids, positions, "
            "last_index");
  // A role given twice.
  EXPECT_EQ(
      verdict([](Plan &plan) {
        bind(programOf(plan, PROGRAM_KIND_TRAIN_MICRO_STEP).mutable_inputs(),
             "more", 5, BINDING_ROLE_LABELS);
      }),
      "program 'step' has two labels inputs, 'targets' and 'more'");
  // A required role missing.
  EXPECT_EQ(verdict([](Plan &plan) {
              programOf(plan, PROGRAM_KIND_DECODE)
                  .mutable_inputs()
                  ->DeleteSubrange(1, 1);
            }),
            "program 'then' has no positions input");
  EXPECT_EQ(verdict([](Plan &plan) {
              programOf(plan, PROGRAM_KIND_TRAIN_MICRO_STEP)
                  .mutable_outputs()
                  ->Clear();
            }),
            "program 'step' has no loss output");
  // An input zrun cannot fill.
  EXPECT_TRUE(contains(
      verdict([](Plan &plan) {
        Program &infer = programOf(plan, PROGRAM_KIND_INFER);
        bufferOfBinding(plan, infer.inputs(1)).set_kind(Buffer::CONSTANT);
      }),
      "program 'forward''s input 'mask' is bound to buffer 2 "
      "'mask', which is not an arena buffer zrun can fill"));
}

TEST(ProgramContracts, RolesHaveTheirTypesAndShapes) {
  EXPECT_EQ(verdict([](Plan &plan) {
              Program &step = programOf(plan, PROGRAM_KIND_TRAIN_MICRO_STEP);
              bufferOfBinding(plan, step.inputs(0)).set_dtype(I32);
            }),
            "program 'step''s input_ids binding 'tokens' is [2, 4] int32; a "
            "train_micro_step program's input_ids is [any, any] int64");
  EXPECT_EQ(verdict([](Plan &plan) {
              Program &step = programOf(plan, PROGRAM_KIND_TRAIN_MICRO_STEP);
              bufferOfBinding(plan, step.inputs(1)).set_shape(1, 5);
            }),
            "program 'step''s labels binding 'targets' is [2, 5] int64; a "
            "train_micro_step program's labels is [2, 4] int64");
  EXPECT_EQ(verdict([](Plan &plan) {
              Program &step = programOf(plan, PROGRAM_KIND_TRAIN_MICRO_STEP);
              bufferOfBinding(plan, step.outputs(0)).add_shape(2);
            }),
            "program 'step''s loss 'objective' is [2] float32, not one "
            "float32 value");
  EXPECT_EQ(verdict([](Plan &plan) {
              Program &update = programOf(plan, PROGRAM_KIND_OPTIMIZER_STEP);
              bufferOfBinding(plan, update.inputs(0)).set_shape(0, 7);
            }),
            "program 'update''s hyper_parameters binding 'knobs' is [7] "
            "float32; a optimizer_step program's hyper_parameters is [8] "
            "float32");
  EXPECT_EQ(verdict([](Plan &plan) {
              Program &decode = programOf(plan, PROGRAM_KIND_DECODE);
              bufferOfBinding(plan, decode.inputs(0)).set_shape(1, 2);
              bufferOfBinding(plan, decode.inputs(1)).set_shape(1, 2);
            }),
            "program 'then''s input_ids binding 'token' is [2, 2] int64; a "
            "decode program's input_ids is [any, 1] int64");
  EXPECT_EQ(verdict([](Plan &plan) {
              Program &prefill = programOf(plan, PROGRAM_KIND_PREFILL);
              bufferOfBinding(plan, prefill.inputs(2)).set_shape(0, 3);
            }),
            "program 'first''s last_index binding 'last' is [3] int64; a "
            "prefill program's last_index is [2] int64");
  EXPECT_TRUE(contains(verdict([](Plan &plan) {
                         Program &infer = programOf(plan, PROGRAM_KIND_INFER);
                         bufferOfBinding(plan, infer.outputs(0)).set_dtype(I64);
                       }),
                       "program 'forward''s logits 'scores' are [2, 4, 16] "
                       "int64, not floating-point values"));
}

TEST(ProgramContracts, GenerationProgramsAgree) {
  EXPECT_EQ(verdict([](Plan &plan) {
              plan.mutable_programs()->DeleteSubrange(5, 1); // decode
            }),
            "the plan has program 'end' but no decode program; generation "
            "needs all four");
  EXPECT_EQ(verdict([](Plan &plan) {
              Program &decode = programOf(plan, PROGRAM_KIND_DECODE);
              bufferOfBinding(plan, decode.outputs(0)).set_shape(1, 17);
            }),
            "program 'then' decodes 2 rows over 17 logits, program 'first' "
            "fills 2 rows over 16");
  EXPECT_EQ(verdict([](Plan &plan) {
              plan.mutable_buffers(plan.buffers_size() - 1)->set_shape(2, 3);
            }),
            "the plan's KV cache has 3 slots, no more than its prompt length "
            "3");
  EXPECT_EQ(verdict([](Plan &plan) {
              plan.mutable_buffers(plan.buffers_size() - 1)->set_shape(0, 4);
            }),
            "KV cache buffer 15 'cache' is [4, 1, 8, 4]; generation needs [2, "
            "heads, slots, head size]");
  EXPECT_EQ(
      verdict([](Plan &plan) {
        plan.mutable_buffers(plan.buffers_size() - 1)->set_kind(Buffer::ARENA);
      }),
      "the plan has no KV cache buffer; compile the model with zcc "
      "--mode generate");
}

TEST(ProgramContracts, DecodeWithACollectiveIsInLockstep) {
  // Each rank decodes its own rows: a decode that gathers needs the ranks
  // to agree on when to stop (docs/generation.md section 8).
  auto gatherInDecode = [](Plan &plan) {
    Instruction *gather =
        programOf(plan, PROGRAM_KIND_DECODE).add_instructions();
    gather->set_opcode(OPCODE_ALL_GATHER);
    gather->set_queue(COMM);
    gather->set_group(0);
  };
  EXPECT_EQ(verdict(gatherInDecode),
            "program 'then' instruction 0 (all_gather) is a collective, but "
            "the ranks do not agree on when decoding ends (lockstep period "
            "0): a rank whose rows finished would leave the others waiting "
            "in it");
  EXPECT_EQ(verdict([&](Plan &plan) {
              gatherInDecode(plan);
              programOf(plan, PROGRAM_KIND_DECODE).set_lockstep_period(1);
            }),
            "");
  EXPECT_EQ(verdict([](Plan &plan) {
              programOf(plan, PROGRAM_KIND_PREFILL).set_lockstep_period(2);
            }),
            "program 'first' has lockstep period 2; only the decode program "
            "has one");
}

TEST(ProgramContracts, MicroStepReducesEveryGroup) {
  EXPECT_EQ(verdict([](Plan &plan) {
              programOf(plan, PROGRAM_KIND_TRAIN_MICRO_STEP)
                  .mutable_instructions()
                  ->Clear();
            }),
            "program 'step' never reduces the gradients of group @g");
}

TEST(ProgramContracts, VersionTwoPlanIsRefusedByItsVersion) {
  // What zcc wrote before kinds and roles: refused before its programs are
  // read, with the version named and what to do.
  Plan old = makePlan();
  old.set_version(2);
  for (Program &program : *old.mutable_programs()) {
    program.clear_kind();
    for (Binding &binding : *program.mutable_inputs())
      binding.clear_role();
  }
  Plan parsed;
  EXPECT_EQ(errorOf(parsePlan(serializePlan(old), "old.zplan", parsed)),
            "plan file 'old.zplan': plan version 2, this zrun reads version "
            "8; recompile the model with the matching zcc");
}

} // namespace
