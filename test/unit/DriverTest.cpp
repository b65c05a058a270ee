//===- DriverTest.cpp - zcc option parsing --------------------------------===//
//
// The command-line values zcc parses itself: byte sizes, --input-shape, and
// the combinations validateOptions rejects before any work.
//
//===----------------------------------------------------------------------===//

#include "compiler/Driver.h"
#include "compiler/analysis/CostModel.h"
#include "compiler/import/OnnxImporter.h"

#include <gtest/gtest.h>

using namespace zplan;

namespace {

std::string errorText(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "";
}

TEST(ParseByteSize, BinaryAndDecimalUnits) {
  EXPECT_EQ(*parseByteSize("4096"), 4096u);
  EXPECT_EQ(*parseByteSize("64MiB"), 64ull << 20);
  EXPECT_EQ(*parseByteSize("16GiB"), 16ull << 30);
  EXPECT_EQ(*parseByteSize("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*parseByteSize("2GB"), 2000000000ull);
  EXPECT_EQ(*parseByteSize("512kib"), 512ull << 10);
}

TEST(ParseByteSize, RejectsMalformed) {
  for (const char *bad : {"", "GiB", "12XB", "-1MiB", "1..2GiB"}) {
    llvm::Expected<uint64_t> size = parseByteSize(bad);
    ASSERT_FALSE(static_cast<bool>(size)) << bad;
    EXPECT_NE(errorText(size.takeError()).find("malformed byte size"),
              std::string::npos);
  }
}

TEST(ParseInputShape, BindsNamedShapes) {
  ImportOptions options;
  ASSERT_EQ(errorText(parseInputShape("input_ids=2x16", options)), "");
  ASSERT_EQ(errorText(parseInputShape("scale=", options)), "");
  EXPECT_EQ(options.inputShapes["input_ids"], (std::vector<int64_t>{2, 16}));
  EXPECT_TRUE(options.inputShapes["scale"].empty());
}

TEST(ParseInputShape, RejectsMalformed) {
  ImportOptions options;
  EXPECT_NE(errorText(parseInputShape("input_ids", options)).find("NAME=D0xD1"),
            std::string::npos);
  EXPECT_NE(errorText(parseInputShape("=2x16", options)).find("malformed"),
            std::string::npos);
  EXPECT_NE(errorText(parseInputShape("ids=2x0", options)).find("'0'"),
            std::string::npos);
  EXPECT_NE(errorText(parseInputShape("ids=2xq", options)).find("'q'"),
            std::string::npos);
  ASSERT_EQ(errorText(parseInputShape("ids=2", options)), "");
  EXPECT_NE(errorText(parseInputShape("ids=3", options)).find("twice"),
            std::string::npos);
}

TEST(ValidateOptions, GenerationShapes) {
  CompileOptions options;
  options.mode = CompileMode::Generate;
  options.batch = 2;
  options.maxSeqLength = 16;
  // P defaults to L / 2.
  EXPECT_EQ(errorText(validateOptions(options)), "");
  options.promptLength = 15;
  EXPECT_EQ(errorText(validateOptions(options)), "");
  options.promptLength = 16;
  EXPECT_EQ(errorText(validateOptions(options)),
            "--prompt-len must be at least 1 and less than --max-seq-len, got "
            "--prompt-len 16 and --max-seq-len 16");
  options.promptLength = 0;
  EXPECT_NE(errorText(validateOptions(options)).find("got --prompt-len 0"),
            std::string::npos);
  options.promptLength.reset();
  options.maxSeqLength = 1;
  EXPECT_NE(errorText(validateOptions(options))
                .find("--max-seq-len must be at least 2"),
            std::string::npos);
  options.maxSeqLength = 16;
  options.batch = 0;
  EXPECT_EQ(errorText(validateOptions(options)),
            "--batch must be at least 1, got 0");
  options.batch = 1;
  options.import.inputShapes["input_ids"] = {1, 8};
  EXPECT_NE(errorText(validateOptions(options))
                .find("--input-shape does not apply to --mode generate"),
            std::string::npos);
  options.import.inputShapes.clear();
  options.maxSeqLength.reset();
  EXPECT_NE(errorText(validateOptions(options))
                .find("--mode generate needs --max-seq-len"),
            std::string::npos);
  // The generation flags belong to --mode generate only.
  options.mode = CompileMode::Infer;
  EXPECT_NE(
      errorText(validateOptions(options)).find("apply to --mode generate only"),
      std::string::npos);
  options.batch.reset();
  EXPECT_EQ(errorText(validateOptions(options)), "");
}

TEST(ValidateOptions, RejectsBadValues) {
  CompileOptions options;
  EXPECT_EQ(errorText(validateOptions(options)), "");
  options.worldSize = 0;
  EXPECT_NE(errorText(validateOptions(options)).find("--world-size"),
            std::string::npos);
  options.worldSize = kMaxWorldSize + 1;
  EXPECT_NE(errorText(validateOptions(options)).find("is too large"),
            std::string::npos);
  options.worldSize = kMaxWorldSize;
  EXPECT_EQ(errorText(validateOptions(options)), "");
  options.worldSize = 8;
  options.dumps = {"ir", "everything"};
  EXPECT_NE(
      errorText(validateOptions(options)).find("unknown --dump 'everything'"),
      std::string::npos);
  options.dumps = {"ir"};
  options.mode = CompileMode::Generate;
  EXPECT_NE(
      errorText(validateOptions(options)).find("--mode generate needs --batch"),
      std::string::npos);
  options.mode = CompileMode::Train;
  EXPECT_EQ(errorText(validateOptions(options)), "");
  options.optimizer = "lion";
  EXPECT_NE(errorText(validateOptions(options))
                .find("unknown --optimizer 'lion'; expected adamw or sgd"),
            std::string::npos);
  options.optimizer = "sgd";
  options.loss = "output:";
  EXPECT_NE(errorText(validateOptions(options))
                .find("unknown --loss 'output:'; expected causal-lm, "
                      "output:NAME, grpo or dpo"),
            std::string::npos);
  options.loss = "output:loss";
  EXPECT_EQ(errorText(validateOptions(options)), "");
  options.mode = CompileMode::Infer;
  options.maxInFlight = 0;
  EXPECT_NE(errorText(validateOptions(options))
                .find("--max-in-flight must be at least 1, got 0"),
            std::string::npos);
  options.maxInFlight = 1;
  options.persistenceThreshold = -1;
  EXPECT_NE(errorText(validateOptions(options))
                .find("--persistence-threshold must not be negative, got -1"),
            std::string::npos);
  options.persistenceThreshold = 0;
  EXPECT_EQ(errorText(validateOptions(options)), "");
}

TEST(ParseInputShapes, RefusesTheSameNameTwice) {
  ImportOptions options;
  EXPECT_EQ(errorText(parseInputShapes({"ids=2x3", "mask=2x3"}, options)), "");
  ImportOptions again;
  EXPECT_EQ(
      errorText(parseInputShapes({"ids=2x3", "mask=1", "ids=2x3"}, again)),
      "--input-shape gives 'ids' twice; bind each input once");
}

TEST(ParseByteSize, RefusesSizesPast63Bits) {
  llvm::Expected<uint64_t> size = parseByteSize("99999999999999999999TiB");
  ASSERT_FALSE(static_cast<bool>(size));
  EXPECT_NE(errorText(size.takeError()).find("too large"), std::string::npos);
  EXPECT_EQ(*parseByteSize("8388607TiB"), 8388607ull << 40);
}

// --mode: one mode, or train combined with generate or infer (either
// order); anything else is one message naming what is wrong.
TEST(ParseCompileMode, SingleAndCombined) {
  auto parsed = [](llvm::StringRef text) -> std::string {
    llvm::Expected<CompileMode> mode = parseCompileMode(text);
    if (!mode)
      return "error: " + errorText(mode.takeError());
    return spell(*mode).str();
  };
  EXPECT_EQ(parsed("infer"), "infer");
  EXPECT_EQ(parsed("train"), "train");
  EXPECT_EQ(parsed("generate"), "generate");
  EXPECT_EQ(parsed("train,generate"), "train,generate");
  EXPECT_EQ(parsed("generate,train"), "train,generate");
  EXPECT_EQ(parsed("train,infer"), "train,infer");
  EXPECT_EQ(parsed("infer,train"), "train,infer");
  EXPECT_EQ(parsed("train,train"),
            "error: --mode 'train,train' names train twice");
  EXPECT_EQ(parsed("generate,infer"),
            "error: --mode 'generate,infer' is not a combination zcc "
            "compiles; combined modes are train,generate and train,infer");
  EXPECT_EQ(parsed("train,generate,infer"),
            "error: --mode 'train,generate,infer' is not a combination zcc "
            "compiles; combined modes are train,generate and train,infer");
  for (llvm::StringRef unknown : {"serve", "train,serve", "train,", ""})
    EXPECT_EQ(parsed(unknown), "error: unknown --mode '" + unknown.str() +
                                   "'; expected infer, train, generate, "
                                   "logprobs, train,generate or train,infer");
  EXPECT_TRUE(trains(CompileMode::TrainGenerate));
  EXPECT_TRUE(generates(CompileMode::TrainGenerate));
  EXPECT_TRUE(trains(CompileMode::TrainInfer));
  EXPECT_FALSE(generates(CompileMode::TrainInfer));
  EXPECT_FALSE(trains(CompileMode::Generate));
}

// train,generate takes the training micro-batch shape and the generation
// shapes together; train,infer takes no generation flag.
TEST(ValidateOptions, CombinedModes) {
  CompileOptions options;
  options.mode = CompileMode::TrainGenerate;
  options.import.inputShapes["input_ids"] = {2, 16};
  EXPECT_EQ(errorText(validateOptions(options)),
            "--mode train,generate needs --batch B (the number of sequences "
            "generated together)");
  options.batch = 3;
  options.maxSeqLength = 16;
  EXPECT_EQ(errorText(validateOptions(options)), "");
  options.mode = CompileMode::TrainInfer;
  EXPECT_EQ(errorText(validateOptions(options)),
            "--batch, --prompt-len and --max-seq-len apply to --mode generate "
            "only");
  options.batch.reset();
  options.maxSeqLength.reset();
  EXPECT_EQ(errorText(validateOptions(options)), "");
}

// Each enum's spellings come from one table; every value has exactly one,
// and every hardware spelling names an embedded profile.
TEST(Spellings, OnePerValue) {
  EXPECT_EQ(spell(SchedulePolicy::Default), "default");
  EXPECT_EQ(spell(SchedulePolicy::Jit), "jit");
  EXPECT_EQ(spell(CompileMode::Generate), "generate");
  EXPECT_EQ(spell(Hardware::H200), "h200");
  std::vector<llvm::StringRef> names;
  for (const HardwareSpelling &spelling : getHardwareSpellings()) {
    names.push_back(spelling.name);
    llvm::Expected<HardwareProfile> profile =
        getHardwareProfile(spelling.hardware);
    ASSERT_TRUE(static_cast<bool>(profile)) << errorText(profile.takeError());
    EXPECT_EQ(profile->name, spelling.name.str());
  }
  EXPECT_EQ(names,
            std::vector<llvm::StringRef>(getHardwareProfileNames().begin(),
                                         getHardwareProfileNames().end()));
}

} // namespace
