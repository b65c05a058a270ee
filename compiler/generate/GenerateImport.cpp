//===- GenerateImport.cpp - the two imports of zcc --mode generate --------===//
//
// The importer specialises a model to one set of static shapes, so prefill
// and decode are two imports. Their parameters are the same initializers:
// mergePrograms (MergePrograms.h) checks the second import's declarations
// against the first's and drops them, so that both programs read one set of
// symbols (and the schedule shards each parameter once).
//
//===----------------------------------------------------------------------===//

#include "compiler/generate/GenerateImport.h"

#include "compiler/Errors.h"
#include "compiler/generate/CachePositions.h"
#include "compiler/generate/MergePrograms.h"

#include "compiler/transforms/Programs.h"
#include "dialects/nn/NNDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "onnx/onnx.pb.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace zplan;

static constexpr llvm::StringLiteral kPastPrefix = "past_key_values.";

/// The graph inputs that are run-time arguments (not initializers listed
/// among the inputs, as older exporters do).
static std::vector<const onnx::ValueInfoProto *>
runtimeInputs(const onnx::ModelProto &model) {
  llvm::StringSet<> initializers;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    initializers.insert(tensor.name());
  std::vector<const onnx::ValueInfoProto *> inputs;
  for (const onnx::ValueInfoProto &input : model.graph().input())
    if (!initializers.contains(input.name()))
      inputs.push_back(&input);
  return inputs;
}

llvm::Expected<ExportKind>
zplan::detectExportKind(const onnx::ModelProto &model) {
  std::vector<const onnx::ValueInfoProto *> inputs = runtimeInputs(model);
  bool hasIds = false, hasPositions = false, hasPast = false;
  for (const onnx::ValueInfoProto *input : inputs) {
    llvm::StringRef name = input->name();
    hasIds |= name == "input_ids";
    hasPositions |= name == "position_ids";
    hasPast |= name.starts_with(kPastPrefix);
  }
  if (!hasIds)
    return makeError("--mode generate needs a causal LM with an 'input_ids' "
                     "input; the model has none");
  for (const onnx::ValueInfoProto *input : inputs) {
    llvm::StringRef name = input->name();
    bool known =
        name == "input_ids" ||
        (hasPast && (name == "attention_mask" || name == "position_ids" ||
                     name.starts_with(kPastPrefix)));
    if (!known)
      return makeError(
          "--mode generate: graph input '" + name +
          "' is not one a causal-LM export has: a plain export has only "
          "'input_ids'; an export with a KV cache has 'input_ids', "
          "'attention_mask', 'position_ids' and 'past_key_values.N.key' / "
          "'.value'");
  }
  (void)hasPositions; // A cache export without them: derivePositionIds.
  return hasPast ? ExportKind::Cache : ExportKind::Plain;
}

llvm::Expected<ImportOptions>
zplan::importOptionsFor(const onnx::ModelProto &model, ExportKind kind,
                        const GenerateShape &shape, bool decode) {
  ImportOptions options;
  int64_t batch = shape.batch, length = shape.maxSeqLength;
  int64_t tokens = decode ? 1 : shape.promptLength;
  if (kind == ExportKind::Plain) {
    options.inputShapes["input_ids"] = {batch, decode ? length : tokens};
    return options;
  }
  for (const onnx::ValueInfoProto *input : runtimeInputs(model)) {
    llvm::StringRef name = input->name();
    if (name == "input_ids" || name == "position_ids") {
      options.inputShapes[name.str()] = {batch, tokens};
    } else if (name == "attention_mask") {
      options.inputShapes[name.str()] = {batch, length};
    } else {
      // [batch, heads, past, head_dim]: the heads and head size are the
      // model's, declared by the export.
      const onnx::TensorShapeProto &declared =
          input->type().tensor_type().shape();
      if (declared.dim_size() != 4 || !declared.dim(1).has_dim_value() ||
          !declared.dim(3).has_dim_value())
        return makeError("--mode generate: input '" + name +
                         "' must declare its shape [batch, heads, past, "
                         "head_dim] with the heads and head_dim fixed");
      options.inputShapes[name.str()] = {batch, declared.dim(1).dim_value(),
                                         length - tokens,
                                         declared.dim(3).dim_value()};
    }
  }
  return options;
}

llvm::Expected<OwningOpRef<ModuleOp>>
zplan::importGenerateModule(MLIRContext &context, llvm::StringRef path,
                            const GenerateShape &shape,
                            const ImportOptions &base, ExportKind &kind) {
  onnx::ModelProto model;
  if (llvm::Error error = readOnnxModel(path, model))
    return std::move(error);
  llvm::Expected<ExportKind> detected = detectExportKind(model);
  if (!detected)
    return detected.takeError();
  kind = *detected;
  if (kind == ExportKind::Cache &&
      llvm::none_of(runtimeInputs(model), [](const onnx::ValueInfoProto *in) {
        return in->name() == "position_ids";
      })) {
    std::string derivedFrom;
    if (llvm::Error error = derivePositionIds(model, derivedFrom))
      return std::move(error);
  }

  OwningOpRef<ModuleOp> programs[2];
  for (bool decode : {false, true}) {
    llvm::Expected<ImportOptions> options =
        importOptionsFor(model, kind, shape, decode);
    if (!options)
      return options.takeError();
    options->parameters = base.parameters;
    options->readWeights = base.readWeights;
    auto imported = importOnnxModel(context, model, path, *options);
    if (!imported)
      return makeError(
          llvm::Twine(decode ? "importing decode: " : "importing prefill: ") +
          llvm::toString(imported.takeError()));
    programs[decode] = std::move(*imported);
  }

  OwningOpRef<ModuleOp> module = std::move(programs[0]);
  auto prefill = module->lookupSymbol<func::FuncOp>(kForwardName);
  if (!prefill)
    return makeError("the import has no @forward (an importer bug)");
  prefill.setSymName(kPrefillName);
  auto decode = programs[1]->lookupSymbol<func::FuncOp>(kForwardName);
  if (!decode)
    return makeError("the import has no @forward (an importer bug)");
  decode.setSymName(kDecodeName);
  if (llvm::Error error =
          mergePrograms(*module, "prefill", *programs[1], "decode"))
    return std::move(error);

  OpBuilder builder(&context);
  auto makeEmpty = [&](llvm::StringRef name) {
    auto func =
        builder.create<func::FuncOp>(NameLoc::get(builder.getStringAttr(name)),
                                     name, builder.getFunctionType({}, {}));
    OpBuilder::InsertionGuard guard(builder);
    builder.setInsertionPointToStart(func.addEntryBlock());
    builder.create<func::ReturnOp>(func.getLoc());
  };
  builder.setInsertionPoint(prefill);
  makeEmpty(kGenerateBeginName);
  builder.setInsertionPointToEnd(module->getBody());
  makeEmpty(kGenerateEndName);
  return std::move(module);
}
