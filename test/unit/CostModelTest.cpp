//===- CostModelTest.cpp - FLOPs, bytes, roofline and collective times ----===//
//
// Pins the cost model's documented estimates on small nn modules parsed from
// text: exact FLOPs and bytes per op, which roofline term wins, the collective
// formulas, and that every embedded hardware profile loads with a source for
// each number.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/CostModel.h"
#include "compiler/Registration.h"
#include "dialects/nn/NNDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <iterator>

using namespace mlir;
using namespace zplan;

namespace {

std::string errorText(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "";
}

/// Round rates, so expected times are easy to check by hand: matrix units
/// 100x the vector units (bf16 operands 10x that again), memory 10x the
/// vector units.
HardwareProfile roundProfile() {
  HardwareProfile profile;
  profile.name = "round";
  profile.matmulFlopsPerSecond = 1e13;
  profile.f32MatmulFlopsPerSecond = 1e12;
  profile.vectorFlopsPerSecond = 1e10;
  profile.memoryBytesPerSecond = 1e11;
  profile.collectiveBytesPerSecond = 1e9;
  profile.collectiveLatencySeconds = 1e-5;
  return profile;
}

class CostModelTest : public ::testing::Test {
protected:
  CostModelTest() : model(roundProfile()) {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Parses `text` (a module) and returns its first op of type OpT.
  template <typename OpT> OpT parseFirst(llvm::StringRef text) {
    module = parseSourceString<ModuleOp>(text, &context);
    EXPECT_TRUE(module) << "cannot parse:\n" << text.str();
    if (!module)
      return nullptr;
    OpT found;
    module->walk([&](OpT op) {
      if (!found)
        found = op;
    });
    EXPECT_TRUE(found) << "no " << OpT::getOperationName().str();
    return found;
  }

  /// Parses a function `@f` whose body is `body`, and returns the first OpT.
  template <typename OpT>
  OpT parseInFunction(llvm::StringRef signature, llvm::StringRef body) {
    return parseFirst<OpT>(
        ("func.func @f" + signature + " {\n" + body + "\n}").str());
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  CostModel model;
};

//===----------------------------------------------------------------------===//
// Matmul and attention
//===----------------------------------------------------------------------===//

TEST_F(CostModelTest, MatmulIsTwoMNKOnMatrixUnits) {
  auto matmul = parseInFunction<nn::MatmulOp>(
      "(%a: tensor<16x64xf32>, %b: tensor<64x256xf32>) -> tensor<16x256xf32>",
      R"(%y = nn.matmul %a, %b : (tensor<16x64xf32>, tensor<64x256xf32>) -> tensor<16x256xf32>
         return %y : tensor<16x256xf32>)");
  ASSERT_TRUE(matmul);
  OpCost cost = model.estimate(matmul);
  EXPECT_EQ(cost.flops, 2.0 * 16 * 256 * 64);
  EXPECT_EQ(cost.bytes, 4.0 * (16 * 64 + 64 * 256 + 16 * 256));
  EXPECT_TRUE(cost.usesMatmulUnits);
}

TEST_F(CostModelTest, BatchedMatmulCountsEveryBatchAndBroadcast) {
  // Batch [2, 4] on both sides; rhs read transposed ([.., N, K]).
  auto matmul = parseInFunction<nn::MatmulOp>(
      "(%a: tensor<2x4x16x8xf32>, %b: tensor<2x4x32x8xf32>) -> "
      "tensor<2x4x16x32xf32>",
      R"(%y = nn.matmul %a, %b {transpose_rhs = true} : (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>) -> tensor<2x4x16x32xf32>
         return %y : tensor<2x4x16x32xf32>)");
  ASSERT_TRUE(matmul);
  EXPECT_EQ(model.estimate(matmul).flops, 2.0 * (2 * 4) * 16 * 32 * 8);

  // A rank-2 weight broadcast over the batch of a rank-3 activation.
  auto broadcast = parseInFunction<nn::MatmulOp>(
      "(%a: tensor<3x16x64xf32>, %b: tensor<64x32xf32>) -> tensor<3x16x32xf32>",
      R"(%y = nn.matmul %a, %b : (tensor<3x16x64xf32>, tensor<64x32xf32>) -> tensor<3x16x32xf32>
         return %y : tensor<3x16x32xf32>)");
  ASSERT_TRUE(broadcast);
  OpCost cost = model.estimate(broadcast);
  EXPECT_EQ(cost.flops, 2.0 * 3 * 16 * 32 * 64);
  // The weight is read once, not once per batch.
  EXPECT_EQ(cost.bytes, 4.0 * (3 * 16 * 64 + 64 * 32 + 3 * 16 * 32));
}

TEST_F(CostModelTest, MatmulBiasAddsOnePerResultElement) {
  auto matmul = parseInFunction<nn::MatmulOp>(
      "(%a: tensor<2x16x64xf32>, %b: tensor<64x256xf32>, %c: tensor<256xf32>) "
      "-> tensor<2x16x256xf32>",
      R"(%y = nn.matmul %a, %b, %c : (tensor<2x16x64xf32>, tensor<64x256xf32>, tensor<256xf32>) -> tensor<2x16x256xf32>
         return %y : tensor<2x16x256xf32>)");
  ASSERT_TRUE(matmul);
  OpCost cost = model.estimate(matmul);
  EXPECT_EQ(cost.flops, 2.0 * 2 * 16 * 256 * 64 + 2 * 16 * 256);
  EXPECT_EQ(cost.bytes, 4.0 * (2 * 16 * 64 + 64 * 256 + 256 + 2 * 16 * 256));
}

TEST_F(CostModelTest, MatmulWithVectorLhsAndHalfPrecision) {
  // A rank-1 lhs is a [1, K] row; bf16 elements are two bytes.
  auto matmul = parseInFunction<nn::MatmulOp>(
      "(%a: tensor<64xbf16>, %b: tensor<64x256xbf16>) -> tensor<256xbf16>",
      R"(%y = nn.matmul %a, %b : (tensor<64xbf16>, tensor<64x256xbf16>) -> tensor<256xbf16>
         return %y : tensor<256xbf16>)");
  ASSERT_TRUE(matmul);
  OpCost cost = model.estimate(matmul);
  EXPECT_EQ(cost.flops, 2.0 * 256 * 64);
  EXPECT_EQ(cost.bytes, 2.0 * (64 + 64 * 256 + 256));
}

TEST_F(CostModelTest, AttentionIsTwoMatmulsScaleMaskAndSoftmax) {
  // q [2,4,S=16,D=8], k [2,4,T=32,8], v [2,4,32,Dv=16], boolean mask.
  auto attention = parseInFunction<nn::AttentionOp>(
      "(%q: tensor<2x4x16x8xf32>, %k: tensor<2x4x32x8xf32>, "
      "%v: tensor<2x4x32x16xf32>, %m: tensor<1x1x16x32xi1>) -> "
      "tensor<2x4x16x16xf32>",
      R"(%o = nn.attention %q, %k, %v mask %m {mask_kind = "select", masked_value = -3.40282347E+38 : f32, scale = 0.353553385 : f32} : (tensor<2x4x16x8xf32>, tensor<2x4x32x8xf32>, tensor<2x4x32x16xf32>, tensor<1x1x16x32xi1>) -> tensor<2x4x16x16xf32>
         return %o : tensor<2x4x16x16xf32>)");
  ASSERT_TRUE(attention);
  OpCost cost = model.estimate(attention);
  double scores = 2.0 * 4 * 16 * 32;
  // q.k: 2D; p.v: 2Dv; scale 1; mask 1; softmax 4 + one exp (8).
  EXPECT_EQ(cost.flops, scores * (2 * 8 + 2 * 16 + 1 + 1 + 12));
  // Fused: q, k, v, the i1 mask (a byte each) and the output; no scores.
  EXPECT_EQ(cost.bytes, 4.0 * (2 * 4 * 16 * 8 + 2 * 4 * 32 * 8 +
                               2 * 4 * 32 * 16 + 2 * 4 * 16 * 16) +
                            1.0 * 16 * 32);
  EXPECT_TRUE(cost.usesMatmulUnits);
}

//===----------------------------------------------------------------------===//
// Elementwise, normalisation, reductions, data movement
//===----------------------------------------------------------------------===//

TEST_F(CostModelTest, BroadcastAddIsOnePerResultElement) {
  auto add = parseInFunction<nn::AddOp>(
      "(%x: tensor<2x16x64xf32>, %b: tensor<64xf32>) -> tensor<2x16x64xf32>",
      R"(%y = nn.add %x, %b : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
         return %y : tensor<2x16x64xf32>)");
  ASSERT_TRUE(add);
  OpCost cost = model.estimate(add);
  EXPECT_EQ(cost.flops, 2048.0);
  EXPECT_EQ(cost.bytes, 4.0 * (2048 + 64 + 2048));
  EXPECT_FALSE(cost.usesMatmulUnits);
}

TEST_F(CostModelTest, TranscendentalsCountAsDocumented) {
  // One function per op, so each parse yields the op under test.
  struct Case {
    const char *op;
    double flopsPerElement;
  };
  for (Case c :
       {Case{"nn.relu %x", 1}, Case{"nn.sqrt %x", 1}, Case{"nn.exp %x", 8},
        Case{"nn.tanh %x", 8}, Case{"nn.erf %x", 8}, Case{"nn.sigmoid %x", 11},
        Case{"nn.silu %x", 12}, Case{"nn.gelu %x {approximate = \"none\"}", 12},
        Case{"nn.gelu %x {approximate = \"tanh\"}", 16}}) {
    parseInFunction<func::ReturnOp>(
        "(%x: tensor<4x32xf32>) -> tensor<4x32xf32>",
        (llvm::Twine("%y = ") + c.op +
         " : tensor<4x32xf32>\n return %y : tensor<4x32xf32>")
            .str());
    ASSERT_TRUE(module) << c.op;
    Operation *op = nullptr;
    module->walk([&](Operation *candidate) {
      if (!op && llvm::isa<nn::NNDialect>(candidate->getDialect()))
        op = candidate;
    });
    ASSERT_TRUE(op) << c.op;
    OpCost cost = model.estimate(op);
    EXPECT_EQ(cost.flops, 128 * c.flopsPerElement) << c.op;
    EXPECT_EQ(cost.bytes, 2 * 128 * 4.0) << c.op;
  }
}

TEST_F(CostModelTest, NormalisationsAndSoftmaxCountAsDocumented) {
  const char *signature =
      "(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> "
      "tensor<2x16x64xf32>";
  double elements = 2 * 16 * 64;

  auto layerNorm = parseInFunction<nn::LayerNormOp>(
      signature,
      R"(%y = nn.layer_norm %x weight %g bias %b {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
         return %y : tensor<2x16x64xf32>)");
  ASSERT_TRUE(layerNorm);
  // 5 for mean, centring, variance and scaling; weight and bias one each.
  EXPECT_EQ(model.estimate(layerNorm).flops, 7 * elements);
  EXPECT_EQ(model.estimate(layerNorm).bytes, 4.0 * (2 * elements + 64 + 64));

  auto bareLayerNorm = parseInFunction<nn::LayerNormOp>(
      signature,
      R"(%y = nn.layer_norm %x {axis = 2 : i64, epsilon = 9.99999974E-6 : f32} : (tensor<2x16x64xf32>) -> tensor<2x16x64xf32>
         return %y : tensor<2x16x64xf32>)");
  ASSERT_TRUE(bareLayerNorm);
  EXPECT_EQ(model.estimate(bareLayerNorm).flops, 5 * elements);

  auto rmsNorm = parseInFunction<nn::RmsNormOp>(
      signature,
      R"(%y = nn.rms_norm %x weight %g {epsilon = 9.99999997E-7 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>) -> tensor<2x16x64xf32>
         return %y : tensor<2x16x64xf32>)");
  ASSERT_TRUE(rmsNorm);
  // 3 for square, sum and scaling; the weight one more.
  EXPECT_EQ(model.estimate(rmsNorm).flops, 4 * elements);

  auto softmax = parseInFunction<nn::SoftmaxOp>(
      signature, R"(%y = nn.softmax %x {axis = 2 : i64} : tensor<2x16x64xf32>
                    return %y : tensor<2x16x64xf32>)");
  ASSERT_TRUE(softmax);
  // max, subtract, sum, scale (4) and one exp (8).
  EXPECT_EQ(model.estimate(softmax).flops, 12 * elements);
  EXPECT_EQ(model.estimate(softmax).bytes, 4.0 * 2 * elements);
}

TEST_F(CostModelTest, ReductionIsOnePerInputElement) {
  auto reduce = parseInFunction<nn::ReduceMeanOp>(
      "(%x: tensor<2x16x64xf32>) -> tensor<2x16x1xf32>",
      R"(%m = nn.reduce_mean %x {axes = array<i64: 2>, keepdims = true} : tensor<2x16x64xf32> -> tensor<2x16x1xf32>
         return %m : tensor<2x16x1xf32>)");
  ASSERT_TRUE(reduce);
  OpCost cost = model.estimate(reduce);
  EXPECT_EQ(cost.flops, 2048.0);
  EXPECT_EQ(cost.bytes, 4.0 * (2048 + 32));
}

TEST_F(CostModelTest, DataMovementIsMemoryOnly) {
  auto transpose = parseInFunction<nn::TransposeOp>(
      "(%x: tensor<2x16x4x16xf32>) -> tensor<2x4x16x16xf32>",
      R"(%t = nn.transpose %x {perm = array<i64: 0, 2, 1, 3>} : tensor<2x16x4x16xf32> -> tensor<2x4x16x16xf32>
         return %t : tensor<2x4x16x16xf32>)");
  ASSERT_TRUE(transpose);
  EXPECT_EQ(model.estimate(transpose).flops, 0.0);
  EXPECT_EQ(model.estimate(transpose).bytes, 4.0 * 2 * 2048);

  // i1 is stored as a byte.
  auto cast = parseInFunction<nn::CastOp>(
      "(%m: tensor<2x16xi1>) -> tensor<2x16xf32>",
      R"(%f = nn.cast %m : tensor<2x16xi1> -> tensor<2x16xf32>
         return %f : tensor<2x16xf32>)");
  ASSERT_TRUE(cast);
  EXPECT_EQ(model.estimate(cast).flops, 0.0);
  EXPECT_EQ(model.estimate(cast).bytes, 32.0 * 1 + 32.0 * 4);

  // An embedding reads the rows it selects, not the whole table.
  auto embedding = parseInFunction<nn::EmbeddingOp>(
      "(%wte: tensor<256x64xf32>, %ids: tensor<2x16xi64>) -> "
      "tensor<2x16x64xf32>",
      R"(%h = nn.embedding %wte, %ids : (tensor<256x64xf32>, tensor<2x16xi64>) -> tensor<2x16x64xf32>
         return %h : tensor<2x16x64xf32>)");
  ASSERT_TRUE(embedding);
  EXPECT_EQ(model.estimate(embedding).flops, 0.0);
  EXPECT_EQ(model.estimate(embedding).bytes, 8.0 * 32 + 2 * 4.0 * 2048);

  // So does a slice: the elements it keeps.
  auto slice = parseInFunction<nn::SliceOp>(
      "(%qkv: tensor<2x16x192xf32>) -> tensor<2x16x64xf32>",
      R"(%q = nn.slice %qkv {starts = array<i64: 0, 0, 64>, steps = array<i64: 1, 1, 1>} : tensor<2x16x192xf32> -> tensor<2x16x64xf32>
         return %q : tensor<2x16x64xf32>)");
  ASSERT_TRUE(slice);
  EXPECT_EQ(model.estimate(slice).bytes, 2 * 4.0 * 2048);
}

TEST_F(CostModelTest, OpsWithoutComputeCostNothing) {
  ASSERT_TRUE(parseFirst<nn::MatmulOp>(R"(
    nn.parameter @w : tensor<64x64xf32>
    func.func @f(%x: tensor<4x64xf32>) -> tensor<256xf32> {
      %c = nn.constant dense<1.0> : tensor<4x64xf32>
      %s = zero.shard @w : !zero.shard<tensor<64x64xf32>>
      %t = zero.gather_start %s : !zero.shard<tensor<64x64xf32>>
      %w = zero.gather_wait %t : tensor<64x64xf32>
      %y = nn.matmul %x, %w : (tensor<4x64xf32>, tensor<64x64xf32>) -> tensor<4x64xf32>
      zero.release %w : tensor<64x64xf32>
      %r = nn.reshape %y : tensor<4x64xf32> -> tensor<256xf32>
      return %r : tensor<256xf32>
    })"));
  int costed = 0, free = 0;
  module->walk([&](Operation *op) {
    if (llvm::isa<ModuleOp, func::FuncOp>(op))
      return;
    if (llvm::isa<nn::MatmulOp>(op)) {
      ++costed;
      EXPECT_GT(model.computeSeconds(op), 0.0);
      return;
    }
    ++free;
    OpCost cost = model.estimate(op);
    EXPECT_EQ(cost.flops, 0.0) << op->getName().getStringRef().str();
    EXPECT_EQ(cost.bytes, 0.0) << op->getName().getStringRef().str();
    EXPECT_EQ(model.computeSeconds(op), 0.0)
        << op->getName().getStringRef().str();
  });
  EXPECT_EQ(costed, 1);
  // parameter, constant, shard, gather_start, gather_wait, release, reshape,
  // return.
  EXPECT_EQ(free, 8);
}

//===----------------------------------------------------------------------===//
// Roofline
//===----------------------------------------------------------------------===//

TEST_F(CostModelTest, RooflinePicksTheLargerTerm) {
  // 2*256^3 FLOPs at 1e12 (33.6 us) outweigh 3*256^2*4 bytes at 1e11 (7.9 us).
  auto matmul = parseInFunction<nn::MatmulOp>(
      "(%a: tensor<256x256xf32>, %b: tensor<256x256xf32>) -> "
      "tensor<256x256xf32>",
      R"(%y = nn.matmul %a, %b : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
         return %y : tensor<256x256xf32>)");
  ASSERT_TRUE(matmul);
  double matmulFlopsTime = 2.0 * 256 * 256 * 256 / 1e12;
  double matmulBytesTime = 4.0 * 3 * 256 * 256 / 1e11;
  ASSERT_GT(matmulFlopsTime, matmulBytesTime);
  EXPECT_DOUBLE_EQ(model.computeSeconds(matmul), matmulFlopsTime);
  EXPECT_FALSE(model.estimate(matmul).halfOperands);

  // The same product of bf16 operands (mixed precision) runs at the bf16
  // matrix rate, 1e13: 3.4 us of FLOPs now under 2*256^2*2 + 256^2*4 bytes
  // at 1e11 (5.2 us).
  auto bf16 = parseInFunction<nn::MatmulOp>(
      "(%a: tensor<256x256xbf16>, %b: tensor<256x256xbf16>) -> "
      "tensor<256x256xf32>",
      R"(%y = nn.matmul %a, %b : (tensor<256x256xbf16>, tensor<256x256xbf16>) -> tensor<256x256xf32>
         return %y : tensor<256x256xf32>)");
  ASSERT_TRUE(bf16);
  EXPECT_TRUE(model.estimate(bf16).halfOperands);
  EXPECT_DOUBLE_EQ(model.estimate(bf16).bytes, 8.0 * 256 * 256);
  EXPECT_DOUBLE_EQ(model.computeSeconds(bf16), 8.0 * 256 * 256 / 1e11);
  auto wide = parseInFunction<nn::MatmulOp>(
      "(%a: tensor<4096x1024xbf16>, %b: tensor<1024x256xbf16>) -> "
      "tensor<4096x256xf32>",
      R"(%y = nn.matmul %a, %b : (tensor<4096x1024xbf16>, tensor<1024x256xbf16>) -> tensor<4096x256xf32>
         return %y : tensor<4096x256xf32>)");
  ASSERT_TRUE(wide);
  // 2*4096*256*1024 FLOPs at 1e13 (215 us) over 13.1 MB at 1e11 (131 us).
  EXPECT_DOUBLE_EQ(model.computeSeconds(wide), 2.0 * 4096 * 256 * 1024 / 1e13);
  // (Each parse replaces the module, so this comes last.) An f16 graph's
  // GEMM is a 16-bit one too.
  auto f16 = parseInFunction<nn::MatmulOp>(
      "(%a: tensor<4x4xf16>, %b: tensor<4x4xf16>) -> tensor<4x4xf16>",
      R"(%y = nn.matmul %a, %b : (tensor<4x4xf16>, tensor<4x4xf16>) -> tensor<4x4xf16>
         return %y : tensor<4x4xf16>)");
  ASSERT_TRUE(f16);
  EXPECT_TRUE(model.estimate(f16).halfOperands);

  // An add: 2048 FLOPs at 1e10 (0.2 us) under 3*2048*4 bytes at 1e11 (0.25 us).
  auto add = parseInFunction<nn::AddOp>(
      "(%x: tensor<2048xf32>, %y: tensor<2048xf32>) -> tensor<2048xf32>",
      R"(%z = nn.add %x, %y : (tensor<2048xf32>, tensor<2048xf32>) -> tensor<2048xf32>
         return %z : tensor<2048xf32>)");
  ASSERT_TRUE(add);
  double addFlopsTime = 2048.0 / 1e10;
  double addBytesTime = 4.0 * 3 * 2048 / 1e11;
  ASSERT_LT(addFlopsTime, addBytesTime);
  EXPECT_DOUBLE_EQ(model.computeSeconds(add), addBytesTime);

  // exp runs on the vector units: 8 FLOPs per element at 1e10 dominate.
  // At the matrix-unit rate it would be memory-bound instead.
  auto exp =
      parseInFunction<nn::ExpOp>("(%x: tensor<2048xf32>) -> tensor<2048xf32>",
                                 R"(%z = nn.exp %x : tensor<2048xf32>
         return %z : tensor<2048xf32>)");
  ASSERT_TRUE(exp);
  EXPECT_DOUBLE_EQ(model.computeSeconds(exp), 8.0 * 2048 / 1e10);
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

TEST(CostModelCollectives, AllGatherIsLatencyPlusBusTraffic) {
  CostModel model(roundProfile());
  uint64_t bytes = 64ull << 20;
  EXPECT_DOUBLE_EQ(model.allGatherSeconds(bytes, 8),
                   1e-5 + static_cast<double>(bytes) * 7 / 8 / 1e9);
  EXPECT_DOUBLE_EQ(model.allGatherSeconds(bytes, 2),
                   1e-5 + static_cast<double>(bytes) / 2 / 1e9);
  // One rank already holds everything: no latency either.
  EXPECT_EQ(model.allGatherSeconds(bytes, 1), 0.0);
  EXPECT_EQ(model.reduceScatterSeconds(bytes, 1), 0.0);
  EXPECT_EQ(model.allReduceSeconds(bytes, 1), 0.0);
}

TEST(CostModelCollectives, ReduceScatterAndAllReduce) {
  CostModel model(roundProfile());
  uint64_t bytes = 3ull << 20;
  EXPECT_DOUBLE_EQ(model.reduceScatterSeconds(bytes, 4),
                   1e-5 + static_cast<double>(bytes) * 3 / 4 / 1e9);
  EXPECT_DOUBLE_EQ(model.allReduceSeconds(bytes, 4),
                   1e-5 + static_cast<double>(bytes) * 2 * 3 / 4 / 1e9);
}

//===----------------------------------------------------------------------===//
// Hardware profiles
//===----------------------------------------------------------------------===//

const char *const kNumericFields[] = {
    "matmul_flops_per_second",           "f32_matmul_flops_per_second",
    "vector_flops_per_second",           "memory_bytes_per_second",
    "collective_bytes_per_second",       "collective_latency_seconds",
    "compute_slowdown_during_collective"};

TEST(CostModelProfiles, EveryProfileLoadsWithASourceForEachNumber) {
  std::vector<std::string> names;
  for (llvm::StringRef name : getHardwareProfileNames())
    names.push_back(name.str());
  EXPECT_EQ(names, (std::vector<std::string>{"h200", "h100", "a100", "cpu"}));
  for (const std::string &name : names) {
    llvm::Expected<HardwareProfile> profile = getHardwareProfile(name);
    ASSERT_TRUE(static_cast<bool>(profile))
        << name << ": " << errorText(profile.takeError());
    EXPECT_EQ(profile->name, name);
    EXPECT_FALSE(profile->description.empty()) << name;
    EXPECT_GT(profile->matmulFlopsPerSecond, 0) << name;
    EXPECT_GT(profile->vectorFlopsPerSecond, 0) << name;
    EXPECT_GT(profile->memoryBytesPerSecond, 0) << name;
    EXPECT_GT(profile->collectiveBytesPerSecond, 0) << name;
    EXPECT_GT(profile->collectiveLatencySeconds, 0) << name;
    // Matrix units are the fast path everywhere; bf16 ones at least as
    // fast as f32 ones (equal on the CPU, which widens bf16 to f32).
    EXPECT_GT(profile->matmulFlopsPerSecond, profile->vectorFlopsPerSecond)
        << name;
    EXPECT_GE(profile->matmulFlopsPerSecond, profile->f32MatmulFlopsPerSecond)
        << name;
    for (const char *field : kNumericFields) {
      auto source = profile->sources.find(field);
      ASSERT_NE(source, profile->sources.end()) << name << " " << field;
      EXPECT_FALSE(source->second.empty()) << name << " " << field;
    }
    EXPECT_EQ(profile->sources.size(), std::size(kNumericFields)) << name;
  }
}

TEST(CostModelProfiles, DatasheetFiguresReachTheModel) {
  // The numbers the profiles' sources cite as datasheet peaks.
  llvm::Expected<HardwareProfile> h100 = getHardwareProfile("h100");
  llvm::Expected<HardwareProfile> h200 = getHardwareProfile("h200");
  llvm::Expected<HardwareProfile> a100 = getHardwareProfile("a100");
  ASSERT_TRUE(static_cast<bool>(h100)) << errorText(h100.takeError());
  ASSERT_TRUE(static_cast<bool>(h200)) << errorText(h200.takeError());
  ASSERT_TRUE(static_cast<bool>(a100)) << errorText(a100.takeError());
  EXPECT_EQ(h100->matmulFlopsPerSecond, 989e12);
  EXPECT_EQ(h100->memoryBytesPerSecond, 3.35e12);
  EXPECT_EQ(h200->matmulFlopsPerSecond, 989e12);
  // f32 GEMMs without TF32 run on the FP32 CUDA cores.
  EXPECT_EQ(h100->f32MatmulFlopsPerSecond, 67e12);
  EXPECT_EQ(h200->f32MatmulFlopsPerSecond, 67e12);
  EXPECT_EQ(a100->f32MatmulFlopsPerSecond, 19.5e12);
  EXPECT_EQ(h200->memoryBytesPerSecond, 4.8e12);
  EXPECT_EQ(a100->matmulFlopsPerSecond, 312e12);
  EXPECT_EQ(a100->memoryBytesPerSecond, 2.039e12);
  EXPECT_NE(h100->sources["matmul_flops_per_second"].find("datasheet"),
            std::string::npos);
  llvm::Expected<HardwareProfile> cpu = getHardwareProfile("cpu");
  ASSERT_TRUE(static_cast<bool>(cpu)) << errorText(cpu.takeError());
  EXPECT_NE(cpu->sources["matmul_flops_per_second"].find("Estimate"),
            std::string::npos);
}

TEST(CostModelProfiles, UnknownNameListsTheKnownOnes) {
  llvm::Expected<HardwareProfile> profile = getHardwareProfile("tpu");
  ASSERT_FALSE(static_cast<bool>(profile));
  EXPECT_EQ(errorText(profile.takeError()),
            "unknown hardware profile 'tpu'; known profiles: h200, h100, "
            "a100, cpu");
}

/// A minimal valid profile, for tests to break one field at a time.
llvm::json::Object validProfile() {
  return llvm::json::Object{
      {"name", "x"},
      {"matmul_flops_per_second", 1e12},
      {"f32_matmul_flops_per_second", 1e12},
      {"vector_flops_per_second", 1e11},
      {"memory_bytes_per_second", 1e11},
      {"collective_bytes_per_second", 1e10},
      {"collective_latency_seconds", 0},
      {"compute_slowdown_during_collective", 0},
      {"sources",
       llvm::json::Object{{"matmul_flops_per_second", "a"},
                          {"f32_matmul_flops_per_second", "a"},
                          {"vector_flops_per_second", "b"},
                          {"memory_bytes_per_second", "c"},
                          {"collective_bytes_per_second", "d"},
                          {"collective_latency_seconds", "e"},
                          {"compute_slowdown_during_collective", "f"}}}};
}

std::string parseError(llvm::json::Object profile) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::json::Value(std::move(profile));
  llvm::Expected<HardwareProfile> parsed = parseHardwareProfile(text);
  return parsed ? "parsed" : errorText(parsed.takeError());
}

TEST(CostModelProfiles, MalformedProfilesAreRejected) {
  EXPECT_EQ(parseError(validProfile()), "parsed");

  llvm::json::Object noSource = validProfile();
  noSource.getObject("sources")->erase("collective_latency_seconds");
  EXPECT_EQ(parseError(std::move(noSource)),
            "field 'collective_latency_seconds' has no source");

  llvm::json::Object misspelt = validProfile();
  misspelt.erase("memory_bytes_per_second");
  misspelt["memory_byte_per_second"] = 1e11;
  EXPECT_EQ(parseError(std::move(misspelt)),
            "unknown field 'memory_byte_per_second'");

  llvm::json::Object zeroRate = validProfile();
  zeroRate["collective_bytes_per_second"] = 0;
  EXPECT_EQ(parseError(std::move(zeroRate)),
            "field 'collective_bytes_per_second' must be positive, got 0");

  llvm::json::Object notANumber = validProfile();
  notANumber["memory_bytes_per_second"] = "3.35 TB/s";
  EXPECT_EQ(parseError(std::move(notANumber)),
            "field 'memory_bytes_per_second' must be a number");

  // A profile written before the overlap cost existed is refused by name,
  // not read as free overlap.
  llvm::json::Object noSlowdown = validProfile();
  noSlowdown.erase("compute_slowdown_during_collective");
  EXPECT_EQ(parseError(std::move(noSlowdown)),
            "field 'compute_slowdown_during_collective' is missing (every "
            "profile gives each rate, with its source)");

  llvm::json::Object negativeSlowdown = validProfile();
  negativeSlowdown["compute_slowdown_during_collective"] = -0.5;
  EXPECT_EQ(parseError(std::move(negativeSlowdown)),
            "field 'compute_slowdown_during_collective' must be "
            "non-negative, got -0.5");

  llvm::Expected<HardwareProfile> truncated = parseHardwareProfile("{");
  ASSERT_FALSE(static_cast<bool>(truncated));
  EXPECT_NE(errorText(truncated.takeError()).find("malformed JSON"),
            std::string::npos);
}

TEST(CostModelProfiles, GpuProfilesChargeNothingForOverlap) {
  // Their plans stay as they were before the field existed.
  for (llvm::StringRef name : getHardwareProfileNames()) {
    llvm::Expected<HardwareProfile> profile = getHardwareProfile(name);
    ASSERT_TRUE(static_cast<bool>(profile)) << errorText(profile.takeError());
    EXPECT_EQ(profile->computeSlowdownDuringCollective, 0) << name.str();
  }
}

TEST(CostModelOverlap, ComputeBesideACollectivePaysTheSlowdown) {
  HardwareProfile profile = *getHardwareProfile("cpu");
  profile.computeSlowdownDuringCollective = 0;
  CostModel free(profile);
  EXPECT_EQ(free.computeSecondsBesideCollective(3e-3, 5e-3), 3e-3);

  // s = 0.5: half speed while 4 ms of collectives run. 1 ms of compute
  // ends inside them (2 ms); 3 ms outlasts them: 2 ms of it in the 4 ms,
  // then 1 ms alone, so 3 + 0.5 * 4 = 5 ms.
  profile.computeSlowdownDuringCollective = 0.5;
  CostModel half(profile);
  EXPECT_DOUBLE_EQ(half.computeSecondsBesideCollective(1e-3, 4e-3), 2e-3);
  EXPECT_DOUBLE_EQ(half.computeSecondsBesideCollective(3e-3, 4e-3), 5e-3);
  EXPECT_EQ(half.computeSecondsBesideCollective(3e-3, 0), 3e-3);

  // s = 1: compute waits the collectives out (overlap gains nothing); an
  // op that computes nothing is not charged.
  profile.computeSlowdownDuringCollective = 1;
  CostModel serial(profile);
  EXPECT_DOUBLE_EQ(serial.computeSecondsBesideCollective(1e-3, 4e-3), 5e-3);
  EXPECT_EQ(serial.computeSecondsBesideCollective(0, 4e-3), 0);
}

TEST(CostModelProfiles, CalibratedProfileFileReplacesTheEmbeddedOne) {
  llvm::SmallString<128> path;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("calibrated", "json", path));
  llvm::json::Object calibrated = validProfile();
  calibrated["name"] = "cpu";
  calibrated["compute_slowdown_during_collective"] = 0.9;
  {
    std::error_code error;
    llvm::raw_fd_ostream file(path, error);
    ASSERT_FALSE(error);
    file << llvm::json::Value(std::move(calibrated));
  }
  llvm::Expected<HardwareProfile> loaded =
      loadHardwareProfile(Hardware::Cpu, path);
  ASSERT_TRUE(static_cast<bool>(loaded)) << errorText(loaded.takeError());
  EXPECT_EQ(loaded->computeSlowdownDuringCollective, 0.9);
  EXPECT_EQ(loaded->matmulFlopsPerSecond, 1e12);

  llvm::Expected<HardwareProfile> wrongName =
      loadHardwareProfile(Hardware::H200, path);
  ASSERT_FALSE(static_cast<bool>(wrongName));
  EXPECT_EQ(errorText(wrongName.takeError()),
            "hardware profile '" + path.str().str() +
                "' describes 'cpu', not the --hardware 'h200' it is to "
                "calibrate");
  llvm::sys::fs::remove(path);

  llvm::Expected<HardwareProfile> missing =
      loadHardwareProfile(Hardware::Cpu, "/nonexistent/profile.json");
  ASSERT_FALSE(static_cast<bool>(missing));
  EXPECT_NE(errorText(missing.takeError())
                .find("cannot read the hardware profile "
                      "'/nonexistent/profile.json'"),
            std::string::npos);

  llvm::Expected<HardwareProfile> embedded =
      loadHardwareProfile(Hardware::H200, "");
  ASSERT_TRUE(static_cast<bool>(embedded)) << errorText(embedded.takeError());
  EXPECT_EQ(embedded->name, "h200");
}

} // namespace
