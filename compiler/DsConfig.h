//===- DsConfig.h - a DeepSpeed config as zcc's flags ---------------------===//
//
// `zcc --ds-config ds_config.json` reads the config a DeepSpeed ZeRO-3 user
// already has and maps each key that has a meaning in a compiled plan to the
// zcc flag that says the same thing, with DeepSpeed's units converted
// (elements to bytes), or to a run-time default the plan carries for
// `zrun train` (plan/TrainDefaults.h). Every key is accounted for: mapped
// (a note naming the flag and value), ignored with the reason (a named
// warning), or refused (an error naming the key): a stage other than 3,
// fp16, an optimizer other than AdamW. "auto" (the Hugging Face Trainer's
// placeholder) leaves a key to zcc's and zrun's defaults. docs/ds-config.md
// lists the keys.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_DSCONFIG_H
#define ZPLAN_COMPILER_DSCONFIG_H

#include "compiler/Options.h"
#include "compiler/plan/TrainDefaults.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace zplan {

/// What a config says, as zcc's flags; each unset field: the config does
/// not say (or says "auto").
struct DsConfig {
  /// zero_optimization.stage3_param_persistence_threshold (elements):
  /// --persistence-threshold.
  std::optional<int64_t> persistenceThreshold;
  /// zero_optimization.stage3_prefetch_bucket_size (elements):
  /// --max-in-flight-bytes, at the gathered parameters' bytes per element.
  std::optional<int64_t> prefetchBucketElements;
  /// zero_optimization.reduce_bucket_size (elements): --bucket-size, at 4
  /// bytes an element (a group's f32 gradient is one reduction).
  std::optional<int64_t> reduceBucketElements;
  /// bf16.enabled: --param-dtype bf16; communication_data_type (or bf16's
  /// default, the parameters' type): --reduce-dtype.
  std::optional<std::string> paramDtype;
  std::optional<std::string> reduceDtype;
  /// optimizer.type AdamW (or Adam, whose adam_w_mode is on by default):
  /// --optimizer adamw.
  std::optional<std::string> optimizer;
  /// zero_optimization.offload_optimizer.device and
  /// zero_optimization.offload_param.device: --offload-optimizer,
  /// --offload-params; their nvme_path (one directory): --offload-dir.
  std::optional<std::string> offloadOptimizer;
  std::optional<std::string> offloadParams;
  std::string offloadDir;
  /// train_micro_batch_size_per_gpu: input_ids' first dimension.
  std::optional<int64_t> microBatch;
  /// gradient_accumulation_steps, gradient_clipping, optimizer.params.
  TrainDefaults train;
  /// One line per key mapped: "KEY VALUE: --flag VALUE".
  std::vector<std::string> mapped;
  /// One line per key ignored: "KEY: why".
  std::vector<std::string> ignored;
};

/// Parses the config `text` (`name` for messages). A malformed file, a value
/// of the wrong type, or a setting zplan cannot honour is an error naming
/// the key; `worldSize` checks train_batch_size (= micro batch x
/// gradient_accumulation_steps x ranks, as DeepSpeed checks it).
llvm::Expected<DsConfig> parseDsConfig(llvm::StringRef text,
                                       llvm::StringRef name, int64_t worldSize);

/// parseDsConfig of the file at `path`.
llvm::Expected<DsConfig> readDsConfig(llvm::StringRef path, int64_t worldSize);

/// Sets in `options` (zcc's flags as parsed) what `config` (read from
/// `path`) says. A flag the user gave (`given`: its name, e.g.
/// "persistence-threshold") whose value differs is an error naming the flag
/// and the key. The training settings apply to a training --mode only: a
/// micro batch must equal input_ids' first dimension there. `warnings`
/// gets config.ignored and, for a mode without training, that its training
/// settings do not apply.
llvm::Error applyDsConfig(const DsConfig &config, llvm::StringRef path,
                          const std::set<std::string> &given,
                          CompileOptions &options,
                          std::vector<std::string> &warnings);

} // namespace zplan

#endif // ZPLAN_COMPILER_DSCONFIG_H
