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
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"
#include "compiler/analysis/CostModel.h"
#include "compiler/plan/PlanEmitter.h"
#include "runtime/plan/Opcodes.h"
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

/// The module at world size `worldSize` (2 or 1).
std::string generationModule(int worldSize) {
  std::string groups =
      "zero.group @g0 {params = [@wq], padded_elements = 16 : i64, "
      "world_size = " +
      std::to_string(worldSize) +
      " : i64, resident}\n"
      "zero.group @g1 {params = [@wo], padded_elements = 16 : i64, "
      "world_size = " +
      std::to_string(worldSize) + " : i64}\n";
  // One token step over S tokens (prefill S = 3, decode S = 1).
  auto step = [](const std::string &name, int s) {
    std::string x = "tensor<2x1x" + std::to_string(s) + "x4xf32>";
    std::string pos = "tensor<2x" + std::to_string(s) + "xi64>";
    return "func.func @" + name + "(%x: " + x +
           " {nn.name = \"input_ids\"}, %pos: " + pos +
           " {nn.name = \"positions\"}) -> (" + x +
           " {nn.name = \"logits\"}) {\n"
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
           "  %s1 = zero.shard @wo : !zero.shard<tensor<4x4xf32>>\n"
           "  %t1 = zero.gather_start %s1 {group = @g1} : "
           "!zero.shard<tensor<4x4xf32>>\n"
           "  %wo = zero.gather_wait %t1 : tensor<4x4xf32>\n"
           "  %y = nn.matmul %o, %wo : (" +
           x + ", tensor<4x4xf32>) -> " + x +
           " loc(\"/o\")\n"
           "  zero.release %wo : tensor<4x4xf32>\n"
           "  return %y : " +
           x + "\n}\n";
  };
  return "nn.parameter @wq : tensor<4x4xf32>\n"
         "nn.parameter @wo : tensor<4x4xf32>\n"
         "nn.kv_cache @cache.0.key : tensor<2x1x8x4xf32>\n" +
         groups +
         "func.func @generate_begin() {\n"
         "  zero.resident_gather {group = @g0}\n"
         "  return\n}\n" +
         step("prefill", 3) + step("decode", 1) +
         "func.func @generate_end() {\n"
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
  EmittedPlan emit(int worldSize) {
    module = parseSourceString<ModuleOp>(generationModule(worldSize), &context);
    EXPECT_TRUE(module) << generationModule(worldSize);
    if (!module)
      return EmittedPlan();
    EmitOptions options;
    options.weightsFile = "gen.zplan.weights";
    llvm::Expected<EmittedPlan> emitted = emitPlan(*module, options, cost);
    if (!emitted) {
      ADD_FAILURE() << llvm::toString(emitted.takeError());
      return EmittedPlan();
    }
    Status valid = plan::validatePlan(emitted->plan, worldSize);
    EXPECT_TRUE(valid.ok()) << valid.message();
    return std::move(*emitted);
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
    return plan.buffers(id - 1);
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
        entry.kind() == plan::Buffer::RESIDENT)
      EXPECT_EQ(entry.offset(), 0u) << entry.name();
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
