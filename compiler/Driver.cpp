//===- Driver.cpp - what zcc does, as a library call ----------------------===//
//
// Validation happens before any work so that a bad flag never leaves a
// half-done run behind. Every file zcc writes (plan, weights, dump files) is
// written to a temporary beside it and renamed into place only once all of
// them are complete, so a failing compile leaves none of its files; no
// output may name an input (the model or its external data), compared as
// files on disk, not as strings. The temporaries are registered with the
// crash handler, which removes them if zcc dies on the way.
//
//===----------------------------------------------------------------------===//

#include "compiler/Driver.h"

#include "compiler/CrashHandler.h"
#include "compiler/Errors.h"
#include "compiler/Pipeline.h"
#include "compiler/Registration.h"
#include "compiler/analysis/CostModel.h"
#include "compiler/analysis/GenerationCost.h"
#include "compiler/generate/GenerateImport.h"
#include "compiler/generate/MergePrograms.h"
#include "compiler/plan/Dumps.h"
#include "compiler/plan/PlanEmitter.h"
#include "compiler/plan/PlanSearch.h"
#include "compiler/plan/Simulator.h"
#include "compiler/plan/Timeline.h"
#include "compiler/plan/WeightsWriter.h"
#include "dialects/nn/NNDialect.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "onnx/onnx.pb.h"
#include "runtime/plan/PlanFormat.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>

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
                       "'; expected infer, train, generate, train,generate "
                       "or train,infer");
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

llvm::Error zplan::validateOptions(const CompileOptions &options) {
  if (options.worldSize < 1)
    return makeError("--world-size must be at least 1, got " +
                     llvm::Twine(options.worldSize));
  if (options.worldSize > kMaxWorldSize)
    return makeError("--world-size " + llvm::Twine(options.worldSize) +
                     " is too large: at most " + llvm::Twine(kMaxWorldSize) +
                     " ranks");
  for (const std::string &dump : options.dumps)
    if (!llvm::is_contained(kDumpKinds, dump))
      return makeError("unknown --dump '" + dump +
                       "'; expected ir, schedule, memory or report");
  if (options.maxInFlight < 1)
    return makeError("--max-in-flight must be at least 1, got " +
                     llvm::Twine(options.maxInFlight));
  if (options.persistenceThreshold < 0)
    return makeError("--persistence-threshold must not be negative, got " +
                     llvm::Twine(options.persistenceThreshold));
  if (options.bucketBytes < 0 || options.maxInFlightBytes < 0)
    return makeError("--bucket-size and --max-in-flight-bytes must not be "
                     "negative");
  if (llvm::Error error = validateGenerateOptions(options))
    return error;
  if (options.optimizer != "adamw" && options.optimizer != "sgd")
    return makeError("unknown --optimizer '" + options.optimizer +
                     "'; expected adamw or sgd");
  llvm::StringRef loss = options.loss;
  if (loss != "causal-lm" && !(loss.consume_front("output:") && !loss.empty()))
    return makeError("unknown --loss '" + options.loss +
                     "'; expected causal-lm or output:NAME");
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Outputs
//===----------------------------------------------------------------------===//

namespace {

/// The files one compile writes. Each is written to a temporary beside its
/// final path; commit() renames them all once every one is complete, and
/// whatever was not committed is removed when this object dies, so a failed
/// compile leaves none of its files.
class PendingOutputs {
public:
  PendingOutputs() = default;
  PendingOutputs(const PendingOutputs &) = delete;
  PendingOutputs &operator=(const PendingOutputs &) = delete;
  ~PendingOutputs() {
    for (Output &output : outputs)
      discard(output.temporary);
    for (const std::string &path : committed)
      llvm::sys::fs::remove(path);
    // Innermost first; remove() takes a directory only when it is empty.
    for (const std::string &directory : llvm::reverse(createdDirectories)) {
      llvm::sys::fs::remove(directory);
      unregisterTemporaryFile(directory);
    }
  }

  /// Creates `directory` and its missing parents; the ones created here are
  /// removed again unless the outputs are committed.
  llvm::Error addDirectory(llvm::StringRef directory) {
    std::vector<std::string> missing;
    for (llvm::StringRef path = directory;
         !path.empty() && !llvm::sys::fs::exists(path);
         path = llvm::sys::path::parent_path(path))
      missing.push_back(path.str());
    for (const std::string &path : llvm::reverse(missing)) {
      if (std::error_code code = llvm::sys::fs::create_directory(path))
        return makeError("cannot create --dump-dir '" + directory +
                         "': " + code.message());
      createdDirectories.push_back(path);
      if (!registerTemporaryFile(path))
        return makeError("too many temporary files open to create '" +
                         directory + "'");
    }
    return llvm::Error::success();
  }

  /// A new temporary for `path`, created empty and registered with the crash
  /// handler; `fill` writes it.
  llvm::Error
  add(llvm::StringRef path,
      llvm::function_ref<llvm::Error(llvm::StringRef temporary)> fill) {
    llvm::SmallString<256> temporary;
    int fd = -1;
    if (std::error_code code = llvm::sys::fs::createUniqueFile(
            path + ".tmp-%%%%%%%%", fd, temporary))
      return makeError("cannot create a temporary file beside '" + path +
                       "': " + code.message());
    llvm::sys::Process::SafelyCloseFileDescriptor(fd);
    if (!registerTemporaryFile(temporary)) {
      llvm::sys::fs::remove(temporary);
      return makeError("too many temporary files open to write '" + path + "'");
    }
    outputs.push_back({path.str(), temporary.str().str()});
    return fill(temporary);
  }

  /// Writes `bytes` as `path`.
  llvm::Error addBytes(llvm::StringRef path, llvm::StringRef bytes) {
    return add(path, [&](llvm::StringRef temporary) -> llvm::Error {
      std::error_code code;
      llvm::raw_fd_ostream file(temporary, code);
      if (!code) {
        file << bytes;
        file.close();
        code = file.error();
        // A stream destroyed with its error still set is a fatal error.
        file.clear_error();
      }
      if (code)
        return makeError("cannot write '" + path + "': " + code.message());
      return llvm::Error::success();
    });
  }

  /// Renames every temporary into place, in the order added. A failure
  /// removes what was already renamed.
  llvm::Error commit() {
    for (Output &output : outputs) {
      if (std::error_code code =
              llvm::sys::fs::rename(output.temporary, output.path))
        return makeError("cannot move the finished '" + output.path +
                         "' into place: " + code.message());
      unregisterTemporaryFile(output.temporary);
      output.temporary.clear();
      committed.push_back(output.path);
    }
    for (const std::string &directory : createdDirectories)
      unregisterTemporaryFile(directory);
    outputs.clear();
    committed.clear();
    createdDirectories.clear();
    return llvm::Error::success();
  }

private:
  struct Output {
    std::string path;
    std::string temporary;
  };

  static void discard(const std::string &temporary) {
    if (temporary.empty())
      return;
    llvm::sys::fs::remove(temporary);
    unregisterTemporaryFile(temporary);
  }

  std::vector<Output> outputs;
  /// Renamed during a commit() that has not finished.
  std::vector<std::string> committed;
  /// Made for the dump files, outermost first.
  std::vector<std::string> createdDirectories;
};

/// The file names of the requested dumps in the dump directory.
std::vector<std::string> dumpFilePaths(const CompileOptions &options) {
  static constexpr std::pair<const char *, const char *> kDumpFiles[] = {
      {"ir", "ir.mlir"},
      {"schedule", "schedule.txt"},
      {"memory", "memory.txt"},
      {"report", "report.txt"}};
  std::vector<std::string> paths;
  if (options.dumpDir.empty())
    return paths;
  for (auto [kind, name] : kDumpFiles)
    if (options.dumps.count(kind)) {
      llvm::SmallString<256> path(options.dumpDir);
      llvm::sys::path::append(path, name);
      paths.push_back(path.str().str());
    }
  return paths;
}

} // namespace

/// Refuses an output that is a directory (it could never be renamed into
/// place) or that is the same file as one of `inputs`: a compile must not
/// destroy what it reads.
static llvm::Error checkOutputPaths(const CompileOptions &options,
                                    llvm::ArrayRef<std::string> inputs) {
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!options.outputPath.empty()) {
    outputs.push_back({"-o", options.outputPath});
    outputs.push_back({"the weights file", options.outputPath + ".weights"});
  }
  for (const std::string &path : dumpFilePaths(options))
    outputs.push_back({"the dump file", path});
  if (!options.outputPath.empty()) {
    // Found before any work rather than when the plan is written.
    llvm::StringRef parent = llvm::sys::path::parent_path(options.outputPath);
    if (!parent.empty() && !llvm::sys::fs::is_directory(parent))
      return makeError("-o '" + options.outputPath + "': the directory '" +
                       parent + "' does not exist");
  }
  for (auto &[what, path] : outputs) {
    if (llvm::sys::fs::is_directory(path))
      return makeError(what + " '" + path +
                       "' is a directory; expected a file path");
    for (const std::string &input : inputs) {
      bool same = false;
      // equivalent() fails when either file does not exist: then they
      // cannot be the same file.
      if (!llvm::sys::fs::equivalent(path, input, same) && same)
        return makeError(what + " '" + path + "' is the input '" + input +
                         "'; refusing to overwrite it");
    }
  }
  return llvm::Error::success();
}

/// The model and every external-data file its parameters name, resolved
/// against the model's directory as the importer resolves them.
static std::vector<std::string> collectInputFiles(const CompileOptions &options,
                                                  mlir::ModuleOp module) {
  std::vector<std::string> inputs{options.modelPath};
  llvm::StringRef modelDir = llvm::sys::path::parent_path(options.modelPath);
  module.walk([&](nn::ParameterOp parameter) {
    std::optional<llvm::StringRef> file = parameter.getExternalFile();
    if (!file)
      return;
    llvm::SmallString<256> path(modelDir);
    llvm::sys::path::append(path, *file);
    if (!llvm::is_contained(inputs, path.str()))
      inputs.push_back(path.str().str());
  });
  return inputs;
}

//===----------------------------------------------------------------------===//
// The module: import, training step, generation rewrite, merge
//===----------------------------------------------------------------------===//

/// What the front end did in `mode`, for the ir dump's first header.
static llvm::StringRef describeFrontEnd(CompileMode mode) {
  switch (mode) {
  case CompileMode::Infer:
  case CompileMode::Train:
  case CompileMode::TrainInfer:
    return "import and canonicalisation";
  case CompileMode::Generate:
    return "import and the KV-cache rewrite";
  case CompileMode::TrainGenerate:
    return "import, the KV-cache rewrite and the merge of the generation "
           "programs into the training module";
  }
  llvm_unreachable("every CompileMode is handled");
}

/// Runs the passes `build` adds on `module`, with `phase` (what zcc is doing
/// to the model) for the crash handler; a failure is `what` followed by the
/// pass diagnostics.
static llvm::Error
runPasses(mlir::ModuleOp module, const llvm::Twine &phase, llvm::StringRef what,
          llvm::function_ref<void(mlir::OpPassManager &)> build,
          std::string &diagnostics) {
  setCrashPhase(phase);
  mlir::PassManager pm(module.getContext());
  build(pm);
  diagnostics.clear();
  if (mlir::failed(pm.run(module)))
    return makeError(what + ": " + llvm::StringRef(diagnostics).rtrim());
  return llvm::Error::success();
}

/// The import pipeline, the same for every import.
static llvm::Error runImportPipeline(mlir::ModuleOp module,
                                     const CompileOptions &options,
                                     std::string &diagnostics) {
  return runPasses(
      module, "running the import pipeline on '" + options.modelPath + "'",
      "the import pipeline failed", buildImportPipeline, diagnostics);
}

/// The module of --mode infer or train (and the training half of a combined
/// mode): the model imported at the --input-shape shapes, canonicalised,
/// and when training, with @train_micro_step beside @forward.
static llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildModelModule(mlir::MLIRContext &context, const CompileOptions &options,
                 std::string &diagnostics) {
  // Training: `--input-shape labels=BxT` on a model without a labels input
  // asks for Hugging Face labels (-100 ignored) as an extra input of the
  // training step; the model itself never sees it.
  ImportOptions import = options.import;
  bool labelsInput = false;
  if (trains(options.mode) && import.inputShapes.count("labels")) {
    onnx::ModelProto model;
    if (llvm::Error error = readOnnxModel(options.modelPath, model))
      return std::move(error);
    if (llvm::none_of(model.graph().input(),
                      [](const onnx::ValueInfoProto &input) {
                        return input.name() == "labels";
                      })) {
      std::vector<int64_t> labels = import.inputShapes["labels"];
      auto ids = import.inputShapes.find("input_ids");
      if (ids == import.inputShapes.end() || ids->second != labels)
        return makeError("--input-shape labels must equal --input-shape "
                         "input_ids: labels are one target per input token");
      import.inputShapes.erase("labels");
      labelsInput = true;
    }
  }
  setCrashPhase("importing '" + options.modelPath + "'");
  crashIfTestRequested("import");
  auto module = importOnnxModel(context, options.modelPath, import);
  if (!module)
    return module.takeError();
  if (llvm::Error error = runImportPipeline(**module, options, diagnostics))
    return std::move(error);
  if (trains(options.mode)) {
    if (llvm::Error error = runPasses(
            **module, "differentiating '" + options.modelPath + "'",
            "building the training step failed",
            [&](mlir::OpPassManager &pm) {
              buildTrainPipeline(pm, options.loss, labelsInput);
            },
            diagnostics))
      return std::move(error);
  }
  return module;
}

/// The module of --mode generate (and the generation half of
/// train,generate): @generate_begin, @prefill, @decode and @generate_end
/// over a static KV cache (docs/generation.md section 3).
static llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildGenerationModule(mlir::MLIRContext &context, const CompileOptions &options,
                      std::string &diagnostics) {
  GenerateShape shape;
  shape.batch = *options.batch;
  shape.maxSeqLength = *options.maxSeqLength;
  shape.promptLength = options.promptLength.value_or(*options.maxSeqLength / 2);
  setCrashPhase("importing '" + options.modelPath + "' for generation");
  crashIfTestRequested("import");
  ExportKind exportKind = ExportKind::Plain;
  auto module =
      importGenerateModule(context, options.modelPath, shape, exportKind);
  if (!module)
    return module.takeError();
  if (llvm::Error error = runImportPipeline(**module, options, diagnostics))
    return std::move(error);
  if (llvm::Error error = runPasses(
          **module, "rewriting '" + options.modelPath + "' for generation",
          "the generation rewrite failed",
          [&](mlir::OpPassManager &pm) {
            buildGeneratePipeline(pm, exportKind == ExportKind::Plain,
                                  shape.maxSeqLength);
          },
          diagnostics))
    return std::move(error);
  return module;
}

/// The one module every program of `options.mode` lives in. In
/// train,generate the generation programs and their state (nn.kv_cache) move
/// into the training module, whose parameters they must share exactly
/// (MergePrograms.h): the schedule then groups, shards and plans them once.
static llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildModule(mlir::MLIRContext &context, const CompileOptions &options,
            std::string &diagnostics) {
  if (options.mode == CompileMode::Generate)
    return buildGenerationModule(context, options, diagnostics);
  auto module = buildModelModule(context, options, diagnostics);
  if (!module || options.mode != CompileMode::TrainGenerate)
    return module;
  auto generation = buildGenerationModule(context, options, diagnostics);
  if (!generation)
    return generation.takeError();
  setCrashPhase("merging the generation programs of '" + options.modelPath +
                "' into its training module");
  if (llvm::Error error =
          mergePrograms(**module, "training", **generation, "generation"))
    return makeError("--mode train,generate: " +
                     llvm::toString(std::move(error)));
  return module;
}

//===----------------------------------------------------------------------===//
// Schedule and emit
//===----------------------------------------------------------------------===//

/// Runs the schedule pipeline for `policy` under `budget` on a copy of
/// `module` and emits its plan.
static llvm::Expected<EmittedPlan>
scheduleAndEmitOnce(mlir::ModuleOp module, const CompileOptions &options,
                    SchedulePolicy policy, uint64_t budget,
                    const CostModel &cost, std::string &diagnostics,
                    std::string *scheduledIr,
                    std::optional<GenerationCost> *generation = nullptr,
                    bool crossStepPrefetch = true) {
  mlir::OwningOpRef<mlir::ModuleOp> copy = module.clone();
  mlir::PassManager pm(module.getContext());
  ScheduleOptions schedule;
  schedule.worldSize = options.worldSize;
  schedule.policy = policy;
  schedule.memoryBudget = static_cast<int64_t>(budget);
  schedule.hardware = options.hardware;
  schedule.bucketBytes = options.bucketBytes;
  schedule.persistenceThreshold = options.persistenceThreshold;
  schedule.maxInFlight = options.maxInFlight;
  schedule.maxInFlightBytes = options.maxInFlightBytes;
  schedule.optimizer = options.optimizer;
  crossStepPrefetch = crossStepPrefetch && options.crossStepPrefetch;
  schedule.crossStepPrefetch = crossStepPrefetch;
  buildSchedulePipeline(pm, schedule);
  diagnostics.clear();
  if (mlir::failed(pm.run(*copy)))
    return makeError("scheduling (policy " + spell(policy) +
                     ") failed: " + llvm::StringRef(diagnostics).rtrim());
  if (generation)
    *generation = estimateGenerationCost(*copy, cost);
  if (scheduledIr) {
    scheduledIr->clear();
    llvm::raw_string_ostream os(*scheduledIr);
    copy->print(os);
    os << "\n";
  }
  EmitOptions emit;
  emit.hardware = spell(options.hardware).str();
  emit.memoryBudget = options.memoryBudget.value_or(0);
  emit.modelName = llvm::sys::path::filename(options.modelPath).str();
  if (!options.outputPath.empty())
    emit.weightsFile =
        llvm::sys::path::filename(options.outputPath).str() + ".weights";
  llvm::Expected<EmittedPlan> emitted = emitPlan(*copy, emit, cost);
  // The carried copy sits at one arena offset in every program
  // (docs/generation.md section 6), and under a tight budget the arena
  // planned around it can exceed what the schedule's live bytes allowed for.
  // The same schedule without the carry is kept then, when it fits.
  uint64_t limit = options.memoryBudget.value_or(0);
  if (!emitted || !crossStepPrefetch || limit == 0 ||
      !(*copy)->hasAttr("zplan.carry") ||
      emitted->residentBytes + emitted->arena.arenaBytes <= limit)
    return emitted;
  std::string withoutIr;
  std::optional<GenerationCost> withoutCost;
  llvm::Expected<EmittedPlan> without =
      scheduleAndEmitOnce(module, options, policy, budget, cost, diagnostics,
                          scheduledIr ? &withoutIr : nullptr, &withoutCost,
                          /*crossStepPrefetch=*/false);
  if (!without) {
    llvm::consumeError(without.takeError());
    return emitted;
  }
  if (without->residentBytes + without->arena.arenaBytes > limit)
    return emitted;
  if (scheduledIr)
    *scheduledIr = std::move(withoutIr);
  if (generation) {
    if (withoutCost && *generation) {
      withoutCost->carriedGroup = (*generation)->carriedGroup;
      withoutCost->carriedBytes = (*generation)->carriedBytes;
      withoutCost->carrySkipped =
          "its copy, pinned at one arena offset, makes the arena exceed the "
          "budget";
    }
    *generation = std::move(withoutCost);
  }
  return without;
}

namespace {

/// The plans the search asked for, kept in call order so that its result's
/// indices find them, with their scheduled IR when the ir dump wants it.
struct SearchedPlans {
  std::vector<std::optional<EmittedPlan>> plans;
  std::vector<std::string> scheduledIr;
  /// A generation module's per-token cost (GenerationCost.h), per plan.
  std::vector<std::optional<GenerationCost>> generation;
};

} // namespace

/// Searches for the plan of `policy` (see PlanSearch.h), scheduling and
/// emitting each candidate from `module`.
static llvm::Expected<PlanSearchResult>
searchModulePlan(mlir::ModuleOp module, const CompileOptions &options,
                 SchedulePolicy policy, const CostModel &cost,
                 std::string &diagnostics, SearchedPlans &searched) {
  bool wantIr = options.dumps.count("ir");
  ScheduleAndEmitFn scheduleAndEmit =
      [&](SchedulePolicy candidate,
          uint64_t budget) -> llvm::Expected<PlanMeasure> {
    searched.plans.emplace_back();
    searched.scheduledIr.emplace_back();
    searched.generation.emplace_back();
    llvm::Expected<EmittedPlan> emitted = scheduleAndEmitOnce(
        module, options, candidate, budget, cost, diagnostics,
        wantIr ? &searched.scheduledIr.back() : nullptr,
        &searched.generation.back());
    if (!emitted)
      return emitted.takeError();
    PlanMeasure measure;
    measure.residentBytes = emitted->residentBytes;
    measure.arenaBytes = emitted->arena.arenaBytes;
    measure.lowerBound = emitted->arena.lowerBound;
    measure.peakIndex = emitted->arena.peakIndex;
    for (const EmittedProgram &program : emitted->programs) {
      const ArenaPlan &arena = program.arena;
      uint64_t excess =
          arena.arenaBytes - std::min(arena.lowerBound, arena.arenaBytes);
      measure.arenaExcess = std::max(measure.arenaExcess, excess);
    }
    measure.simulatedSeconds =
        simulate(emitted->plan.programs(emitted->primary), emitted->seconds)
            .totalSeconds;
    searched.plans.back() = std::move(*emitted);
    return measure;
  };
  return searchPlan(policy, options.memoryBudget.value_or(0), scheduleAndEmit);
}

llvm::Error zplan::compileModel(const CompileOptions &options,
                                llvm::raw_ostream &out,
                                llvm::raw_ostream &notes) {
  if (llvm::Error error = validateOptions(options))
    return error;
  if (llvm::Error error = checkOutputPaths(options, {options.modelPath}))
    return error;
  llvm::Expected<HardwareProfile> profile =
      getHardwareProfile(options.hardware);
  if (!profile)
    return profile.takeError();
  CostModel cost(*profile);

  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  // Diagnostics from passes become the error message, not stray output.
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << diag << "\n";
    return mlir::success();
  });

  llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>> module =
      buildModule(context, options, diagnostics);
  if (!module)
    return module.takeError();
  // Now the external-data files are known: no output may be one of them.
  if (llvm::Error error =
          checkOutputPaths(options, collectInputFiles(options, **module)))
    return error;

  std::string importedIr;
  if (options.dumps.count("ir")) {
    llvm::raw_string_ostream os(importedIr);
    os << "// -----// IR after " << describeFrontEnd(options.mode)
       << " //----- //\n";
    (*module)->print(os);
    os << "\n";
  }

  setCrashPhase("scheduling '" + options.modelPath + "'");
  crashIfTestRequested("schedule");
  SearchedPlans searched;
  llvm::Expected<PlanSearchResult> search = searchModulePlan(
      **module, options, options.policy, cost, diagnostics, searched);
  if (!search)
    return search.takeError();
  EmittedPlan &chosen = *searched.plans[search->chosen];

  setCrashPhase("writing the dumps");
  PendingOutputs outputs;
  // A dump goes to its file in --dump-dir (committed with the plan), or to
  // `out`.
  auto emitDump = [&](llvm::StringRef name,
                      llvm::StringRef text) -> llvm::Error {
    if (options.dumpDir.empty()) {
      out << text;
      return llvm::Error::success();
    }
    if (llvm::Error error = outputs.addDirectory(options.dumpDir))
      return error;
    llvm::SmallString<256> path(options.dumpDir);
    llvm::sys::path::append(path, name);
    return outputs.addBytes(path, text);
  };
  if (options.dumps.count("ir"))
    if (llvm::Error error = emitDump(
            "ir.mlir",
            (importedIr + "// -----// IR after the schedule (policy " +
             spell(options.policy) + ") //----- //\n// " + search->summary +
             "\n" + searched.scheduledIr[search->chosen])
                .str()))
      return error;
  if (options.dumps.count("schedule"))
    if (llvm::Error error =
            emitDump("schedule.txt", formatScheduleDump(chosen)))
      return error;
  if (options.dumps.count("memory"))
    if (llvm::Error error = emitDump("memory.txt", formatMemoryDump(chosen)))
      return error;
  if (options.dumps.count("report")) {
    // The other policy, compiled the same way, is the baseline; under the
    // default policy the search already compiled the jit plan.
    SchedulePolicy other = options.policy == SchedulePolicy::Jit
                               ? SchedulePolicy::Default
                               : SchedulePolicy::Jit;
    const EmittedPlan *baseline = nullptr;
    const std::optional<GenerationCost> *baselineGeneration = nullptr;
    std::string note;
    SearchedPlans otherPlans;
    if (other == SchedulePolicy::Jit && search->jitPlan) {
      baseline = &*searched.plans[*search->jitPlan];
      baselineGeneration = &searched.generation[*search->jitPlan];
    } else {
      setCrashPhase("scheduling '" + options.modelPath + "' for the report");
      CompileOptions withoutIr = options;
      withoutIr.dumps.erase("ir");
      llvm::Expected<PlanSearchResult> otherSearch = searchModulePlan(
          **module, withoutIr, other, cost, diagnostics, otherPlans);
      if (otherSearch) {
        baseline = &*otherPlans.plans[otherSearch->chosen];
        baselineGeneration = &otherPlans.generation[otherSearch->chosen];
      } else
        note = "// " + spell(other).str() +
               " policy: " + llvm::toString(otherSearch.takeError()) + "\n";
      setCrashPhase("writing the dumps");
    }
    std::vector<std::pair<SchedulePolicy, const EmittedPlan *>> policies{
        {options.policy, &chosen}};
    if (baseline)
      policies.push_back({other, baseline});
    // Generation: per-token cost of each policy (GenerationCost.h).
    std::string generation;
    if (const auto &chosenCost = searched.generation[search->chosen]) {
      std::vector<std::pair<SchedulePolicy, const GenerationCost *>> costs{
          {options.policy, &*chosenCost}};
      if (baselineGeneration && *baselineGeneration)
        costs.push_back({other, &**baselineGeneration});
      generation = formatGenerationReport(costs);
    }
    // A combined plan: the memory across train -> generate -> train.
    std::string timeline;
    if (options.mode == CompileMode::TrainGenerate ||
        options.mode == CompileMode::TrainInfer)
      timeline = formatTimeline(buildTimeline(chosen.plan));
    if (llvm::Error error = emitDump(
            "report.txt", formatReport(policies) + generation + timeline +
                              "// " + search->summary + "\n" + note))
      return error;
  }

  std::string weights = options.outputPath + ".weights";
  if (!options.outputPath.empty()) {
    // The plan's identity (its body checksum) is recorded in the weights
    // header, so that weights swapped with another plan's are refused.
    uint64_t planIdentity;
    std::string planBytes = plan::serializePlan(chosen.plan, &planIdentity);
    setCrashPhase("writing the weights '" + weights + "'");
    if (llvm::Error error =
            outputs.add(weights, [&](llvm::StringRef temporary) -> llvm::Error {
              if (llvm::Error error = writeWeights(
                      chosen.plan, planIdentity, options.modelPath, temporary))
                return makeError("cannot write the weights file '" + weights +
                                 "': " + llvm::toString(std::move(error)));
              return llvm::Error::success();
            }))
      return error;
    setCrashPhase("writing the plan '" + options.outputPath + "'");
    if (llvm::Error error = outputs.addBytes(options.outputPath, planBytes))
      return error;
  }
  crashIfTestRequested("write");
  if (llvm::Error error = outputs.commit())
    return error;
  setCrashPhase("finishing");
  if (!options.outputPath.empty()) {
    notes << "zcc: wrote " << options.outputPath << " (";
    for (const plan::Program &program : chosen.plan.programs())
      notes << (&program == &chosen.plan.programs(0) ? "" : ", ") << "'"
            << program.name() << "' " << program.instructions_size()
            << " instructions";
    notes << "; arena " << formatSize(chosen.plan.arena_bytes())
          << " per rank) and " << weights << "\n";
  }
  return llvm::Error::success();
}
