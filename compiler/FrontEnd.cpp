//===- FrontEnd.cpp - the module each --mode compiles ---------------------===//
//
// Each stage runs as a pass pipeline of Pipeline.h and names its phase for
// the crash handler first, so that a crash says which stage it was in.
//
//===----------------------------------------------------------------------===//

#include "compiler/FrontEnd.h"

#include "compiler/CrashHandler.h"
#include "compiler/Errors.h"
#include "compiler/Pipeline.h"
#include "compiler/generate/GenerateImport.h"
#include "compiler/generate/MergePrograms.h"
#include "dialects/nn/NNDialect.h"
#include "mlir/Pass/PassManager.h"
#include "onnx/onnx.pb.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

using namespace zplan;

llvm::StringRef zplan::describeFrontEnd(CompileMode mode) {
  switch (mode) {
  case CompileMode::Infer:
  case CompileMode::Train:
  case CompileMode::TrainInfer:
  case CompileMode::Logprobs:
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
                                     std::string &diagnostics,
                                     bool generation = false) {
  return runPasses(
      module, "running the import pipeline on '" + options.modelPath + "'",
      "the import pipeline failed",
      [&](mlir::OpPassManager &pm) { buildImportPipeline(pm, generation); },
      diagnostics);
}

/// The module of --mode infer or train (and the training half of a combined
/// mode): the model imported at the --input-shape shapes, canonicalised,
/// and when training, with @train_micro_step beside @forward.
static llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildModelModule(mlir::MLIRContext &context, const CompileOptions &options,
                 std::string &diagnostics) {
  // Training: `--input-shape labels=BxT` on a model without a labels input
  // asks for Hugging Face labels (-100 ignored) as an extra input of the
  // training step; the model itself never sees it. So do the RL losses'
  // inputs (completion_mask, advantages, old_logprobs, ref_logprobs): their
  // shapes follow input_ids', except advantages, [B] or [B, T] (per token).
  ImportOptions import = options.import;
  AutodiffOptions autodiff;
  autodiff.loss = options.loss;
  autodiff.lossType = options.lossType;
  autodiff.beta = options.beta.value_or(-1.0);
  autodiff.epsilon = options.epsilon;
  autodiff.epsilonHigh = options.epsilonHigh.value_or(-1.0);
  autodiff.oldLogprobs = options.oldLogprobs;
  autodiff.biasCorrectionKl = options.biasCorrectionKl;
  const llvm::StringRef stepInputs[] = {"labels", "completion_mask",
                                        "advantages", "old_logprobs",
                                        "ref_logprobs"};
  // The model is read here only when one of those shapes is given.
  if (trains(options.mode) &&
      llvm::any_of(stepInputs, [&](llvm::StringRef name) {
        return import.inputShapes.count(name.str()) != 0;
      })) {
    onnx::ModelProto model;
    if (llvm::Error error = readOnnxModel(options.modelPath, model))
      return std::move(error);
    auto modelHas = [&](llvm::StringRef name) {
      return llvm::any_of(model.graph().input(),
                          [&](const onnx::ValueInfoProto &input) {
                            return input.name() == name;
                          });
    };
    auto ids = import.inputShapes.find("input_ids");
    for (llvm::StringRef name : stepInputs) {
      auto given = import.inputShapes.find(name.str());
      if (given == import.inputShapes.end() || modelHas(name))
        continue;
      std::vector<int64_t> shape = given->second;
      std::vector<int64_t> tokens;
      if (ids != import.inputShapes.end())
        tokens = ids->second;
      bool fits = !tokens.empty() && shape == tokens;
      if (name == "advantages" && !tokens.empty()) {
        fits |= shape == std::vector<int64_t>{tokens[0]};
        autodiff.perTokenAdvantages = shape.size() == 2;
      }
      if (!fits)
        return makeError("--input-shape " + name + " must " +
                         (name == "advantages"
                              ? "be --input-shape input_ids's batch [B] or "
                                "equal it [B, T]"
                              : "equal --input-shape input_ids") +
                         ": one value per input token");
      if (name == "labels")
        autodiff.labelsInput = true;
      import.inputShapes.erase(given);
    }
  }
  setCrashPhase("importing '" + options.modelPath + "'");
  crashIfTestRequested("import");
  auto module = importOnnxModel(context, options.modelPath, import);
  if (!module)
    return module.takeError();
  if (llvm::Error error = runImportPipeline(**module, options, diagnostics))
    return std::move(error);
  // The log-probs program of an RL plan or a reference model.
  if (options.mode == CompileMode::Logprobs ||
      (trains(options.mode) && isRlLoss(options.loss))) {
    if (llvm::Error error = runPasses(
            **module,
            "building the log-probs program of '" + options.modelPath + "'",
            "building the log-probs program failed",
            [&](mlir::OpPassManager &pm) { buildLogprobsPipeline(pm); },
            diagnostics))
      return std::move(error);
  }
  if (trains(options.mode)) {
    if (llvm::Error error = runPasses(
            **module, "differentiating '" + options.modelPath + "'",
            "building the training step failed",
            [&](mlir::OpPassManager &pm) { buildTrainPipeline(pm, autodiff); },
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
  auto module = importGenerateModule(context, options.modelPath, shape,
                                     options.import, exportKind);
  if (!module)
    return module.takeError();
  if (llvm::Error error = runImportPipeline(**module, options, diagnostics,
                                            /*generation=*/true))
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

// In train,generate the generation programs and their state (nn.kv_cache)
// move into the training module, whose parameters they must share exactly
// (MergePrograms.h): the schedule then groups, shards and plans them once.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
zplan::buildModule(mlir::MLIRContext &context, const CompileOptions &options,
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

std::vector<std::string> zplan::collectInputFiles(const CompileOptions &options,
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

std::vector<std::string> zplan::collectTieWarnings(mlir::ModuleOp module) {
  std::vector<std::string> warnings;
  for (auto parameter : module.getOps<nn::ParameterOp>()) {
    std::optional<mlir::ArrayAttr> copies = parameter.getTiedCopies();
    if (!copies)
      continue;
    for (mlir::Attribute copy : *copies) {
      auto fields = llvm::cast<mlir::DictionaryAttr>(copy);
      if (fields.getAs<mlir::BoolAttr>("equal").getValue())
        continue;
      warnings.push_back(
          "'" + fields.getAs<mlir::StringAttr>("name").str() +
          "' is trained as '" + parameter.getSymName().str() + "'" +
          (fields.getAs<mlir::BoolAttr>("transposed").getValue() ? " transposed"
                                                                 : "") +
          ", but their values are not equal: " +
          fields.getAs<mlir::StringAttr>("reason").str());
    }
  }
  return warnings;
}
