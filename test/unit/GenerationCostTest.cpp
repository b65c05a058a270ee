//===- GenerationCostTest.cpp - the per-token cost of a generation --------===//
//
// Pins estimateGenerationCost on a hand-scheduled generation module: what
// @decode gathers per token (streamed groups only; resident ones once, in
// @generate_begin), the two-queue replay's time and exposed communication,
// the KV cache and resident bytes, and the report lines made from them.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/GenerationCost.h"
#include "compiler/Registration.h"
#include "compiler/analysis/Lockstep.h"
#include "compiler/plan/Dumps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace zplan;

namespace {

/// Collectives only cost time: compute is 1e30x faster, so the replay's
/// times are the collectives' alone and easy to check by hand.
HardwareProfile commOnlyProfile() {
  HardwareProfile profile;
  profile.name = "comm-only";
  profile.matmulFlopsPerSecond = 1e40;
  profile.f32MatmulFlopsPerSecond = 1e40;
  profile.vectorFlopsPerSecond = 1e40;
  profile.memoryBytesPerSecond = 1e40;
  profile.collectiveBytesPerSecond = 1e3; // 1 KB/s: 1 B = 1 ms.
  profile.collectiveLatencySeconds = 1;
  return profile;
}

// @r (resident, 64 B) and @s (streamed, 256 B) on 4 ranks; a 2x1x8x4 f32
// key cache (256 B) and value cache (256 B).
constexpr llvm::StringLiteral kModule = R"mlir(
nn.parameter @w : tensor<4x4xf32>
nn.parameter @v : tensor<4x16xf32>
nn.kv_cache @k : tensor<2x1x8x4xf32>
nn.kv_cache @kv : tensor<2x1x8x4xf32>
zero.group @r {params = [@w], padded_elements = 16 : i64, world_size = 4 : i64, resident}
zero.group @s {params = [@v], padded_elements = 64 : i64, world_size = 4 : i64}
func.func @generate_begin() {
  zero.resident_gather {group = @r}
  return
}
func.func @decode(%ids: tensor<2x1xi64>, %x: tensor<2x4xf32>) -> tensor<2x16xf32> {
  %sw = zero.shard @w : !zero.shard<tensor<4x4xf32>>
  %w = zero.resident_read %sw {group = @r} : !zero.shard<tensor<4x4xf32>> -> tensor<4x4xf32>
  %sv = zero.shard @v : !zero.shard<tensor<4x16xf32>>
  %t = zero.gather_start %sv {group = @s} : !zero.shard<tensor<4x16xf32>>
  %0 = nn.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %v = zero.gather_wait %t : tensor<4x16xf32>
  %1 = nn.matmul %0, %v : (tensor<2x4xf32>, tensor<4x16xf32>) -> tensor<2x16xf32>
  zero.release %v : tensor<4x16xf32>
  return %1 : tensor<2x16xf32>
}
func.func @generate_end() {
  zero.resident_release {group = @r}
  return
}
)mlir";

class GenerationCostTest : public ::testing::Test {
protected:
  GenerationCostTest() : model(commOnlyProfile()) {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  MLIRContext context;
  CostModel model;
};

TEST_F(GenerationCostTest, DecodeGathersOnlyStreamedGroups) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &context);
  ASSERT_TRUE(module);
  std::optional<GenerationCost> cost = estimateGenerationCost(*module, model);
  ASSERT_TRUE(cost);
  EXPECT_EQ(cost->batch, 2);
  EXPECT_EQ(cost->decode.gatheredBytes, 256u); // @s only
  EXPECT_EQ(cost->decode.collectives, 1);
  EXPECT_EQ(cost->begin.gatheredBytes, 64u); // @r, once
  EXPECT_EQ(cost->residentGroups, 1);
  EXPECT_EQ(cost->streamedGroups, 1);
  EXPECT_EQ(cost->residentBytes, 64u);
  EXPECT_EQ(cost->kvCacheBytes, 512u);
  // @s: 1 s latency + 256 B * 3/4 at 1 KB/s = 1.192 s, all of it exposed
  // (the compute it overlaps costs nothing); 2 tokens per step.
  EXPECT_NEAR(cost->decode.seconds, 1.192, 1e-9);
  EXPECT_NEAR(cost->decode.exposedCommSeconds, 1.192, 1e-9);
  EXPECT_NEAR(cost->tokensPerSecond(), 2 / 1.192, 1e-9);
  // generate_begin blocks on @r: 1 s + 64 * 3/4 ms.
  EXPECT_NEAR(cost->begin.seconds, 1.048, 1e-9);

  std::string report =
      formatGenerationReport({{SchedulePolicy::Default, &*cost}});
  EXPECT_NE(report.find("generation: batch 2 per rank (8 over 4 ranks), KV "
                        "cache 512 B per rank"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("1 of 2 sharded groups resident"), std::string::npos)
      << report;
}

TEST_F(GenerationCostTest, ReportPricesTheLockstepAgreement) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kModule, &context);
  ASSERT_TRUE(module);
  auto decode = module->lookupSymbol<func::FuncOp>("decode");
  decode->setAttr(kLockstepPeriodAttrName,
                  IntegerAttr::get(IntegerType::get(&context, 64), 4));
  std::optional<GenerationCost> cost = estimateGenerationCost(*module, model);
  ASSERT_TRUE(cost);
  EXPECT_EQ(cost->lockstepPeriod, 4);
  EXPECT_EQ(cost->worldSize, 4);
  // An all-reduce of 8 B over 4 ranks: 1 s + 8 * 2 * 3/4 ms; every 4 steps.
  EXPECT_NEAR(cost->agreementSeconds, 1.012, 1e-9);
  EXPECT_NEAR(cost->agreementSecondsPerStep(), 0.253, 1e-9);
  std::string report =
      formatGenerationReport({{SchedulePolicy::Default, &*cost}});
  EXPECT_NE(report.find("lockstep (default policy): the ranks agree on their "
                        "running rows every 4 decode steps: an 8 B all-reduce "
                        "of "),
            std::string::npos)
      << report;
}

TEST(LockstepPeriod, BalancesAgreementsAgainstStepsAfterTheEnd) {
  // sqrt(2 a M / t): a = 1, t = 2, M = 100 -> 10.
  EXPECT_EQ(chooseLockstepPeriod(1.0, 2.0, 100), 10);
  // An agreement far cheaper than a step: every step.
  EXPECT_EQ(chooseLockstepPeriod(1e-5, 1e-2, 64), 1);
  // Never past the most tokens a row can make, nor below 1.
  EXPECT_EQ(chooseLockstepPeriod(100.0, 1.0, 5), 5);
  EXPECT_EQ(chooseLockstepPeriod(1.0, 0.0, 7), 7);
  EXPECT_EQ(chooseLockstepPeriod(0.0, 1.0, 7), 1);
}

TEST_F(GenerationCostTest, NotAGenerationModule) {
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(
      "func.func @forward() {\n  return\n}\n", &context);
  ASSERT_TRUE(module);
  EXPECT_FALSE(estimateGenerationCost(*module, model));
}

} // namespace
