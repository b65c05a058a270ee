//===- Options.cpp - what zcc is asked to do ------------------------------===//
//
// The parsers and checks of CompileOptions run before any work (zcc's main
// parses, compileModel() validates first), so a bad flag is refused with
// nothing written. Each message names the flag and the value it got.
//
//===----------------------------------------------------------------------===//

#include "compiler/Options.h"

#include "compiler/Errors.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/ErrorHandling.h"

#include <cmath>
#include <tuple>

using namespace zplan;

llvm::Expected<uint64_t> zplan::parseByteSize(llvm::StringRef text) {
  llvm::StringRef trimmed = text.trim();
  size_t unitStart = trimmed.find_first_not_of("0123456789.");
  llvm::StringRef number = trimmed.substr(0, unitStart);
  llvm::StringRef unit =
      unitStart == llvm::StringRef::npos ? "" : trimmed.substr(unitStart);
  std::optional<double> scale =
      llvm::StringSwitch<std::optional<double>>(unit.lower())
          .Cases("", "b", 1.0)
          .Case("kib", 1024.0)
          .Case("mib", 1024.0 * 1024)
          .Case("gib", 1024.0 * 1024 * 1024)
          .Case("tib", 1024.0 * 1024 * 1024 * 1024)
          .Case("kb", 1e3)
          .Case("mb", 1e6)
          .Case("gb", 1e9)
          .Case("tb", 1e12)
          .Default(std::nullopt);
  double value = 0;
  if (number.empty() || number.getAsDouble(value) || !scale)
    return makeError("malformed byte size '" + text +
                     "': expected a number with an optional unit "
                     "(B, KiB, MiB, GiB, TiB, KB, MB, GB, TB), e.g. 16GiB");
  // Converting a double at or past 2^63 to an integer is undefined; no
  // budget or bucket comes near it.
  double bytes = std::round(value * *scale);
  if (!(bytes < 0x1p63))
    return makeError("byte size '" + text +
                     "' is too large (at most 2^63-1 B)");
  return static_cast<uint64_t>(bytes);
}

static constexpr CompileModeSpelling kCompileModeSpellings[] = {
    {CompileMode::Infer, "infer", "one forward program"},
    {CompileMode::Train, "train", "micro-steps and an optimizer step"},
    {CompileMode::Generate, "generate", "prefill and decode programs"},
    {CompileMode::TrainGenerate, "train,generate",
     "training and generation programs over one set of shards"},
    {CompileMode::TrainInfer, "train,infer",
     "training and forward programs over one set of shards"},
    {CompileMode::Logprobs, "logprobs",
     "forward and per-token log-probs programs, frozen (a reference model)"},
};

llvm::ArrayRef<CompileModeSpelling> zplan::getCompileModeSpellings() {
  return kCompileModeSpellings;
}

llvm::StringRef zplan::spell(CompileMode mode) {
  for (const CompileModeSpelling &spelling : kCompileModeSpellings)
    if (spelling.mode == mode)
      return spelling.name;
  llvm_unreachable("every CompileMode has a spelling");
}

llvm::Expected<CompileMode> zplan::parseCompileMode(llvm::StringRef text) {
  for (const CompileModeSpelling &spelling : kCompileModeSpellings)
    if (spelling.name == text)
      return spelling.mode;
  llvm::SmallVector<llvm::StringRef> words;
  text.split(words, ',');
  llvm::StringSet<> seen;
  for (llvm::StringRef word : words) {
    bool known = llvm::any_of(kCompileModeSpellings,
                              [&](const CompileModeSpelling &spelling) {
                                return spelling.name == word;
                              });
    if (!known || word.contains(','))
      return makeError("unknown --mode '" + text +
                       "'; expected infer, train, generate, logprobs, "
                       "train,generate or train,infer");
    if (!seen.insert(word).second)
      return makeError("--mode '" + text + "' names " + word + " twice");
  }
  // The same set in the other order.
  if (words.size() == 2 && words[1] == "train")
    return parseCompileMode((words[1] + "," + words[0]).str());
  return makeError("--mode '" + text +
                   "' is not a combination zcc compiles; combined modes are "
                   "train,generate and train,infer");
}

bool zplan::trains(CompileMode mode) {
  return mode == CompileMode::Train || mode == CompileMode::TrainGenerate ||
         mode == CompileMode::TrainInfer;
}

bool zplan::generates(CompileMode mode) {
  return mode == CompileMode::Generate || mode == CompileMode::TrainGenerate;
}

bool zplan::isRlLoss(llvm::StringRef loss) {
  return loss == "grpo" || loss == "dpo";
}

llvm::Error zplan::parseInputShapes(llvm::ArrayRef<std::string> texts,
                                    ImportOptions &options) {
  llvm::StringSet<> names;
  for (const std::string &text : texts) {
    llvm::StringRef name = llvm::StringRef(text).split('=').first.trim();
    if (!name.empty() && !names.insert(name).second)
      return makeError("--input-shape gives '" + name +
                       "' twice; bind each input once");
    if (llvm::Error error = parseInputShape(text, options))
      return error;
  }
  return llvm::Error::success();
}

llvm::Error zplan::parseParameterFlags(llvm::ArrayRef<std::string> ties,
                                       llvm::ArrayRef<std::string> unties,
                                       llvm::ArrayRef<std::string> freeze,
                                       llvm::ArrayRef<std::string> train,
                                       ImportOptions &options) {
  ParameterOptions &parameters = options.parameters;
  for (const std::string &text : ties)
    if (llvm::Error error = parseTie(text, parameters))
      return error;
  for (auto [flag, texts, target] :
       {std::make_tuple("--untie", unties, &parameters.untie),
        std::make_tuple("--freeze", freeze, &parameters.freeze),
        std::make_tuple("--train", train, &parameters.train)})
    for (const std::string &text : texts) {
      if (text.empty())
        return makeError(
            llvm::Twine(flag) + " needs a value (an initializer name" +
            (target == &parameters.untie ? "" : " or a glob") + ")");
      target->push_back(text);
    }
  return llvm::Error::success();
}

/// The generation shapes of docs/generation.md section 0: B >= 1, 1 <= P < L,
/// and flags only --mode generate reads are refused elsewhere. With
/// train,generate, --input-shape binds the training micro-batch.
static llvm::Error validateGenerateOptions(const CompileOptions &options) {
  if (!generates(options.mode)) {
    if (options.batch || options.promptLength || options.maxSeqLength)
      return makeError("--batch, --prompt-len and --max-seq-len apply to "
                       "--mode generate only");
    return llvm::Error::success();
  }
  if (!trains(options.mode) && !options.import.inputShapes.empty())
    return makeError("--input-shape does not apply to --mode generate: the "
                     "shapes come from --batch, --prompt-len and "
                     "--max-seq-len");
  if (!options.batch)
    return makeError("--mode " + spell(options.mode) +
                     " needs --batch B (the number of sequences generated "
                     "together)");
  if (*options.batch < 1)
    return makeError("--batch must be at least 1, got " +
                     llvm::Twine(*options.batch));
  if (!options.maxSeqLength)
    return makeError("--mode " + spell(options.mode) +
                     " needs --max-seq-len L (prompt and generated tokens "
                     "together, the KV cache length)");
  int64_t length = *options.maxSeqLength;
  if (!options.promptLength && length < 2)
    return makeError("--max-seq-len must be at least 2 (a prompt token and "
                     "a generated one), got " +
                     llvm::Twine(length));
  int64_t prompt = options.promptLength.value_or(length / 2);
  if (prompt < 1 || prompt >= length)
    return makeError("--prompt-len must be at least 1 and less than "
                     "--max-seq-len, got --prompt-len " +
                     llvm::Twine(prompt) + " and --max-seq-len " +
                     llvm::Twine(length));
  return llvm::Error::success();
}

/// --offload-optimizer, --offload-params and --offload-dir
/// (docs/offload.md).
static llvm::Error validateOffloadOptions(const CompileOptions &options) {
  for (auto [flag, tier, key] :
       {std::tuple{"--offload-optimizer", &options.offloadOptimizer,
                   "offload_optimizer"},
        std::tuple{"--offload-params", &options.offloadParams,
                   "offload_param"}})
    if (*tier != "none" && *tier != "cpu" && *tier != "nvme")
      return makeError("unknown " + llvm::Twine(flag) + " '" + *tier +
                       "'; expected none, cpu or nvme (DeepSpeed's " + key +
                       ".device)");
  if (options.offload != "none" && options.offload != "auto")
    return makeError("unknown --offload '" + options.offload +
                     "'; expected none or auto");
  bool automatic = options.offload == "auto";
  if (automatic && !options.memoryBudget)
    return makeError("--offload auto needs --memory-budget: it offloads only "
                     "as much as the device budget requires");
  if (automatic &&
      (options.offloadOptimizer != "none" || options.offloadParams != "none"))
    return makeError("--offload auto chooses --offload-optimizer and "
                     "--offload-params itself; give it alone");
  if (options.offloadOptimizer != "none" && !trains(options.mode))
    return makeError("--offload-optimizer applies to --mode train only (a "
                     "plan without an optimizer step has no optimizer state)");
  bool nvme =
      options.offloadOptimizer == "nvme" || options.offloadParams == "nvme";
  if (nvme && options.offloadDir.empty())
    return makeError("--offload-" +
                     llvm::Twine(options.offloadOptimizer == "nvme"
                                     ? "optimizer"
                                     : "params") +
                     " nvme needs --offload-dir DIR (where each rank keeps its "
                     "state file; DeepSpeed's nvme_path)");
  if (!nvme && !automatic && !options.offloadDir.empty())
    return makeError("--offload-dir applies to --offload-optimizer nvme, "
                     "--offload-params nvme or --offload auto only");
  return llvm::Error::success();
}

llvm::Error zplan::validateOptions(const CompileOptions &options) {
  if (options.worldSize < 1)
    return makeError("--world-size must be at least 1, got " +
                     llvm::Twine(options.worldSize));
  if (options.worldSize > kMaxWorldSize)
    return makeError("--world-size " + llvm::Twine(options.worldSize) +
                     " is too large: at most " + llvm::Twine(kMaxWorldSize) +
                     " ranks");
  for (const std::string &dump : options.dumps)
    if (llvm::none_of(kDumpKinds,
                      [&](const DumpKind &kind) { return kind.name == dump; }))
      return makeError("unknown --dump '" + dump +
                       "'; expected ir, schedule, memory or report");
  if (!options.import.readWeights && !options.outputPath.empty())
    return makeError("--no-weights writes no plan (a plan carries its "
                     "weights): drop -o, and ask for the schedule with "
                     "--dump report,schedule,memory");
  if (options.maxInFlight < 1)
    return makeError("--max-in-flight must be at least 1, got " +
                     llvm::Twine(options.maxInFlight));
  if (options.persistenceThreshold < 0)
    return makeError("--persistence-threshold must not be negative, got " +
                     llvm::Twine(options.persistenceThreshold));
  for (auto [flag, value] :
       {std::pair{"--param-dtype", &options.paramDtype},
        std::pair{"--reduce-dtype", &options.reduceDtype},
        std::pair{"--compute-dtype", &options.computeDtype}})
    if (*value != "fp32" && *value != "bf16")
      return makeError("unknown " + llvm::Twine(flag) + " '" + *value +
                       "'; expected fp32 or bf16");
  if (options.bucketBytes < 0 || options.maxInFlightBytes < 0)
    return makeError("--bucket-size and --max-in-flight-bytes must not be "
                     "negative");
  if (llvm::Error error = validateGenerateOptions(options))
    return error;
  if (options.optimizer != "adamw" && options.optimizer != "sgd")
    return makeError("unknown --optimizer '" + options.optimizer +
                     "'; expected adamw or sgd");
  if (llvm::Error error = validateOffloadOptions(options))
    return error;
  const ParameterOptions &parameters = options.import.parameters;
  if (!trains(options.mode) &&
      (!parameters.freeze.empty() || !parameters.train.empty()))
    return makeError("--freeze and --train apply to --mode train only (a plan "
                     "without training programs trains nothing)");
  llvm::StringRef loss = options.loss;
  if (loss != "causal-lm" && !isRlLoss(loss) &&
      !(loss.consume_front("output:") && !loss.empty()))
    return makeError("unknown --loss '" + options.loss +
                     "'; expected causal-lm, output:NAME, grpo or dpo");
  if (options.lossType != "grpo" && options.lossType != "dapo")
    return makeError("unknown --loss-type '" + options.lossType +
                     "'; expected grpo or dapo (TRL's names)");
  if (options.beta && (*options.beta < 0 || !std::isfinite(*options.beta)))
    return makeError("--beta must be a finite number >= 0, got " +
                     std::to_string(*options.beta));
  if (options.epsilon < 0 || options.epsilon >= 1 ||
      !std::isfinite(options.epsilon))
    return makeError("--epsilon must be in [0, 1), got " +
                     std::to_string(options.epsilon));
  if (options.epsilonHigh &&
      (*options.epsilonHigh < 0 || !std::isfinite(*options.epsilonHigh)))
    return makeError("--epsilon-high must be a finite number >= 0, got " +
                     std::to_string(*options.epsilonHigh));
  return llvm::Error::success();
}
