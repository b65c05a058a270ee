//===- DsConfigTest.cpp - zcc --ds-config's reading of DeepSpeed keys -----===//
//
// compiler/DsConfig.h on configs as strings: the values each key maps to,
// "auto", the keys ignored by name, the settings refused with the key
// named, and applyDsConfig's flags (a flag given must agree).
// test/zcc/ds-config.test checks the plans and runs they make.
//
//===----------------------------------------------------------------------===//

#include "compiler/DsConfig.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace zplan;

namespace {

constexpr const char *kZero3 = R"("zero_optimization": {"stage": 3})";

DsConfig parse(const std::string &body, int64_t worldSize = 1) {
  llvm::Expected<DsConfig> config =
      parseDsConfig("{" + body + "}", "ds.json", worldSize);
  EXPECT_TRUE(static_cast<bool>(config))
      << (config ? "" : llvm::toString(config.takeError()));
  return config ? std::move(*config) : DsConfig();
}

std::string errorOf(const std::string &body, int64_t worldSize = 1) {
  llvm::Expected<DsConfig> config =
      parseDsConfig("{" + body + "}", "ds.json", worldSize);
  if (config)
    return "";
  return llvm::toString(config.takeError());
}

std::string errorText(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "";
}

bool contains(const std::vector<std::string> &lines, const std::string &text) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string &line) {
    return line.find(text) != std::string::npos;
  });
}

TEST(DsConfig, ZeroKeysInZplanUnits) {
  DsConfig config = parse(R"("zero_optimization": {"stage": 3,
      "stage3_param_persistence_threshold": 1e5,
      "stage3_prefetch_bucket_size": 5e7, "reduce_bucket_size": 5e8})");
  EXPECT_EQ(config.persistenceThreshold, 100000);
  EXPECT_EQ(config.prefetchBucketElements, 50000000);
  EXPECT_EQ(config.reduceBucketElements, 500000000);
  EXPECT_FALSE(config.paramDtype);
  EXPECT_FALSE(config.train.any());
}

TEST(DsConfig, AutoLeavesTheDefault) {
  DsConfig config = parse(std::string(kZero3) + R"(,
      "bf16": {"enabled": "auto"}, "gradient_accumulation_steps": "auto",
      "optimizer": {"type": "AdamW", "params": {"lr": "auto",
                                                "betas": "auto"}})");
  EXPECT_FALSE(config.paramDtype);
  EXPECT_FALSE(config.train.any());
  EXPECT_EQ(config.optimizer, "adamw");
  EXPECT_TRUE(contains(config.mapped, "optimizer.params.lr auto"));
}

TEST(DsConfig, Bf16ReducesInBf16UnlessCommunicationSaysFp32) {
  DsConfig bf16 = parse(std::string(kZero3) + R"(, "bf16": {"enabled": true})");
  EXPECT_EQ(bf16.paramDtype, "bf16");
  EXPECT_EQ(bf16.reduceDtype, "bf16");
  // communication_data_type wins, whichever key comes first.
  DsConfig fp32Reduce =
      parse(std::string(kZero3) + R"(, "bf16": {"enabled": true},
          "communication_data_type": "fp32")");
  EXPECT_EQ(fp32Reduce.paramDtype, "bf16");
  EXPECT_EQ(fp32Reduce.reduceDtype, "fp32");
}

TEST(DsConfig, RunSettingsBecomeTrainDefaults) {
  DsConfig config = parse(std::string(kZero3) + R"(,
      "gradient_accumulation_steps": 4, "gradient_clipping": 0.5,
      "train_micro_batch_size_per_gpu": 2, "train_batch_size": 16,
      "optimizer": {"type": "Adam", "params": {"lr": 2e-4,
          "betas": [0.8, 0.99], "eps": 1e-6, "weight_decay": 0.01,
          "adam_w_mode": true, "torch_adam": true}})",
                          /*worldSize=*/2);
  EXPECT_EQ(config.train.gradAccum, 4u);
  EXPECT_EQ(config.train.clipGradNorm, 0.5);
  EXPECT_EQ(config.train.lr, 2e-4);
  EXPECT_EQ(config.train.beta1, 0.8);
  EXPECT_EQ(config.train.beta2, 0.99);
  EXPECT_EQ(config.train.eps, 1e-6);
  EXPECT_EQ(config.train.weightDecay, 0.01);
  EXPECT_EQ(config.microBatch, 2);
  EXPECT_EQ(config.optimizer, "adamw");
  EXPECT_TRUE(contains(config.ignored, "optimizer.params.torch_adam: not a"));
}

TEST(DsConfig, EveryOtherKeyIsNamedAsIgnored) {
  DsConfig config = parse(std::string(R"("zero_optimization": {"stage": 3,
      "overlap_comm": true, "zero_quantized_weights": false},
      "flops_profiler": {"enabled": false}, "bf16": {"enabled": false,
      "immediate_grad_update": true})"));
  EXPECT_TRUE(
      contains(config.ignored, "zero_optimization.overlap_comm: always"));
  EXPECT_TRUE(contains(config.ignored,
                       "zero_optimization.zero_quantized_weights: not a"));
  EXPECT_TRUE(contains(config.ignored, "flops_profiler: not a"));
  EXPECT_TRUE(contains(config.ignored, "bf16.immediate_grad_update: not a"));
  // bf16 off is said, as fp32.
  EXPECT_EQ(config.paramDtype, "fp32");
}

TEST(DsConfig, RefusedSettingsNameTheirKey) {
  EXPECT_NE(errorOf(R"("zero_optimization": {"stage": 1})")
                .find("zero_optimization.stage 1: zplan plans ZeRO stage 3"),
            std::string::npos);
  EXPECT_NE(
      errorOf(R"("train_batch_size": 8)").find("has no zero_optimization"),
      std::string::npos);
  EXPECT_NE(errorOf(std::string(kZero3) +
                    R"(, "optimizer": {"type": "Adam",
                        "params": {"adam_w_mode": false}})")
                .find("optimizer.params.adam_w_mode false"),
            std::string::npos);
  EXPECT_NE(errorOf(std::string(kZero3) +
                    R"(, "optimizer": {"type": "AdamW",
                        "params": {"betas": [0.9, 1.5]}})")
                .find("optimizer.params.betas must be [beta1, beta2]"),
            std::string::npos);
  EXPECT_NE(errorOf(std::string(kZero3) + R"(, "gradient_clipping": -1)")
                .find("gradient_clipping must be a number >= 0"),
            std::string::npos);
  EXPECT_NE(
      errorOf(std::string(kZero3) + R"(, "communication_data_type": "fp16")")
          .find("communication_data_type must be"),
      std::string::npos);
  EXPECT_NE(errorOf(R"("zero_optimization": {"stage": 3,
                       "offload_param": {"device": "nvme", "nvme_path": "/a"},
                       "offload_optimizer": {"device": "nvme",
                                             "nvme_path": "/b"}})")
                .find("offload_param.nvme_path \"/a\" differs from the "
                      "other offload's nvme_path \"/b\""),
            std::string::npos);
  EXPECT_NE(errorOf(R"("zero_optimization": {"stage": 3,
                       "offload_optimizer": {"device": "disk"}})")
                .find("offload_optimizer.device must be \"none\", \"cpu\" "
                      "or \"nvme\""),
            std::string::npos);
  EXPECT_NE(
      errorOf(std::string(kZero3) + R"(, "gradient_accumulation_steps": 0)")
          .find("gradient_accumulation_steps must be an integer >= 1"),
      std::string::npos);
  llvm::Expected<DsConfig> array = parseDsConfig("[1]", "ds.json", 1);
  ASSERT_FALSE(static_cast<bool>(array));
  EXPECT_NE(llvm::toString(array.takeError()).find("a JSON object"),
            std::string::npos);
}

} // namespace

namespace {

TEST(ApplyDsConfig, SetsTheFlagsAFlagGivenMustAgree) {
  DsConfig config = parse(R"("zero_optimization": {"stage": 3,
      "stage3_param_persistence_threshold": 0,
      "stage3_prefetch_bucket_size": 1000, "reduce_bucket_size": 2000},
      "bf16": {"enabled": true})");
  CompileOptions options;
  options.mode = CompileMode::Train;
  options.import.inputShapes["input_ids"] = {2, 8};
  std::vector<std::string> warnings;
  ASSERT_EQ(errorText(applyDsConfig(config, "ds.json", {}, options, warnings)),
            "");
  EXPECT_EQ(options.persistenceThreshold, 0);
  EXPECT_EQ(options.paramDtype, "bf16");
  EXPECT_EQ(options.computeDtype, "bf16");
  EXPECT_EQ(options.reduceDtype, "bf16");
  EXPECT_TRUE(options.import.parameters.mastersFromBf16);
  EXPECT_EQ(options.maxInFlightBytes, 2000); // bf16: 2 bytes an element
  EXPECT_EQ(options.bucketBytes, 8000);      // 4 bytes a gradient element

  CompileOptions disagreeing;
  disagreeing.persistenceThreshold = 7;
  EXPECT_EQ(
      errorText(applyDsConfig(config, "ds.json", {"persistence-threshold"},
                              disagreeing, warnings)),
      "--persistence-threshold 7 disagrees with ds.json's "
      "zero_optimization.stage3_param_persistence_threshold (0)");
  // Not given: the config's value replaces the default silently.
  CompileOptions defaults;
  defaults.persistenceThreshold = 7;
  EXPECT_EQ(errorText(applyDsConfig(config, "ds.json", {}, defaults, warnings)),
            "");
  EXPECT_EQ(defaults.persistenceThreshold, 0);
}

TEST(ApplyDsConfig, OffloadOptimizerIsTheOffloadFlags) {
  DsConfig config = parse(R"("zero_optimization": {"stage": 3,
      "offload_optimizer": {"device": "nvme", "nvme_path": "/scratch",
                            "pin_memory": true, "buffer_count": 4}})");
  EXPECT_EQ(config.offloadOptimizer, "nvme");
  EXPECT_EQ(config.offloadDir, "/scratch");
  EXPECT_TRUE(contains(config.mapped, "offload_optimizer.device nvme: "
                                      "--offload-optimizer nvme"));
  EXPECT_TRUE(contains(config.ignored, "offload_optimizer.pin_memory"));
  EXPECT_TRUE(contains(config.ignored, "offload_optimizer.buffer_count"));
  CompileOptions options;
  options.mode = CompileMode::Train;
  std::vector<std::string> warnings;
  ASSERT_EQ(errorText(applyDsConfig(config, "ds.json", {}, options, warnings)),
            "");
  EXPECT_EQ(options.offloadOptimizer, "nvme");
  EXPECT_EQ(options.offloadDir, "/scratch");

  CompileOptions given;
  given.mode = CompileMode::Train;
  given.offloadOptimizer = "cpu";
  EXPECT_EQ(errorText(applyDsConfig(config, "ds.json", {"offload-optimizer"},
                                    given, warnings)),
            "--offload-optimizer cpu disagrees with ds.json's "
            "zero_optimization.offload_optimizer.device (nvme)");
}

TEST(ApplyDsConfig, OffloadParamIsTheOffloadParamsFlag) {
  DsConfig config = parse(R"("zero_optimization": {"stage": 3,
      "offload_param": {"device": "nvme", "nvme_path": "/scratch",
                        "pin_memory": true}})");
  EXPECT_EQ(config.offloadParams, "nvme");
  EXPECT_EQ(config.offloadDir, "/scratch");
  EXPECT_TRUE(contains(config.mapped, "offload_param.device nvme: "
                                      "--offload-params nvme"));
  EXPECT_TRUE(contains(config.ignored, "offload_param.pin_memory"));
  // The shards are read by every mode: generation maps it too.
  CompileOptions options;
  options.mode = CompileMode::Generate;
  std::vector<std::string> warnings;
  ASSERT_EQ(errorText(applyDsConfig(config, "ds.json", {}, options, warnings)),
            "");
  EXPECT_EQ(options.offloadParams, "nvme");
  EXPECT_EQ(options.offloadDir, "/scratch");

  CompileOptions given;
  given.offloadParams = "cpu";
  EXPECT_EQ(errorText(applyDsConfig(config, "ds.json", {"offload-params"},
                                    given, warnings)),
            "--offload-params cpu disagrees with ds.json's "
            "zero_optimization.offload_param.device (nvme)");
}

TEST(ApplyDsConfig, TrainingSettingsOnlyWhereThePlanTrains) {
  DsConfig config = parse(std::string(kZero3) + R"(,
      "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2)");
  CompileOptions infer;
  infer.mode = CompileMode::Infer;
  std::vector<std::string> warnings;
  ASSERT_EQ(errorText(applyDsConfig(config, "ds.json", {}, infer, warnings)),
            "");
  EXPECT_FALSE(infer.trainDefaults.any());
  EXPECT_TRUE(contains(warnings, "apply to --mode train only"));

  CompileOptions train;
  train.mode = CompileMode::Train;
  train.import.inputShapes["input_ids"] = {2, 8};
  EXPECT_EQ(errorText(applyDsConfig(config, "ds.json", {}, train, warnings)),
            "ds.json's train_micro_batch_size_per_gpu 4 is input_ids' first "
            "dimension: give --input-shape input_ids=4xT");
  train.import.inputShapes["input_ids"] = {4, 8};
  ASSERT_EQ(errorText(applyDsConfig(config, "ds.json", {}, train, warnings)),
            "");
  EXPECT_EQ(train.trainDefaults.gradAccum, 2u);
}

} // namespace
