//===- DsConfig.cpp - a DeepSpeed config as zcc's flags -------------------===//
//
// The keys and their meanings are DeepSpeed's (its configuration JSON
// reference); where zplan has the same knob under another unit, the value
// is converted, and where it has none, the reason is the warning's text.
//
//===----------------------------------------------------------------------===//

#include "compiler/DsConfig.h"

#include "compiler/Errors.h"
#include "runtime/support/NumberText.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cmath>

using namespace zplan;

namespace {

/// Why a DeepSpeed key that does not change a zplan plan is ignored.
struct IgnoredKey {
  llvm::StringLiteral key;
  llvm::StringLiteral why;
};

constexpr IgnoredKey kIgnoredZeroKeys[] = {
    {"stage3_max_live_parameters",
     "--memory-budget bounds a rank's bytes, gathered copies included"},
    {"stage3_max_reuse_distance",
     "the schedule keeps or gathers again by liveness, under --memory-budget"},
    {"overlap_comm",
     "always: gathers and reductions run on the comm queue beside compute"},
    {"contiguous_gradients", "always: a group's gradient is one flat buffer"},
    {"sub_group_size", "the optimizer steps one parameter group at a time"},
    {"stage3_gather_16bit_weights_on_model_save",
     "zrun export writes whole weights"},
    {"gather_16bit_weights_on_model_save", "zrun export writes whole weights"},
    {"allgather_partitions", "stage 1/2's: parameters gather by group"},
    {"allgather_bucket_size", "stage 1/2's: parameters gather by group"},
    {"reduce_scatter", "always: gradients are reduce-scattered"},
    {"round_robin_gradients", "stage 1/2's"},
    {"elastic_checkpoint", "checkpoints reshard at load (zrun train --resume)"},
    {"ignore_unused_parameters",
     "the compiler knows which parameters a step reads"},
};

constexpr IgnoredKey kIgnoredTopKeys[] = {
    {"scheduler",
     "the learning-rate schedule is zrun train's --warmup, --lr-schedule and "
     "--min-lr"},
    {"steps_per_print", "zrun train --log-every"},
    {"wall_clock_breakdown", "zrun run --trace writes a timeline"},
    {"zero_allow_untested_optimizer", "the optimizer is compiled"},
    {"prescale_gradients",
     "gradients are scaled once, after the reduction, by 1 / (K * N)"},
    {"gradient_predivide_factor",
     "gradients are scaled once, after the reduction, by 1 / (K * N)"},
};

/// An object's entries in key order (llvm::json::Object's own order is a
/// hash table's): the notes come out the same every run.
std::vector<std::pair<llvm::StringRef, const llvm::json::Value *>>
sortedEntries(const llvm::json::Object &object) {
  std::vector<std::pair<llvm::StringRef, const llvm::json::Value *>> entries;
  for (const auto &entry : object)
    entries.emplace_back(llvm::StringRef(entry.first), &entry.second);
  llvm::sort(entries,
             [](const auto &a, const auto &b) { return a.first < b.first; });
  return entries;
}

class Reader {
public:
  Reader(llvm::StringRef name, int64_t worldSize, DsConfig &out)
      : name(name.str()), worldSize(worldSize), out(out) {}

  llvm::Error readTop(const llvm::json::Object &top) {
    bool sawZero = false;
    for (const auto &[key, valuePointer] : sortedEntries(top)) {
      const llvm::json::Value &value = *valuePointer;
      llvm::Error error = llvm::Error::success();
      if (key == "zero_optimization") {
        sawZero = true;
        error = readZero(value);
      } else if (key == "bf16") {
        error = readBf16(value);
      } else if (key == "fp16") {
        error = readFp16(value);
      } else if (key == "communication_data_type") {
        error = readCommunicationType(value);
      } else if (key == "optimizer") {
        error = readOptimizer(value);
      } else if (key == "gradient_accumulation_steps") {
        error = readCount(key, value, 1, [&](int64_t steps) {
          out.train.gradAccum = static_cast<uint64_t>(steps);
          note(key, steps, "zrun train --grad-accum " + std::to_string(steps));
        });
      } else if (key == "gradient_clipping") {
        error = readNumber(key, value, [&](double clip) {
          out.train.clipGradNorm = clip;
          note(key, clip,
               clip == 0
                   ? "no clipping"
                   : "zrun train --clip-grad-norm " + shortestDecimal(clip));
        });
      } else if (key == "train_micro_batch_size_per_gpu") {
        error = readCount(key, value, 1, [&](int64_t rows) {
          out.microBatch = rows;
          note(key, rows,
               "input_ids' first dimension (--input-shape input_ids=" +
                   std::to_string(rows) + "xT)");
        });
      } else if (key == "train_batch_size") {
        error =
            readCount(key, value, 1, [&](int64_t rows) { trainBatch = rows; });
      } else {
        ignore("", key, kIgnoredTopKeys);
      }
      if (error)
        return error;
    }
    if (!sawZero)
      return fail("has no zero_optimization: zplan is ZeRO stage 3 "
                  "(\"zero_optimization\": {\"stage\": 3})");
    return checkTrainBatch();
  }

private:
  std::string name;
  int64_t worldSize;
  DsConfig &out;
  std::optional<int64_t> trainBatch;

  llvm::Error fail(const llvm::Twine &message) {
    return makeError(name + ": " + message);
  }

  template <typename T>
  void note(llvm::StringRef key, const T &value, const std::string &meaning) {
    std::string valueText;
    if constexpr (std::is_same_v<T, double>)
      valueText = shortestDecimal(value);
    else if constexpr (std::is_integral_v<T>)
      valueText = std::to_string(value);
    else
      valueText = std::string(value);
    out.mapped.push_back(key.str() + " " + valueText + ": " + meaning);
  }

  /// "PREFIXKEY: why", the why from `known` or the generic one.
  void ignore(llvm::StringRef prefix, llvm::StringRef key,
              llvm::ArrayRef<IgnoredKey> known = {}) {
    std::string why = "not a setting zplan has (nothing changes)";
    for (const IgnoredKey &entry : known)
      if (entry.key == key)
        why = entry.why.str();
    out.ignored.push_back((prefix + key + ": " + why).str());
  }

  /// "auto": left to zcc's and zrun's defaults.
  bool isAuto(llvm::StringRef key, const llvm::json::Value &value) {
    std::optional<llvm::StringRef> text = value.getAsString();
    if (!text || *text != "auto")
      return false;
    out.mapped.push_back(key.str() + " auto: zcc's (or zrun's) default");
    return true;
  }

  template <typename Use>
  llvm::Error readCount(llvm::StringRef key, const llvm::json::Value &value,
                        int64_t least, Use use) {
    if (isAuto(key, value))
      return llvm::Error::success();
    std::optional<int64_t> count = value.getAsInteger();
    if (!count || *count < least)
      return fail(key + " must be an integer >= " + llvm::Twine(least));
    use(*count);
    return llvm::Error::success();
  }

  template <typename Use>
  llvm::Error readNumber(llvm::StringRef key, const llvm::json::Value &value,
                         Use use) {
    if (isAuto(key, value))
      return llvm::Error::success();
    std::optional<double> number = value.getAsNumber();
    if (!number || !std::isfinite(*number) || *number < 0)
      return fail(key + " must be a number >= 0");
    use(*number);
    return llvm::Error::success();
  }

  /// enabled: true, false or "auto" (absent: false).
  llvm::Expected<std::optional<bool>>
  readEnabled(llvm::StringRef section, const llvm::json::Value &value) {
    const llvm::json::Object *object = value.getAsObject();
    if (!object)
      return fail(section + " must be an object");
    const llvm::json::Value *enabled = object->get("enabled");
    for (const auto &entry : sortedEntries(*object))
      if (entry.first != "enabled")
        ignore((section + ".").str(), entry.first);
    if (!enabled)
      return std::optional<bool>(false);
    std::string key = (section + ".enabled").str();
    if (isAuto(key, *enabled))
      return std::optional<bool>();
    std::optional<bool> flag = enabled->getAsBoolean();
    if (!flag)
      return fail(key + " must be true, false or \"auto\"");
    return flag;
  }

  llvm::Error readBf16(const llvm::json::Value &value) {
    llvm::Expected<std::optional<bool>> enabled = readEnabled("bf16", value);
    if (!enabled)
      return enabled.takeError();
    if (!*enabled)
      return llvm::Error::success();
    if (**enabled) {
      out.paramDtype = "bf16";
      note("bf16.enabled", "true", "--param-dtype bf16");
      // DeepSpeed reduces gradients in the parameters' type unless
      // communication_data_type says otherwise.
      if (!out.reduceDtype)
        out.reduceDtype = "bf16";
    } else {
      note("bf16.enabled", "false", "--param-dtype fp32");
      out.paramDtype = "fp32";
    }
    return llvm::Error::success();
  }

  llvm::Error readFp16(const llvm::json::Value &value) {
    llvm::Expected<std::optional<bool>> enabled = readEnabled("fp16", value);
    if (!enabled)
      return enabled.takeError();
    if (*enabled && **enabled)
      return fail("fp16.enabled: zplan has no fp16 (loss scaling); bf16 "
                  "mixed precision is \"bf16\": {\"enabled\": true}");
    return llvm::Error::success();
  }

  llvm::Error readCommunicationType(const llvm::json::Value &value) {
    llvm::StringRef key = "communication_data_type";
    if (isAuto(key, value))
      return llvm::Error::success();
    std::optional<llvm::StringRef> text = value.getAsString();
    std::optional<std::string> dtype =
        !text ? std::nullopt
              : llvm::StringSwitch<std::optional<std::string>>(text->lower())
                    .Cases("fp32", "float32", "float", std::string("fp32"))
                    .Cases("bf16", "bfloat16", std::string("bf16"))
                    .Default(std::nullopt);
    if (!dtype)
      return fail(key + " must be \"fp32\" or \"bf16\"");
    out.reduceDtype = *dtype;
    note(key, *text, "--reduce-dtype " + *dtype);
    return llvm::Error::success();
  }

  llvm::Error readOptimizer(const llvm::json::Value &value) {
    const llvm::json::Object *object = value.getAsObject();
    if (!object)
      return fail("optimizer must be an object");
    std::optional<llvm::StringRef> type =
        object->get("type") ? object->get("type")->getAsString() : std::nullopt;
    if (!type || !(type->equals_insensitive("adamw") ||
                   type->equals_insensitive("adam"))) {
      std::string given = type ? "\"" + type->str() + "\"" : "(none)";
      return fail("optimizer.type " + given +
                  ": zplan's is AdamW (\"AdamW\", or \"Adam\" with its "
                  "default adam_w_mode true)");
    }
    out.optimizer = "adamw";
    note("optimizer.type", *type, "--optimizer adamw");
    for (const auto &[key, entry] : sortedEntries(*object)) {
      if (key == "type")
        continue;
      if (key != "params") {
        ignore("optimizer.", key);
        continue;
      }
      const llvm::json::Object *params = entry->getAsObject();
      if (!params)
        return fail("optimizer.params must be an object");
      if (llvm::Error error = readOptimizerParams(*params))
        return error;
    }
    return llvm::Error::success();
  }

  llvm::Error readOptimizerParams(const llvm::json::Object &params) {
    for (const auto &[key, valuePointer] : sortedEntries(params)) {
      const llvm::json::Value &value = *valuePointer;
      std::string path = ("optimizer.params." + key).str();
      llvm::Error error = llvm::Error::success();
      if (key == "lr") {
        error = readNumber(path, value, [&](double lr) {
          out.train.lr = lr;
          note(path, lr, "zrun train --lr " + shortestDecimal(lr));
        });
      } else if (key == "eps") {
        error = readNumber(path, value, [&](double eps) {
          out.train.eps = eps;
          note(path, eps, "zrun train --eps " + shortestDecimal(eps));
        });
      } else if (key == "weight_decay") {
        error = readNumber(path, value, [&](double decay) {
          out.train.weightDecay = decay;
          note(path, decay,
               "zrun train --weight-decay " + shortestDecimal(decay));
        });
      } else if (key == "betas") {
        if (isAuto(path, value))
          continue;
        const llvm::json::Array *betas = value.getAsArray();
        std::optional<double> beta1, beta2;
        if (betas && betas->size() == 2) {
          beta1 = (*betas)[0].getAsNumber();
          beta2 = (*betas)[1].getAsNumber();
        }
        if (!beta1 || !beta2 || *beta1 < 0 || *beta1 >= 1 || *beta2 < 0 ||
            *beta2 >= 1)
          return fail(path + " must be [beta1, beta2], each in [0, 1)");
        out.train.beta1 = *beta1;
        out.train.beta2 = *beta2;
        out.mapped.push_back(
            path + " [" + shortestDecimal(*beta1) + ", " +
            shortestDecimal(*beta2) + "]: zrun train --beta1 " +
            shortestDecimal(*beta1) + " --beta2 " + shortestDecimal(*beta2));
      } else if (key == "adam_w_mode") {
        std::optional<bool> decoupled = value.getAsBoolean();
        if (!decoupled)
          return fail(path + " must be true or false");
        if (!*decoupled)
          return fail(path + " false (Adam with L2 regularization): zplan's "
                             "optimizer is AdamW (decoupled weight decay)");
        note(path, "true", "AdamW");
      } else {
        ignore("optimizer.params.", key);
      }
      if (error)
        return error;
    }
    return llvm::Error::success();
  }

  /// offload_optimizer and offload_param: --offload-optimizer and
  /// --offload-params (device), --offload-dir (nvme_path; zplan keeps one
  /// file per rank, so both must name the same directory).
  llvm::Error readOffload(llvm::StringRef key, const llvm::json::Value &value) {
    const llvm::json::Object *object = value.getAsObject();
    if (!object)
      return fail(key + " must be an object");
    std::optional<llvm::StringRef> device =
        object->get("device") ? object->get("device")->getAsString()
                              : std::optional<llvm::StringRef>("none");
    if (!device || (*device != "none" && *device != "cpu" && *device != "nvme"))
      return fail(key + ".device must be \"none\", \"cpu\" or \"nvme\"");
    bool optimizer = key.ends_with("offload_optimizer");
    (optimizer ? out.offloadOptimizer : out.offloadParams) = device->str();
    const char *flag = optimizer ? "--offload-optimizer " : "--offload-params ";
    note((key + ".device").str(), *device,
         *device == "none" ? std::string("no offload (on the device)")
                           : flag + device->str());
    for (const auto &[field, entryPointer] : sortedEntries(*object)) {
      const llvm::json::Value &entry = *entryPointer;
      std::string path = (key + "." + field).str();
      if (field == "device")
        continue;
      if (field == "nvme_path") {
        std::optional<llvm::StringRef> dir = entry.getAsString();
        if (!dir)
          return fail(path + " must be a string");
        if (*device == "nvme") {
          if (!out.offloadDir.empty() && out.offloadDir != *dir)
            return fail(path + " \"" + *dir +
                        "\" differs from the other "
                        "offload's nvme_path \"" +
                        out.offloadDir +
                        "\": zplan keeps one file per rank, in one directory");
          out.offloadDir = dir->str();
          note(path, *dir, "--offload-dir " + dir->str());
        } else {
          out.ignored.push_back(path + ": the device is not nvme");
        }
      } else if (field == "pin_memory") {
        out.ignored.push_back(path + ": zplan's CUDA backend decides how it "
                                     "holds host memory (nothing changes)");
      } else {
        ignore((key + ".").str(), field);
      }
    }
    return llvm::Error::success();
  }

  llvm::Error readZero(const llvm::json::Value &value) {
    const llvm::json::Object *zero = value.getAsObject();
    if (!zero)
      return fail("zero_optimization must be an object");
    const llvm::json::Value *stage = zero->get("stage");
    std::optional<int64_t> stageNumber =
        stage ? stage->getAsInteger() : std::nullopt;
    if (!stageNumber || *stageNumber != 3) {
      std::string given = stageNumber ? std::to_string(*stageNumber)
                          : stage     ? "(not an integer)"
                                      : "(absent)";
      return fail("zero_optimization.stage " + given +
                  ": zplan plans ZeRO stage 3 (parameters, gradients and "
                  "optimizer state sharded); set \"stage\": 3");
    }
    note("zero_optimization.stage", int64_t(3), "ZeRO-3 (what zplan plans)");
    for (const auto &[key, entryPointer] : sortedEntries(*zero)) {
      const llvm::json::Value &entry = *entryPointer;
      std::string path = ("zero_optimization." + key).str();
      llvm::Error error = llvm::Error::success();
      if (key == "stage")
        continue;
      if (key == "stage3_param_persistence_threshold") {
        error = readCount(path, entry, 0, [&](int64_t elements) {
          out.persistenceThreshold = elements;
          note(path, elements,
               "--persistence-threshold " + std::to_string(elements));
        });
      } else if (key == "stage3_prefetch_bucket_size") {
        error = readCount(path, entry, 0, [&](int64_t elements) {
          out.prefetchBucketElements = elements;
          note(path, elements,
               elements == 0
                   ? std::string("--policy jit (no prefetch)")
                   : "--max-in-flight-bytes " + std::to_string(elements) +
                         " x the gathered element's bytes (fp32 4, bf16 2)");
        });
      } else if (key == "reduce_bucket_size") {
        error = readCount(path, entry, 1, [&](int64_t elements) {
          out.reduceBucketElements = elements;
          note(path, elements,
               "--bucket-size " + std::to_string(elements * 4) +
                   " (4-byte gradient elements; a group is one reduction)");
        });
      } else if (key == "offload_param" || key == "offload_optimizer") {
        error = readOffload(path, entry);
      } else {
        ignore("zero_optimization.", key, kIgnoredZeroKeys);
      }
      if (error)
        return error;
    }
    return llvm::Error::success();
  }

  /// DeepSpeed's own check: train_batch_size = micro batch x accumulation x
  /// ranks, when all three are given.
  llvm::Error checkTrainBatch() {
    if (!trainBatch)
      return llvm::Error::success();
    if (!out.microBatch || !out.train.gradAccum) {
      out.mapped.push_back("train_batch_size " + std::to_string(*trainBatch) +
                           ": checked when train_micro_batch_size_per_gpu "
                           "and gradient_accumulation_steps are given");
      return llvm::Error::success();
    }
    int64_t product = *out.microBatch *
                      static_cast<int64_t>(*out.train.gradAccum) * worldSize;
    if (product != *trainBatch)
      return fail("train_batch_size " + llvm::Twine(*trainBatch) +
                  " is not train_micro_batch_size_per_gpu " +
                  llvm::Twine(*out.microBatch) +
                  " x gradient_accumulation_steps " +
                  llvm::Twine(*out.train.gradAccum) + " x --world-size " +
                  llvm::Twine(worldSize) + " = " + llvm::Twine(product));
    out.mapped.push_back("train_batch_size " + std::to_string(*trainBatch) +
                         ": micro batch x accumulation x ranks, checked");
    return llvm::Error::success();
  }
};

} // namespace

llvm::Expected<DsConfig> zplan::parseDsConfig(llvm::StringRef text,
                                              llvm::StringRef name,
                                              int64_t worldSize) {
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(text);
  if (!parsed)
    return makeError(name +
                     ": not JSON: " + llvm::toString(parsed.takeError()));
  const llvm::json::Object *top = parsed->getAsObject();
  if (!top)
    return makeError(name + ": a DeepSpeed config is a JSON object");
  DsConfig config;
  if (llvm::Error error = Reader(name, worldSize, config).readTop(*top))
    return std::move(error);
  return config;
}

llvm::Expected<DsConfig> zplan::readDsConfig(llvm::StringRef path,
                                             int64_t worldSize) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return makeError("cannot read --ds-config '" + path +
                     "': " + file.getError().message());
  return parseDsConfig((*file)->getBuffer(), path, worldSize);
}

namespace {

/// The flag `name` takes the config's value `fromConfig` unless the user
/// gave it as `current`, another value: an error naming both.
llvm::Error agree(const std::set<std::string> &given, llvm::StringRef name,
                  const std::string &current, const std::string &fromConfig,
                  llvm::StringRef path, llvm::StringRef key) {
  if (!given.count(name.str()) || current == fromConfig)
    return llvm::Error::success();
  return makeError("--" + name + " " + current + " disagrees with " + path +
                   "'s " + key + " (" + fromConfig + ")");
}

} // namespace

llvm::Error zplan::applyDsConfig(const DsConfig &config, llvm::StringRef path,
                                 const std::set<std::string> &given,
                                 CompileOptions &options,
                                 std::vector<std::string> &warnings) {
  if (config.persistenceThreshold) {
    if (llvm::Error error =
            agree(given, "persistence-threshold",
                  std::to_string(options.persistenceThreshold),
                  std::to_string(*config.persistenceThreshold), path,
                  "zero_optimization.stage3_param_persistence_threshold"))
      return error;
    options.persistenceThreshold = *config.persistenceThreshold;
  }
  if (config.paramDtype) {
    if (llvm::Error error = agree(given, "param-dtype", options.paramDtype,
                                  *config.paramDtype, path, "bf16.enabled"))
      return error;
    options.paramDtype = *config.paramDtype;
    options.import.parameters.mastersFromBf16 = options.paramDtype == "bf16";
    if (!given.count("compute-dtype"))
      options.computeDtype = options.paramDtype;
  }
  if (config.reduceDtype) {
    if (llvm::Error error = agree(given, "reduce-dtype", options.reduceDtype,
                                  *config.reduceDtype, path,
                                  "communication_data_type (or bf16)"))
      return error;
    options.reduceDtype = *config.reduceDtype;
  }
  llvm::StringRef prefetchKey = "zero_optimization.stage3_prefetch_bucket_size";
  if (config.prefetchBucketElements && *config.prefetchBucketElements == 0) {
    // DeepSpeed's 0 turns prefetching off: gather just before use.
    if (llvm::Error error = agree(given, "policy", spell(options.policy).str(),
                                  "jit", path, prefetchKey))
      return error;
    options.policy = SchedulePolicy::Jit;
  } else if (config.prefetchBucketElements) {
    int64_t bytes =
        *config.prefetchBucketElements * (options.paramDtype == "bf16" ? 2 : 4);
    if (llvm::Error error = agree(given, "max-in-flight-bytes",
                                  std::to_string(options.maxInFlightBytes),
                                  std::to_string(bytes), path, prefetchKey))
      return error;
    options.maxInFlightBytes = bytes;
  }
  if (config.reduceBucketElements) {
    int64_t bytes = *config.reduceBucketElements * 4;
    if (llvm::Error error =
            agree(given, "bucket-size", std::to_string(options.bucketBytes),
                  std::to_string(bytes), path,
                  "zero_optimization.reduce_bucket_size"))
      return error;
    options.bucketBytes = bytes;
  }
  warnings = config.ignored;
  // offload_param applies to every mode: the shards are read by inference
  // and generation too.
  if (config.offloadParams) {
    if (llvm::Error error =
            agree(given, "offload-params", options.offloadParams,
                  *config.offloadParams, path,
                  "zero_optimization.offload_param.device"))
      return error;
    options.offloadParams = *config.offloadParams;
  }
  bool optimizerNvme =
      trains(options.mode) && config.offloadOptimizer.value_or("") == "nvme";
  if (!config.offloadDir.empty() &&
      (config.offloadParams.value_or("") == "nvme" || optimizerNvme)) {
    if (llvm::Error error =
            agree(given, "offload-dir", options.offloadDir, config.offloadDir,
                  path, "zero_optimization's nvme_path"))
      return error;
    options.offloadDir = config.offloadDir;
  }
  if (!trains(options.mode)) {
    if (config.optimizer || config.train.any() || config.microBatch ||
        config.offloadOptimizer.value_or("none") != "none")
      warnings.push_back("the training settings (optimizer, offload, batch, "
                         "accumulation, clipping) apply to --mode train only");
    return llvm::Error::success();
  }
  if (config.optimizer) {
    if (llvm::Error error = agree(given, "optimizer", options.optimizer,
                                  *config.optimizer, path, "optimizer.type"))
      return error;
    options.optimizer = *config.optimizer;
  }
  if (config.offloadOptimizer) {
    if (llvm::Error error =
            agree(given, "offload-optimizer", options.offloadOptimizer,
                  *config.offloadOptimizer, path,
                  "zero_optimization.offload_optimizer.device"))
      return error;
    options.offloadOptimizer = *config.offloadOptimizer;
  }
  if (config.microBatch) {
    auto ids = options.import.inputShapes.find("input_ids");
    if (ids == options.import.inputShapes.end() || ids->second.empty() ||
        ids->second[0] != *config.microBatch)
      return makeError(path + "'s train_micro_batch_size_per_gpu " +
                       llvm::Twine(*config.microBatch) +
                       " is input_ids' first dimension: give --input-shape "
                       "input_ids=" +
                       llvm::Twine(*config.microBatch) + "xT");
  }
  options.trainDefaults = config.train;
  return llvm::Error::success();
}
