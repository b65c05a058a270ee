//===- GenerationEmitterTest.cpp - a generation module becomes a plan -----===//
//
// A scheduled generation module written by hand (what zcc --mode generate
// hands the emitter): a resident group read with zero.resident_read, a
// streamed group gathered per token, one KV cache appended to in place and
// attended over. The plan must hold the four programs in order with their
// bindings, one CACHE buffer per nn.kv_cache that cache_append writes and
// returns (no arena bytes), one RESIDENT buffer per resident group that
// generate_begin fills (resident_gather, then its gather_wait), that the
// parameters view and generate_end releases; and it must pass validatePlan.
// On one rank there is no copy: the resident group is read from its shard.
// With cross-step prefetch (docs/generation.md section 6) the streamed group
// is carried: prefill and decode end with a carry_gather into one CARRY
// buffer pinned at the same arena offset in every program, decode starts
// from its carry_wait, generate_end drains it; no buffer that crosses a
// program boundary may share its bytes.
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"
#include "compiler/analysis/CostModel.h"
#include "compiler/plan/PlanEmitter.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/plan/PlanValidation.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;
using namespace zplan;

namespace {

/// The module at world size `worldSize` (2 or 1); with `carry`, the
/// streamed group @g1 is carried from each token step to the next decode.
std::string generationModule(int worldSize, bool carry = false) {
  std::string groups =
      "zero.group @g0 {params = [@wq], padded_elements = 16 : i64, "
      "world_size = " +
      std::to_string(worldSize) +
      " : i64, resident}\n"
      "zero.group @g1 {params = [@wo], padded_elements = 16 : i64, "
      "world_size = " +
      std::to_string(worldSize) + " : i64}\n";
  // One token step over S tokens (prefill S = 3, decode S = 1), with the
  // bindings a generation program has (runtime/plan/ProgramContracts.h):
  // the token ids and positions [2, S], prefill's last index [2], the
  // logits [2, 4]. The hidden state is a constant: the ids are not read.
  auto step = [carry](const std::string &name, int s) {
    bool prefill = name == "prefill";
    std::string x = "tensor<2x1x" + std::to_string(s) + "x4xf32>";
    std::string pos = "tensor<2x" + std::to_string(s) + "xi64>";
    std::string logits;
    if (prefill)
      logits = "  %l = nn.slice %y {starts = array<i64: 0, 0, " +
               std::to_string(s - 1) +
               ", 0>, steps = array<i64: 1, 1, 1, 1>} : " + x +
               " -> tensor<2x1x1x4xf32> loc(\"/last\")\n"
               "  %logits = nn.reshape %l : tensor<2x1x1x4xf32> -> "
               "tensor<2x4xf32>\n";
    else
      logits = "  %logits = nn.reshape %y : " + x + " -> tensor<2x4xf32>\n";
    return "func.func @" + name + "(%ids: " + pos +
           " {nn.name = \"input_ids\"}, %pos: " + pos +
           " {nn.name = \"positions\"}" +
           (prefill ? ", %last: tensor<2xi64> {nn.name = \"last_index\"}"
                    : "") +
           ") -> (tensor<2x4xf32> {nn.name = \"logits\"})" +
           // decode gathers @g1: the ranks decode in lockstep (Lockstep.h).
           (prefill ? "" : " attributes {zplan.lockstep_period = 1 : i64}") +
           " {\n"
           "  %x = nn.constant dense<1.0> : " +
           x +
           "\n"
           "  %s0 = zero.shard @wq : !zero.shard<tensor<4x4xf32>>\n"
           "  %wq = zero.resident_read %s0 {group = @g0} : "
           "!zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>\n"
           "  %q = nn.matmul %x, %wq : (" +
           x + ", tensor<4x4xf32>) -> " + x +
           " loc(\"/q\")\n"
           "  %k = nn.cache_append @cache.0.key, %q, %pos : (" +
           x + ", " + pos +
           ") -> tensor<2x1x8x4xf32> loc(\"/append\")\n"
           "  %o = nn.cached_attention %q, %k, %k, %pos {scale = 0.5 : f32} "
           ": (" +
           x + ", tensor<2x1x8x4xf32>, tensor<2x1x8x4xf32>, " + pos + ") -> " +
           x +
           " loc(\"/attn\")\n"
           "  %s1 = zero.shard @wo : !zero.shard<tensor<4x4xf32>>\n" +
           (carry && name == "decode"
                ? "  %wo = zero.carry_wait %s1 {group = @g1} : "
                  "!zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>\n"
                : "  %t1 = zero.gather_start %s1 {group = @g1} : "
                  "!zero.shard<tensor<4x4xf32>>\n"
                  "  %wo = zero.gather_wait %t1 : tensor<4x4xf32>\n") +
           "  %y = nn.matmul %o, %wo : (" + x + ", tensor<4x4xf32>) -> " + x +
           " loc(\"/o\")\n" + logits +
           "  zero.release %wo : tensor<4x4xf32>\n" +
           (carry ? "  zero.carry_start %s1 {group = @g1} : "
                    "!zero.shard<tensor<4x4xf32>>\n"
                  : "") +
           "  return %logits : tensor<2x4xf32>\n}\n";
  };
  return "nn.parameter @wq : tensor<4x4xf32>\n"
         "nn.parameter @wo : tensor<4x4xf32>\n"
         "nn.kv_cache @cache.0.key : tensor<2x1x8x4xf32>\n" +
         groups +
         "func.func @generate_begin() {\n"
         "  zero.resident_gather {group = @g0}\n"
         "  return\n}\n" +
         step("prefill", 3) + step("decode", 1) +
         "func.func @generate_end() {\n" +
         (carry ? "  zero.carry_drain {group = @g1}\n" : "") +
         "  zero.resident_release {group = @g0}\n"
         "  return\n}\n";
}

class GenerationEmitter : public ::testing::Test {
protected:
  GenerationEmitter() : cost(llvm::cantFail(getHardwareProfile("cpu"))) {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Emits the module at `worldSize`; fails the test on an error.
  EmittedPlan emit(int worldSize, bool carry = false) {
    llvm::Expected<EmittedPlan> emitted =
        tryEmit(generationModule(worldSize, carry));
    if (!emitted) {
      ADD_FAILURE() << llvm::toString(emitted.takeError());
      return EmittedPlan();
    }
    Status valid = plan::validatePlan(emitted->plan, worldSize);
    EXPECT_TRUE(valid.ok()) << valid.message();
    return std::move(*emitted);
  }

  /// Emits the module `text`: its plan, or the emitter's error.
  llvm::Expected<EmittedPlan> tryEmit(const std::string &text) {
    module = parseSourceString<ModuleOp>(text, &context);
    if (!module)
      return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                     "cannot parse:\n" + text);
    EmitOptions options;
    options.weightsFile = "gen.zplan.weights";
    return emitPlan(*module, options, cost);
  }

  static const plan::Program *program(const plan::Plan &plan,
                                      const std::string &name) {
    for (const plan::Program &program : plan.programs())
      if (program.name() == name)
        return &program;
    ADD_FAILURE() << "no program " << name;
    return nullptr;
  }
  static const plan::Buffer &buffer(const plan::Plan &plan, uint32_t id) {
    return plan::bufferOf(plan, id);
  }
  static const plan::Buffer &root(const plan::Plan &plan, uint32_t id) {
    while (buffer(plan, id).view_of() != 0)
      id = buffer(plan, id).view_of();
    return buffer(plan, id);
  }
  static const plan::Instruction *find(const plan::Program &program,
                                       plan::Opcode opcode) {
    for (const plan::Instruction &instruction : program.instructions())
      if (instruction.opcode() == opcode)
        return &instruction;
    return nullptr;
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  CostModel cost;
};

TEST_F(GenerationEmitter, FourProgramsWithTheirBindings) {
  EmittedPlan emitted = emit(2);
  const plan::Plan &plan = emitted.plan;
  ASSERT_EQ(plan.programs_size(), 4);
  EXPECT_EQ(plan.programs(0).name(), "generate_begin");
  EXPECT_EQ(plan.programs(1).name(), "prefill");
  EXPECT_EQ(plan.programs(2).name(), "decode");
  EXPECT_EQ(plan.programs(3).name(), "generate_end");
  // The decode step is the program the dumps and the search measure.
  EXPECT_EQ(emitted.primary, 2u);
  const plan::Program &decode = plan.programs(2);
  ASSERT_EQ(decode.inputs_size(), 2);
  EXPECT_EQ(decode.inputs(0).name(), "input_ids");
  EXPECT_EQ(decode.inputs(1).name(), "positions");
  EXPECT_EQ(buffer(plan, decode.inputs(1).buffer()).dtype(), plan::I64);
  ASSERT_EQ(decode.outputs_size(), 1);
  EXPECT_EQ(decode.outputs(0).name(), "logits");
  EXPECT_EQ(plan.programs(0).inputs_size() + plan.programs(0).outputs_size() +
                plan.programs(3).inputs_size() +
                plan.programs(3).outputs_size(),
            0);
}

TEST_F(GenerationEmitter, CacheAppendWritesTheCacheBufferInPlace) {
  EmittedPlan emitted = emit(2);
  const plan::Plan &plan = emitted.plan;
  int caches = 0;
  for (const plan::Buffer &entry : plan.buffers())
    caches += entry.kind() == plan::Buffer::CACHE && entry.view_of() == 0;
  EXPECT_EQ(caches, 1);
  EXPECT_EQ(emitted.kvCacheBytes, 2u * 8 * 4 * 4);
  for (const char *name : {"prefill", "decode"}) {
    const plan::Program *step = program(plan, name);
    ASSERT_NE(step, nullptr);
    const plan::Instruction *append = find(*step, plan::OPCODE_CACHE_APPEND);
    ASSERT_NE(append, nullptr) << name;
    const plan::Buffer &cache = buffer(plan, append->operands(0));
    EXPECT_EQ(cache.kind(), plan::Buffer::CACHE);
    EXPECT_EQ(cache.name(), "cache.0.key");
    EXPECT_EQ(append->results(0), append->operands(0)) << name;
    // The attention reads the cache itself, and the positions input.
    const plan::Instruction *attention =
        find(*step, plan::OPCODE_CACHED_ATTENTION);
    ASSERT_NE(attention, nullptr);
    EXPECT_EQ(attention->operands(1), cache.id());
    EXPECT_EQ(attention->operands(2), cache.id());
    EXPECT_EQ(attention->operands(3), step->inputs(1).buffer());
    ASSERT_EQ(attention->attributes_size(), 1);
    EXPECT_EQ(attention->attributes(0).name(), "scale");
    EXPECT_FLOAT_EQ(attention->attributes(0).floats(0), 0.5);
  }
}

TEST_F(GenerationEmitter, ResidentGroupIsGatheredOnceAndViewed) {
  EmittedPlan emitted = emit(2);
  const plan::Plan &plan = emitted.plan;
  EXPECT_EQ(emitted.residentCopyBytes, 64u);

  // generate_begin: resident_gather of @g0 into its RESIDENT copy, then the
  // gather_wait that completes it.
  const plan::Program &begin = plan.programs(0);
  ASSERT_EQ(begin.instructions_size(), 2);
  const plan::Instruction &gather = begin.instructions(0);
  EXPECT_EQ(gather.opcode(), plan::OPCODE_RESIDENT_GATHER);
  EXPECT_EQ(gather.queue(), plan::COMM);
  EXPECT_EQ(plan.groups(gather.group()).name(), "g0");
  EXPECT_EQ(buffer(plan, gather.operands(0)).kind(), plan::Buffer::SHARD);
  const plan::Buffer &copy = buffer(plan, gather.results(0));
  EXPECT_EQ(copy.kind(), plan::Buffer::RESIDENT);
  EXPECT_EQ(copy.bytes(), 64u);
  const plan::Instruction &wait = begin.instructions(1);
  EXPECT_EQ(wait.opcode(), plan::OPCODE_GATHER_WAIT);
  ASSERT_EQ(wait.wait_for_size(), 1);
  EXPECT_EQ(wait.wait_for(0), 0u);

  // prefill and decode: @g0's parameter is a view of the copy, no
  // collective for it; the streamed @g1 is gathered and released per step.
  for (const char *name : {"prefill", "decode"}) {
    const plan::Program *step = program(plan, name);
    ASSERT_NE(step, nullptr);
    const plan::Instruction &q = step->instructions(0);
    EXPECT_EQ(q.opcode(), plan::OPCODE_MATMUL);
    EXPECT_EQ(root(plan, q.operands(1)).id(), copy.id()) << name;
    EXPECT_EQ(buffer(plan, q.operands(1)).name(), "wq");
    int gathers = 0;
    for (const plan::Instruction &instruction : step->instructions()) {
      if (instruction.opcode() == plan::OPCODE_ALL_GATHER) {
        ++gathers;
        EXPECT_EQ(plan.groups(instruction.group()).name(), "g1");
      }
      EXPECT_NE(instruction.opcode(), plan::OPCODE_RESIDENT_GATHER);
      EXPECT_NE(instruction.opcode(), plan::OPCODE_RESIDENT_RELEASE);
    }
    EXPECT_EQ(gathers, 1) << name;
    EXPECT_NE(find(*step, plan::OPCODE_RELEASE), nullptr);
  }

  // generate_end: the release of the copy.
  const plan::Program &end = plan.programs(3);
  ASSERT_EQ(end.instructions_size(), 1);
  EXPECT_EQ(end.instructions(0).opcode(), plan::OPCODE_RESIDENT_RELEASE);
  EXPECT_EQ(end.instructions(0).operands(0), copy.id());
}

TEST_F(GenerationEmitter, CachesAndResidentCopiesTakeNoArenaBytes) {
  EmittedPlan emitted = emit(2);
  const plan::Plan &plan = emitted.plan;
  // decode's arena: x, positions, q, o, the gathered @g1 and y; not the
  // 1 KiB cache nor the resident copy.
  const plan::Program *decode = program(plan, "decode");
  ASSERT_NE(decode, nullptr);
  EXPECT_LT(decode->peak_arena_bytes(), emitted.kvCacheBytes);
  for (const plan::Buffer &entry : plan.buffers())
    if (entry.kind() == plan::Buffer::CACHE ||
        entry.kind() == plan::Buffer::RESIDENT) {
      EXPECT_EQ(entry.offset(), 0u) << entry.name();
    }
  // Outside the arena, but per-rank memory all the same.
  EXPECT_GE(emitted.residentBytes,
            emitted.kvCacheBytes + emitted.residentCopyBytes);
}

TEST_F(GenerationEmitter, OneRankReadsTheResidentGroupFromItsShard) {
  EmittedPlan emitted = emit(1);
  const plan::Plan &plan = emitted.plan;
  EXPECT_EQ(emitted.residentCopyBytes, 0u);
  EXPECT_EQ(plan.programs(0).instructions_size(), 0);
  EXPECT_EQ(plan.programs(3).instructions_size(), 0);
  const plan::Program *decode = program(plan, "decode");
  ASSERT_NE(decode, nullptr);
  EXPECT_EQ(root(plan, decode->instructions(0).operands(1)).kind(),
            plan::Buffer::SHARD);
  for (const plan::Buffer &entry : plan.buffers())
    EXPECT_NE(entry.kind(), plan::Buffer::RESIDENT);
}

} // namespace

//===----------------------------------------------------------------------===//
// Cross-step prefetch (carry)
//===----------------------------------------------------------------------===//

namespace {

/// Whether `program` uses arena buffer `buffer` (through any view of it)
/// between instructions `from` and `to`: from its first to its last read,
/// write or binding (inputs at the start, outputs at the end).
bool touchesArenaAt(const plan::Plan &plan, const plan::Program &program,
                    const plan::Buffer &buffer, int64_t from, int64_t to) {
  auto rootId = [&](uint32_t id) {
    while (plan::bufferOf(plan, id).view_of() != 0)
      id = plan::bufferOf(plan, id).view_of();
    return id;
  };
  int64_t first = -1, last = -1;
  auto touch = [&](uint32_t id, int64_t index) {
    if (rootId(id) != buffer.id())
      return;
    first = first < 0 ? index : std::min(first, index);
    last = std::max(last, index);
  };
  for (const plan::Binding &input : program.inputs())
    touch(input.buffer(), 0);
  for (const plan::Instruction &instruction : program.instructions()) {
    for (uint32_t id : instruction.operands())
      touch(id, instruction.index());
    for (uint32_t id : instruction.results())
      touch(id, instruction.index());
  }
  for (const plan::Binding &output : program.outputs())
    touch(output.buffer(), program.instructions_size() - 1);
  return first >= 0 && first <= to && from <= last;
}

} // namespace

TEST_F(GenerationEmitter, CarriedGroupIsGatheredAtTheEndOfEachTokenStep) {
  EmittedPlan emitted = emit(2, /*carry=*/true);
  const plan::Plan &plan = emitted.plan;
  // One CARRY buffer: @g1 whole (16 f32), pinned at the arena's bottom.
  const plan::Buffer *carried = nullptr;
  for (const plan::Buffer &entry : plan.buffers())
    if (entry.kind() == plan::Buffer::CARRY && entry.view_of() == 0) {
      EXPECT_EQ(carried, nullptr) << "a second CARRY buffer " << entry.name();
      carried = &entry;
    }
  ASSERT_NE(carried, nullptr);
  EXPECT_EQ(plan.groups(carried->group()).name(), "g1");
  EXPECT_EQ(carried->bytes(), 64u);
  EXPECT_EQ(carried->offset(), 0u);

  // prefill and decode: the carry_gather is the last instruction, on the
  // comm queue, the shard into the CARRY buffer, after the compute before.
  for (const char *name : {"prefill", "decode"}) {
    const plan::Program *step = program(plan, name);
    ASSERT_NE(step, nullptr);
    const plan::Instruction &gather =
        step->instructions(step->instructions_size() - 1);
    EXPECT_EQ(gather.opcode(), plan::OPCODE_CARRY_GATHER) << name;
    EXPECT_EQ(gather.queue(), plan::COMM);
    EXPECT_EQ(buffer(plan, gather.operands(0)).kind(), plan::Buffer::SHARD);
    EXPECT_EQ(gather.results(0), carried->id());
    EXPECT_EQ(gather.group(), carried->group());
    ASSERT_EQ(gather.wait_for_size(), 1);
    EXPECT_EQ(gather.wait_for(0), gather.index() - 1);
    EXPECT_EQ(step->instructions(gather.index() - 1).opcode(),
              plan::OPCODE_RELEASE);
  }
  // prefill still gathers @g1 for itself (an all_gather into the arena);
  // decode does not: it waits for the carried copy and reads views of it.
  EXPECT_NE(find(*program(plan, "prefill"), plan::OPCODE_ALL_GATHER), nullptr);
  const plan::Program &decode = *program(plan, "decode");
  EXPECT_EQ(find(decode, plan::OPCODE_ALL_GATHER), nullptr);
  const plan::Instruction *wait = find(decode, plan::OPCODE_CARRY_WAIT);
  ASSERT_NE(wait, nullptr);
  EXPECT_EQ(wait->queue(), plan::COMPUTE);
  EXPECT_EQ(wait->results(0), carried->id());
  EXPECT_EQ(wait->operands_size(), 0);
  const plan::Instruction &o = decode.instructions(wait->index() + 1);
  EXPECT_EQ(o.opcode(), plan::OPCODE_MATMUL);
  EXPECT_EQ(root(plan, o.operands(1)).id(), carried->id());
  EXPECT_EQ(buffer(plan, o.operands(1)).name(), "wo");
  const plan::Instruction &release = decode.instructions(wait->index() + 2);
  EXPECT_EQ(release.opcode(), plan::OPCODE_RELEASE);
  EXPECT_EQ(release.operands(0), carried->id());

  // generate_end: the drain of the last carried copy.
  const plan::Program &end = *program(plan, "generate_end");
  const plan::Instruction *drain = find(end, plan::OPCODE_CARRY_DRAIN);
  ASSERT_NE(drain, nullptr);
  EXPECT_EQ(drain->operands(0), carried->id());
  EXPECT_EQ(find(*program(plan, "generate_begin"), plan::OPCODE_CARRY_GATHER),
            nullptr);
}

// The copy's bytes [0, 64) hold data across each program boundary: from
// the carry_gather to the end of prefill and decode, from the start of
// decode to the release, from the start of generate_end to the drain. No
// other arena buffer of those programs may touch them meanwhile: not the
// inputs the host writes before decode runs, nor the logits it reads after.
TEST_F(GenerationEmitter, NoBufferSharesTheCarriedBytesWhileTheyHoldData) {
  EmittedPlan emitted = emit(2, /*carry=*/true);
  const plan::Plan &plan = emitted.plan;
  for (const char *name : {"prefill", "decode", "generate_end"}) {
    const plan::Program &step = *program(plan, name);
    int64_t last = step.instructions_size() - 1;
    std::vector<std::pair<int64_t, int64_t>> held;
    if (const plan::Instruction *gather = find(step, plan::OPCODE_CARRY_GATHER))
      held.push_back({gather->index(), last});
    if (const plan::Instruction *release = find(step, plan::OPCODE_RELEASE);
        release && std::string(name) == "decode")
      held.push_back({0, release->index()});
    if (const plan::Instruction *drain = find(step, plan::OPCODE_CARRY_DRAIN))
      held.push_back({0, drain->index()});
    EXPECT_FALSE(held.empty()) << name;
    for (const plan::Buffer &entry : plan.buffers()) {
      if (entry.kind() != plan::Buffer::ARENA || entry.view_of() != 0 ||
          entry.offset() >= 64)
        continue;
      for (auto [from, to] : held)
        EXPECT_FALSE(touchesArenaAt(plan, step, entry, from, to))
            << name << ": " << entry.name() << " at offset " << entry.offset()
            << " is live in [" << from << ", " << to << "]";
    }
    EXPECT_GE(step.peak_arena_bytes(), 64u) << name;
  }
}

TEST_F(GenerationEmitter, OneRankCarriesNothing) {
  EmittedPlan emitted = emit(1, /*carry=*/true);
  const plan::Plan &plan = emitted.plan;
  for (const plan::Buffer &entry : plan.buffers())
    EXPECT_NE(entry.kind(), plan::Buffer::CARRY) << entry.name();
  for (const plan::Program &step : plan.programs())
    for (const plan::Instruction &instruction : step.instructions()) {
      plan::Opcode opcode = instruction.opcode();
      EXPECT_TRUE(opcode != plan::OPCODE_CARRY_GATHER &&
                  opcode != plan::OPCODE_CARRY_WAIT &&
                  opcode != plan::OPCODE_CARRY_DRAIN)
          << step.name() << " " << plan::opcodeName(opcode);
    }
  // decode reads @g1's parameter from its shard.
  const plan::Program &decode = *program(plan, "decode");
  const plan::Instruction *o = nullptr;
  for (const plan::Instruction &instruction : decode.instructions())
    if (instruction.location() == "/o")
      o = &instruction;
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(root(plan, o->operands(1)).kind(), plan::Buffer::SHARD);
}

// A carry_gather over the copy the same decode still reads would overwrite
// it: the emitter refuses, naming the op and the group.
TEST_F(GenerationEmitter, RefusesACarryStartBeforeTheCarriedCopyIsReleased) {
  std::string text = generationModule(2, /*carry=*/true);
  std::string release = "  zero.release %wo : tensor<4x4xf32>\n";
  std::string start = "  zero.carry_start %s1 {group = @g1} : "
                      "!zero.shard<tensor<4x4xf32>>\n";
  // In decode (the second occurrence): the start above the release.
  size_t decodeAt = text.find("func.func @decode");
  size_t releaseAt = text.find(release, decodeAt);
  ASSERT_NE(releaseAt, std::string::npos);
  text.replace(releaseAt, release.size() + start.size(), start + release);
  llvm::Expected<EmittedPlan> emitted = tryEmit(text);
  ASSERT_FALSE(emitted);
  std::string error = llvm::toString(emitted.takeError());
  EXPECT_NE(error.find("zero.carry_start"), std::string::npos) << error;
  EXPECT_NE(error.find("carried copy of @g1"), std::string::npos) << error;
  EXPECT_NE(error.find("not released before it"), std::string::npos) << error;
}
