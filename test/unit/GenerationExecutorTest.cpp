//===- GenerationExecutorTest.cpp - generation's state across programs ----===//
//
// A hand-made generation plan on one rank (the collective is a copy):
// generate_begin resident-gathers a group into its RESIDENT copy, decode
// reads a parameter through a view of that copy and appends to a KV cache
// (a CACHE buffer, written in place), generate_end releases the copy. The
// executors of the three programs share the rank's memory, so what one
// program leaves (the copy, the cache) is what the next reads; --check
// refuses a read of the copy before generate_begin and after generate_end,
// naming the instruction, the parameter and the release. The validator
// refuses the generation instructions whose operands are not what the
// executor relies on.
// With cross-step prefetch (docs/generation.md section 6) prefill gathers
// the group into its CARRY copy for decode, which waits for it, reads it,
// releases it and carries it again; generate_end drains it. The carry's
// ledger refuses a decode with nothing carried, and a program other than
// decode or generate_end while a carried gather waits; --check refuses a
// read before the carry_wait and a copy overwritten between the programs.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/CpuBackend.h"
#include "runtime/exec/Executor.h"
#include "runtime/plan/PlanFormat.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/plan/PlanValidation.h"
#include "runtime/plan/Weights.h"
#include "runtime/support/Checksum.h"

#include "test/unit/PlanBuilder.h"
#include "test/unit/SingleRankCommunicator.h"
#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using namespace zplan;
using zplan::testing::addBuffer;
using zplan::testing::bind;
using zplan::testing::contains;
using zplan::testing::errorOf;
namespace fs = std::filesystem;

namespace {

// Buffer ids of the plan below.
enum : uint32_t {
  kShard = 1,
  kResident,
  kWeight, // view of kResident
  kCache,
  kNew,
  kPositions,
  kSum,
  // With the carry:
  kCarry,   // CARRY copy of the group, in the arena
  kCarried, // "w", view of kCarry
};

constexpr int64_t kSlots = 4, kWidth = 4;

plan::Instruction *addInstruction(plan::Program &program, plan::Opcode opcode,
                                  std::vector<uint32_t> operands,
                                  std::vector<uint32_t> results,
                                  uint32_t group = 0) {
  plan::Instruction *instruction = program.add_instructions();
  instruction->set_index(program.instructions_size() - 1);
  instruction->set_opcode(opcode);
  instruction->set_queue(plan::findOpcode(opcode)->queue);
  for (uint32_t id : operands)
    instruction->add_operands(id);
  for (uint32_t id : results)
    instruction->add_results(id);
  instruction->set_group(group);
  return instruction;
}

/// One sharded group @g holding w [2, 4]; its resident copy; a key cache
/// [1, 1, 4, 4]; decode computes w + w and appends `new` at `positions`.
/// With `carry`, decode reads w from the group's carried copy instead
/// (carry_wait, add, cache_append, release, carry_gather), a fourth program
/// prefill only carries it, and generate_end drains it first.
plan::Plan makeGenerationPlan(bool carry = false) {
  plan::Plan plan;
  plan.set_version(plan::kPlanVersion);
  plan.set_world_size(1);
  plan.set_hardware("cpu");
  plan.set_weights_file("gen.zplan.weights");
  plan::Parameter *weight = plan.add_parameters();
  weight->set_name("w");
  weight->add_shape(2);
  weight->add_shape(4);
  weight->set_dtype(plan::F32);
  weight->set_num_elements(8);
  plan::Group *group = plan.add_groups();
  group->set_name("g");
  group->set_padded_elements(8);
  group->set_dtype(plan::F32);
  group->add_parameters(0);
  plan.set_weights_bytes_per_rank(32);
  plan.set_persistent_weights_offset(32);

  addBuffer(plan, "g (shard)", plan::Buffer::SHARD, {8})->set_group(0);
  addBuffer(plan, "g (resident)", plan::Buffer::RESIDENT, {8})->set_group(0);
  plan::Buffer *view = addBuffer(plan, "w", plan::Buffer::RESIDENT, {2, 4});
  view->set_view_of(kResident);
  view->set_group(0);
  addBuffer(plan, "cache.0.key", plan::Buffer::CACHE, {1, 1, kSlots, kWidth});
  addBuffer(plan, "new", plan::Buffer::ARENA, {1, 1, 1, kWidth});
  addBuffer(plan, "positions", plan::Buffer::ARENA, {1, 1}, plan::I64)
      ->set_offset(64);
  addBuffer(plan, "sum", plan::Buffer::ARENA, {2, 4})->set_offset(128);
  plan.set_arena_bytes(256);
  if (carry) {
    plan::Buffer *copy =
        addBuffer(plan, "g (carried)", plan::Buffer::CARRY, {8});
    copy->set_group(0);
    copy->set_offset(192);
    plan::Buffer *carried = addBuffer(plan, "w", plan::Buffer::CARRY, {2, 4});
    carried->set_view_of(kCarry);
    carried->set_group(0);
  }

  // What a generation program binds besides (ProgramContracts.h): token ids
  // (unread here), prefill's last index, and the logits, a view of the sum.
  uint32_t ids =
      addBuffer(plan, "input_ids", plan::Buffer::ARENA, {1, 1}, plan::I64)
          ->id();
  plan.mutable_buffers(ids - 1)->set_offset(96);
  plan::Buffer *last =
      addBuffer(plan, "last_index", plan::Buffer::ARENA, {1}, plan::I64);
  last->set_offset(104);
  uint32_t lastIndex = last->id();
  plan::Buffer *logits = addBuffer(plan, "logits", plan::Buffer::ARENA, {1, 8});
  logits->set_view_of(kSum);
  uint32_t logitsId = logits->id();

  plan::Program *begin = plan.add_programs();
  begin->set_name("generate_begin");
  begin->set_kind(plan::PROGRAM_KIND_GENERATE_BEGIN);
  addInstruction(*begin, plan::OPCODE_RESIDENT_GATHER, {kShard}, {kResident});
  addInstruction(*begin, plan::OPCODE_GATHER_WAIT, {kResident}, {})
      ->add_wait_for(0);

  plan::Program *decode = plan.add_programs();
  decode->set_name("decode");
  decode->set_kind(plan::PROGRAM_KIND_DECODE);
  decode->set_peak_arena_bytes(256);
  // With the carry, decode gathers: the ranks decode in lockstep.
  if (carry)
    decode->set_lockstep_period(1);
  if (carry)
    addInstruction(*decode, plan::OPCODE_CARRY_WAIT, {}, {kCarry}, 0);
  uint32_t read = carry ? kCarried : kWeight;
  addInstruction(*decode, plan::OPCODE_ADD, {read, read}, {kSum})
      ->set_location("/h.0/add");
  addInstruction(*decode, plan::OPCODE_CACHE_APPEND, {kCache, kNew, kPositions},
                 {kCache});
  if (carry) {
    addInstruction(*decode, plan::OPCODE_RELEASE, {kCarry}, {}, 0);
    addInstruction(*decode, plan::OPCODE_CARRY_GATHER, {kShard}, {kCarry}, 0)
        ->add_wait_for(3);
  }
  // The test writes `new` and the positions itself (feed()).
  bind(decode->mutable_inputs(), "input_ids", ids,
       plan::BINDING_ROLE_INPUT_IDS);
  bind(decode->mutable_inputs(), "positions", kPositions,
       plan::BINDING_ROLE_POSITIONS);
  bind(decode->mutable_outputs(), "logits", logitsId,
       plan::BINDING_ROLE_LOGITS);

  plan::Program *end = plan.add_programs();
  end->set_name("generate_end");
  end->set_kind(plan::PROGRAM_KIND_GENERATE_END);
  if (carry)
    addInstruction(*end, plan::OPCODE_CARRY_DRAIN, {kCarry}, {}, 0);
  addInstruction(*end, plan::OPCODE_RESIDENT_RELEASE, {kResident}, {});

  plan::Program *prefill = plan.add_programs();
  prefill->set_name("prefill");
  prefill->set_kind(plan::PROGRAM_KIND_PREFILL);
  if (carry)
    addInstruction(*prefill, plan::OPCODE_CARRY_GATHER, {kShard}, {kCarry}, 0);
  bind(prefill->mutable_inputs(), "input_ids", ids,
       plan::BINDING_ROLE_INPUT_IDS);
  bind(prefill->mutable_inputs(), "positions", kPositions,
       plan::BINDING_ROLE_POSITIONS);
  bind(prefill->mutable_inputs(), "last_index", lastIndex,
       plan::BINDING_ROLE_LAST_INDEX);
  bind(prefill->mutable_outputs(), "logits", logitsId,
       plan::BINDING_ROLE_LOGITS);
  return plan;
}

class GenerationExecutor : public ::testing::Test {
protected:
  /// The plan the test runs: makeGenerationPlan(), carried or not, then
  /// changed by alter().
  virtual bool carry() const { return false; }
  virtual void alter(plan::Plan &) const {}

  void SetUp() override {
    char pattern[] = "/tmp/zplan-generation-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    directory = pattern;
    // The plan as zrun reads it: serialized, parsed back (its identity
    // set), its weights beside it.
    uint64_t identity = 0;
    plan::Plan made = makeGenerationPlan(carry());
    alter(made);
    std::string bytes = plan::serializePlan(made, &identity);
    ASSERT_EQ(errorOf(plan::parsePlan(bytes, "gen.zplan", plan)), "");
    ASSERT_EQ(errorOf(plan::validatePlan(plan, 1)), "");
    std::vector<float> weights = {1, 2, 3, 4, 5, 6, 7, 8};
    plan::WeightsHeader header;
    header.planIdentity = identity;
    header.rankChecksums = {checksum(weights.data(), 32)};
    header.persistentChecksum = checksum(nullptr, 0);
    std::ofstream out(directory + "/gen.zplan.weights", std::ios::binary);
    out << plan::encodeWeightsHeader(header);
    out.write(reinterpret_cast<const char *>(weights.data()), 32);
    out.close();
    ASSERT_EQ(errorOf(RankMemory::load(directory + "/gen.zplan", plan, 0,
                                       cpu::cpuBackend(), memory)),
              "");
    ExecutorOptions options;
    options.check = true;
    for (int p = 0; p < plan.programs_size(); ++p)
      ASSERT_EQ(errorOf(checkProgramSupported(plan, plan.programs(p),
                                              cpu::cpuBackend())),
                "");
    for (int p = 0; p < plan.programs_size(); ++p)
      ASSERT_EQ(errorOf(Executor::create(plan, plan.programs(p), *memory,
                                         communicator, options, executors[p])),
                "");
  }
  void TearDown() override { fs::remove_all(directory); }

  Executor &begin() { return *executors[0]; }
  Executor &decode() { return *executors[1]; }
  Executor &end() { return *executors[2]; }
  Executor &prefill() { return *executors[3]; } // carries with the carry only

  /// Sets decode's inputs: the new key row (all `value`) at `position`.
  void feed(float value, int64_t position) {
    auto *entries = reinterpret_cast<float *>(memory->address(kNew));
    std::fill(entries, entries + kWidth, value);
    std::memcpy(memory->address(kPositions), &position, sizeof position);
  }
  const float *cache() const {
    return reinterpret_cast<const float *>(memory->address(kCache));
  }
  const float *sum() const {
    return reinterpret_cast<const float *>(memory->address(kSum));
  }

  std::string directory;
  plan::Plan plan;
  std::unique_ptr<RankMemory> memory;
  zplan::testing::SingleRankCommunicator communicator;
  std::unique_ptr<Executor> executors[4];
};

TEST_F(GenerationExecutor, ResidentCopyAndCacheOutliveTheirPrograms) {
  // The cache is zero at load.
  for (int64_t i = 0; i < kSlots * kWidth; ++i)
    EXPECT_EQ(cache()[i], 0.0f);
  ASSERT_EQ(errorOf(begin().run()), "");
  EXPECT_EQ(begin().bytesGatheredLastRun(), 32u);

  // Two decode steps: the parameter is read from the copy generate_begin
  // left; each step appends at its own slot, the last slot included.
  feed(1.5f, kSlots - 1);
  ASSERT_EQ(errorOf(decode().run()), "");
  EXPECT_EQ(decode().bytesGatheredLastRun(), 0u);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(sum()[i], 2.0f * (i + 1));
  feed(-2.0f, 0);
  ASSERT_EQ(errorOf(decode().run()), "");
  for (int64_t d = 0; d < kWidth; ++d) {
    EXPECT_EQ(cache()[0 * kWidth + d], -2.0f);
    EXPECT_EQ(cache()[1 * kWidth + d], 0.0f);
    EXPECT_EQ(cache()[2 * kWidth + d], 0.0f);
    EXPECT_EQ(cache()[(kSlots - 1) * kWidth + d], 1.5f);
  }

  // generate_end poisons the copy (--check); a new generation gathers it
  // again and decode runs as before.
  ASSERT_EQ(errorOf(end().run()), "");
  EXPECT_TRUE(std::isnan(
      reinterpret_cast<const float *>(memory->address(kResident))[0]));
  ASSERT_EQ(errorOf(begin().run()), "");
  feed(0.0f, 1);
  ASSERT_EQ(errorOf(decode().run()), "");
  EXPECT_EQ(sum()[7], 16.0f);
}

TEST_F(GenerationExecutor, GenerationStateIsHeldOnlyWhileAllocated) {
  // The state is the KV cache and the resident copy (each rounded to the
  // allocation unit), counted in the bytes held; the rest is what load()
  // allocated, held throughout.
  uint64_t state = 0;
  for (uint32_t id : {kCache, kResident})
    state += (plan::bufferOf(plan, id).bytes() + kMemoryAlignment - 1) /
             kMemoryAlignment * kMemoryAlignment;
  EXPECT_EQ(memory->generationBytes(), state);
  uint64_t during = memory->heldBytes();
  EXPECT_EQ(memory->peakBytes(), during);
  ASSERT_EQ(errorOf(begin().run()), "");
  feed(1.5f, 0);
  ASSERT_EQ(errorOf(decode().run()), "");
  EXPECT_EQ(errorOf(memory->allocateGeneration()),
            "the generation state is already allocated: a generation began "
            "before the last one ended");

  // Released (the executors that resolved its addresses first): the bytes
  // held drop by the state, the peak stays, the addresses of the cache and
  // of the view into the copy are gone.
  for (std::unique_ptr<Executor> &executor : executors)
    executor.reset();
  memory->releaseGeneration();
  EXPECT_FALSE(memory->generationAllocated());
  EXPECT_EQ(memory->heldBytes(), during - state);
  EXPECT_EQ(memory->peakBytes(), during);
  EXPECT_EQ(memory->address(kCache), nullptr);
  EXPECT_EQ(memory->address(kWeight), nullptr);
  EXPECT_NE(memory->address(kSum), nullptr);

  // Allocated again: zero, as the next generation's first prompt expects.
  ASSERT_EQ(errorOf(memory->allocateGeneration()), "");
  EXPECT_EQ(memory->heldBytes(), during);
  EXPECT_EQ(memory->peakBytes(), during);
  for (int64_t i = 0; i < kSlots * kWidth; ++i)
    EXPECT_EQ(cache()[i], 0.0f);
}

TEST_F(GenerationExecutor, CheckRefusesAReadBeforeGenerateBegin) {
  feed(1.0f, 0);
  EXPECT_TRUE(contains(
      errorOf(decode().run()),
      "instruction #0 'add' at '/h.0/add' reads parameter 'w' (group @g) "
      "from its resident copy, which no resident_gather has filled (run "
      "generate_begin first)"));
}

TEST_F(GenerationExecutor, CheckRefusesAReadAfterGenerateEnd) {
  ASSERT_EQ(errorOf(begin().run()), "");
  ASSERT_EQ(errorOf(end().run()), "");
  feed(1.0f, 0);
  EXPECT_TRUE(contains(
      errorOf(decode().run()),
      "instruction #0 'add' at '/h.0/add' reads parameter 'w' (group @g) "
      "from its resident copy after its release by program 'generate_end', "
      "instruction #0 'resident_release'"));
}

TEST_F(GenerationExecutor, AnAppendOutsideTheCacheIsAnErrorNamingIt) {
  ASSERT_EQ(errorOf(begin().run()), "");
  feed(1.0f, kSlots);
  EXPECT_TRUE(contains(errorOf(decode().run()),
                       "instruction #1 'cache_append': cache_append: position "
                       "4 of row 0, token 0 is outside the cache's 4 slots"));
}

//===----------------------------------------------------------------------===//
// The carry across programs
//===----------------------------------------------------------------------===//

class CarryExecutor : public GenerationExecutor {
protected:
  bool carry() const override { return true; }

  const float *carried() const {
    return reinterpret_cast<const float *>(memory->address(kCarry));
  }
  RankMemory::CarriedCopy::State ledger() const {
    return memory->carriedCopy(kCarry).state;
  }
};

TEST_F(CarryExecutor, PrefillCarriesTheGroupToEachDecode) {
  ASSERT_EQ(errorOf(begin().run()), "");
  EXPECT_EQ(ledger(), RankMemory::CarriedCopy::State::Empty);
  // prefill's carry_gather counts to prefill, and leaves the copy Ready.
  ASSERT_EQ(errorOf(prefill().run()), "");
  EXPECT_EQ(prefill().bytesGatheredLastRun(), 32u);
  EXPECT_EQ(ledger(), RankMemory::CarriedCopy::State::Ready);
  EXPECT_EQ(carried()[7], 8.0f);
  // Each decode reads the copy the program before carried, and carries it
  // again: one gather of the group per step, counted to the step.
  for (int step = 0; step < 2; ++step) {
    feed(1.0f, step);
    ASSERT_EQ(errorOf(decode().run()), "") << "step " << step;
    EXPECT_EQ(decode().bytesGatheredLastRun(), 32u);
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(sum()[i], 2.0f * (i + 1));
    EXPECT_EQ(ledger(), RankMemory::CarriedCopy::State::Ready);
  }
  // generate_end drops the last copy (--check poisons it).
  ASSERT_EQ(errorOf(end().run()), "");
  EXPECT_EQ(ledger(), RankMemory::CarriedCopy::State::Empty);
  EXPECT_TRUE(std::isnan(carried()[0]));
  // A new generation starts from an empty ledger: prefill, then end.
  ASSERT_EQ(errorOf(begin().run()), "");
  ASSERT_EQ(errorOf(prefill().run()), "");
  ASSERT_EQ(errorOf(end().run()), "");
}

TEST_F(CarryExecutor, DecodeWithNothingCarriedIsAnErrorNamingIt) {
  ASSERT_EQ(errorOf(begin().run()), "");
  feed(1.0f, 0);
  EXPECT_TRUE(contains(errorOf(decode().run()),
                       "instruction #0 'carry_wait': no carried gather of "
                       "group @g (the previous program was not prefill or "
                       "decode)"));
}

TEST_F(CarryExecutor, GenerateEndWithNothingCarriedIsAnError) {
  ASSERT_EQ(errorOf(begin().run()), "");
  EXPECT_TRUE(contains(errorOf(end().run()),
                       "instruction #0 'carry_drain': no carried gather of "
                       "group @g"));
}

TEST_F(CarryExecutor, OnlyDecodeOrGenerateEndMayFollowACarry) {
  ASSERT_EQ(errorOf(begin().run()), "");
  ASSERT_EQ(errorOf(prefill().run()), "");
  EXPECT_TRUE(contains(
      errorOf(prefill().run()),
      "program 'prefill' starts while the carried gather of group @g "
      "(program 'prefill', instruction #0 'carry_gather') is not completed; "
      "only 'decode' or 'generate_end' may run next"));
  EXPECT_TRUE(contains(errorOf(begin().run()),
                       "program 'generate_begin' starts while the carried "
                       "gather of group @g"));
  // The carry is still there for decode.
  feed(1.0f, 0);
  EXPECT_EQ(errorOf(decode().run()), "");
}

// Something wrote into the copy's arena bytes between prefill and decode:
// the checksum its carry_gather took no longer matches.
TEST_F(CarryExecutor, CheckCatchesACopyOverwrittenBetweenPrograms) {
  ASSERT_EQ(errorOf(begin().run()), "");
  ASSERT_EQ(errorOf(prefill().run()), "");
  reinterpret_cast<float *>(memory->address(kCarry))[3] = 42.0f;
  feed(1.0f, 0);
  EXPECT_TRUE(contains(
      errorOf(decode().run()),
      "instruction #0 'carry_wait': the carried copy of group @g changed "
      "since its carry_gather (program 'prefill', instruction #0 "
      "'carry_gather') (checksum mismatch)"));
}

/// decode reads w before its carry_wait.
class CarryReadTooEarly : public CarryExecutor {
protected:
  void alter(plan::Plan &plan) const override {
    plan::Program *decode = plan.mutable_programs(1);
    decode->mutable_instructions()->SwapElements(0, 1);
    decode->mutable_instructions(0)->set_index(0);
    decode->mutable_instructions(1)->set_index(1);
  }
};

TEST_F(CarryReadTooEarly, CheckRefusesAReadBeforeTheCarryWait) {
  ASSERT_EQ(errorOf(begin().run()), "");
  ASSERT_EQ(errorOf(prefill().run()), "");
  feed(1.0f, 0);
  EXPECT_TRUE(contains(errorOf(decode().run()),
                       "instruction #0 'add' at '/h.0/add' reads parameter "
                       "'w' (group @g) before it is gathered (no carry_wait "
                       "for it ran before it in this run)"));
}

/// decode's carry_gather comes before the release of the copy it was
/// handed (an emitter bug the executor must not run through).
class CarryGatherTooEarly : public CarryExecutor {
protected:
  void alter(plan::Plan &plan) const override {
    plan::Program *decode = plan.mutable_programs(1);
    decode->mutable_instructions()->SwapElements(3, 4);
    decode->mutable_instructions(3)->set_index(3);
    decode->mutable_instructions(3)->set_wait_for(0, 2);
    // The release after it, for certain: the gather finds the copy held.
    decode->mutable_instructions(4)->set_index(4);
    decode->mutable_instructions(4)->add_wait_for(3);
  }
};

TEST_F(CarryGatherTooEarly, ACarryGatherOverAHeldCopyIsAnError) {
  ASSERT_EQ(errorOf(begin().run()), "");
  ASSERT_EQ(errorOf(prefill().run()), "");
  feed(1.0f, 0);
  EXPECT_TRUE(contains(
      errorOf(decode().run()),
      "instruction #3 'carry_gather': the carried copy of group @g is still "
      "in use (handed over by program 'decode', instruction #0 "
      "'carry_wait'); a carry_gather may not overwrite it"));
}

//===----------------------------------------------------------------------===//
// Validation of the generation instructions and buffers
//===----------------------------------------------------------------------===//

/// The validator's message for `plan` after `breakIt` ("" when valid).
template <typename Break>
std::string validationError(Break &&breakIt, bool carry = false) {
  plan::Plan plan = makeGenerationPlan(carry);
  breakIt(plan);
  return errorOf(plan::validatePlan(plan, 1));
}

TEST(GenerationValidation, TheHandMadePlanIsValid) {
  EXPECT_EQ(validationError([](plan::Plan &) {}), "");
  EXPECT_EQ(validationError([](plan::Plan &) {}, /*carry=*/true), "");
}

TEST(GenerationValidation, CacheAppendMustWriteAKvCacheInPlace) {
  EXPECT_TRUE(contains(
      validationError([](plan::Plan &plan) {
        plan.mutable_programs(1)->mutable_instructions(1)->set_results(0, kSum);
      }),
      "program 'decode', instruction #1 'cache_append': its "
      "result buffer 7 'sum' is not its cache buffer 4 "
      "'cache.0.key'; cache_append writes in place"));
  EXPECT_TRUE(contains(validationError([](plan::Plan &plan) {
                         auto *append =
                             plan.mutable_programs(1)->mutable_instructions(1);
                         append->set_operands(0, kSum);
                         append->set_results(0, kSum);
                       }),
                       "appends to buffer 7 'sum', which is not a KV cache"));
}

TEST(GenerationValidation, PositionsAreI64OrI32OfShapeBS) {
  EXPECT_TRUE(contains(
      validationError([](plan::Plan &plan) {
        plan.mutable_buffers(kPositions - 1)->set_dtype(plan::F32);
      }),
      "instruction #1 'cache_append': its positions buffer 6 'positions' are "
      "[1, 1] of F32; expected [1, 1] of i64 or i32"));
}

TEST(GenerationValidation, ResidentBuffersAndInstructionsNameTheirGroup) {
  EXPECT_TRUE(contains(
      validationError([](plan::Plan &plan) {
        plan.mutable_programs(0)->mutable_instructions(0)->set_results(0, kSum);
      }),
      "program 'generate_begin', instruction #0 "
      "'resident_gather' gathers into buffer 7 'sum', which "
      "is not the resident copy of its group 0 'g'"));
  EXPECT_TRUE(contains(validationError([](plan::Plan &plan) {
                         plan::Buffer *copy =
                             plan.mutable_buffers(kResident - 1);
                         copy->set_shape(0, 4);
                         copy->set_bytes(16);
                         plan.mutable_buffers(kWeight - 1)->set_bytes(16);
                         plan.mutable_buffers(kWeight - 1)->set_shape(0, 1);
                       }),
                       "buffer 2 'g (resident)' is the resident copy of group "
                       "0 'g' (32 bytes) but has only 16 bytes"));
  EXPECT_TRUE(contains(validationError([](plan::Plan &plan) {
                         plan.mutable_buffers(kCache - 1)->clear_shape();
                         plan.mutable_buffers(kCache - 1)->add_shape(16);
                       }),
                       "buffer 4 'cache.0.key' is a KV cache of shape [16]"));
}

TEST(GenerationValidation, CarryInstructionsStandWhereTheCarryNeedsThem) {
  constexpr bool withCarry = true;
  // prefill = program 3, decode = 1, generate_end = 2.
  EXPECT_TRUE(contains(
      validationError(
          [](plan::Plan &plan) {
            addInstruction(*plan.mutable_programs(3), plan::OPCODE_CARRY_GATHER,
                           {kShard}, {kCarry}, 0);
          },
          withCarry),
      "program 'prefill', instruction #0 'carry_gather' is followed on the "
      "comm queue by program 'prefill', instruction #1 'carry_gather'; a "
      "carry_gather must be its program's last collective"));
  EXPECT_TRUE(
      contains(validationError(
                   [](plan::Plan &plan) {
                     addInstruction(*plan.mutable_programs(3),
                                    plan::OPCODE_CARRY_WAIT, {}, {kCarry}, 0);
                   },
                   withCarry),
               "program 'prefill', instruction #1 'carry_wait': only program "
               "'decode' may wait for a carried gather"));
  EXPECT_TRUE(
      contains(validationError(
                   [](plan::Plan &plan) {
                     addInstruction(*plan.mutable_programs(1),
                                    plan::OPCODE_CARRY_DRAIN, {kCarry}, {}, 0);
                   },
                   withCarry),
               "program 'decode', instruction #5 'carry_drain': only program "
               "'generate_end' may drain a carried gather"));
}

TEST(GenerationValidation, CarryBuffersAndInstructionsNameTheirGroup) {
  constexpr bool withCarry = true;
  EXPECT_TRUE(contains(
      validationError(
          [](plan::Plan &plan) {
            plan.mutable_programs(3)->mutable_instructions(0)->set_results(
                0, kSum);
          },
          withCarry),
      "program 'prefill', instruction #0 'carry_gather' names buffer 7 "
      "'sum', which is not the carried copy of its group 0 'g'"));
  EXPECT_TRUE(contains(
      validationError(
          [](plan::Plan &plan) {
            plan.mutable_programs(1)->mutable_instructions(0)->set_results(
                0, kCarried);
          },
          withCarry),
      "instruction #0 'carry_wait' names buffer 9 'w', which is not the "
      "carried copy"));
  EXPECT_TRUE(contains(
      validationError(
          [](plan::Plan &plan) {
            plan.mutable_buffers(kCarry - 1)->set_offset(240);
          },
          withCarry),
      "buffer 8 'g (carried)' (32 bytes at arena offset 240) ends past the "
      "arena of 256 bytes"));
  EXPECT_TRUE(contains(
      validationError(
          [](plan::Plan &plan) {
            plan.mutable_buffers(kCarry - 1)->set_group(3);
          },
          withCarry),
      "buffer 8 'g (carried)' is the carried copy of group 3, but the plan "
      "has 1 groups"));
}

} // namespace
