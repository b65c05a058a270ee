//===- MergeProgramsTest.cpp - two imports of one model become one module -===//
//
// mergePrograms (compiler/generate/MergePrograms.h) on hand-written
// modules: the functions and module-level symbols of the second move into
// the first, each parameter stays declared once; a parameter whose type or
// data differs, a parameter only one module declares, and a symbol both
// declare are refused by name, with both modules left as they were.
//
//===----------------------------------------------------------------------===//

#include "compiler/generate/MergePrograms.h"
#include "compiler/Registration.h"
#include "dialects/nn/NNDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;
using namespace zplan;

namespace {

constexpr const char *kTraining = R"mlir(
nn.parameter @w : tensor<4x4xf32>
nn.parameter @b {external_file = "m.onnx.data", external_offset = 0 : i64, external_length = 16 : i64} : tensor<4xf32>
func.func @forward(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  return %x : tensor<1x4xf32>
}
func.func @train_micro_step(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  return %x : tensor<1x4xf32>
}
)mlir";

constexpr const char *kGeneration = R"mlir(
nn.parameter @w : tensor<4x4xf32>
nn.parameter @b {external_file = "m.onnx.data", external_offset = 0 : i64, external_length = 16 : i64} : tensor<4xf32>
nn.kv_cache @cache.0.key : tensor<1x1x8x4xf32>
func.func @generate_begin() {
  return
}
func.func @decode(%x: tensor<1x4xf32>) -> tensor<1x4xf32> {
  return %x : tensor<1x4xf32>
}
)mlir";

class MergeProgramsTest : public ::testing::Test {
protected:
  MergeProgramsTest() {
    DialectRegistry registry;
    registerAllDialects(registry);
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  OwningOpRef<ModuleOp> parse(const std::string &text) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
    EXPECT_TRUE(module) << text;
    return module;
  }

  /// The generation module with the first `from` replaced by `to`.
  OwningOpRef<ModuleOp> parseGenerationWith(llvm::StringRef from,
                                            llvm::StringRef to) {
    std::string text = kGeneration;
    text.replace(text.find(from.str()), from.size(), to.str());
    return parse(text);
  }

  /// The merge's error, "" on success.
  std::string merge(ModuleOp into, ModuleOp from) {
    llvm::Error error = mergePrograms(into, "training", from, "generation");
    return error ? llvm::toString(std::move(error)) : "";
  }

  static std::vector<std::string> symbols(ModuleOp module) {
    std::vector<std::string> names;
    for (Operation &op : *module.getBody())
      if (auto name = op.getAttrOfType<StringAttr>("sym_name"))
        names.push_back(name.str());
    return names;
  }

  MLIRContext context;
};

TEST_F(MergeProgramsTest, MovesProgramsAndStateKeepsOneParameterSet) {
  auto training = parse(kTraining);
  auto generation = parse(kGeneration);
  ASSERT_EQ(merge(*training, *generation), "");
  EXPECT_EQ(
      symbols(*training),
      (std::vector<std::string>{"w", "b", "forward", "train_micro_step",
                                "cache.0.key", "generate_begin", "decode"}));
  EXPECT_TRUE(succeeded(mlir::verify(*training)));
  // What stays behind is the generation import's parameter declarations.
  EXPECT_EQ(symbols(*generation), (std::vector<std::string>{"w", "b"}));
}

TEST_F(MergeProgramsTest, RefusesAParameterWhoseTypeDiffers) {
  auto training = parse(kTraining);
  auto generation = parseGenerationWith("tensor<4x4xf32>", "tensor<4x8xf32>");
  EXPECT_EQ(merge(*training, *generation),
            "parameter 'w' differs between the training and generation "
            "imports: {sym_name = \"w\", type = tensor<4x4xf32>} vs "
            "{sym_name = \"w\", type = tensor<4x8xf32>}");
  // Nothing moved.
  EXPECT_EQ(symbols(*training).size(), 4u);
}

TEST_F(MergeProgramsTest, RefusesAParameterWhoseDataDiffers) {
  auto training = parse(kTraining);
  auto generation =
      parseGenerationWith("external_offset = 0", "external_offset = 64");
  std::string error = merge(*training, *generation);
  EXPECT_EQ(error.rfind("parameter 'b' differs between the training and "
                        "generation imports: ",
                        0),
            0u)
      << error;
}

TEST_F(MergeProgramsTest, RefusesAParameterOnlyOneDeclares) {
  auto training = parse(kTraining);
  auto generation = parseGenerationWith("nn.parameter @w", "nn.parameter @v");
  EXPECT_EQ(merge(*training, *generation),
            "parameter 'w' is declared by the training import but not by the "
            "generation import");
  EXPECT_EQ(merge(*generation, *training),
            "parameter 'v' is declared by the training import but not by the "
            "generation import");
}

TEST_F(MergeProgramsTest, RefusesASymbolBothDeclare) {
  auto training = parse(kTraining);
  auto generation = parseGenerationWith("@decode", "@forward");
  EXPECT_EQ(merge(*training, *generation),
            "symbol 'forward' is declared by both the training and generation "
            "imports");
  EXPECT_EQ(symbols(*training).size(), 4u);
}

} // namespace
