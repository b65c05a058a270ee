//===- ImporterFuzzer.cpp - libFuzzer harness for the ONNX importer -------===//
//
// Bytes -> onnx::ModelProto -> zplan::importOnnxModel -> nn IR -> verify.
// The importer must answer every input with a module or an error message;
// a crash, a sanitizer report, a hang, or a module that does not verify is
// a finding. Graph inputs with dynamic dimensions are bound the way a user
// would bind them with --input-shape (a symbol first seen at dim 0 is 2, at
// dim 1 is 16, elsewhere 1; one symbol, one value), so that inputs derived
// from the fixtures (input_ids[batch, sequence] -> 2x16) reach the op
// handlers instead of stopping at "dim 0 is dynamic".
//
// The importer's entry point reads a file, so each input is written to a
// per-process temporary directory first (a few microseconds on tmpfs). When
// ZPLAN_FUZZ_MODEL_DIR is set, its *.data files (ONNX external data) are
// linked into that directory, so a model with external weights is read
// through them. ZPLAN_FUZZ_VERBOSE=1 prints why each input was refused.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/OnnxImporter.h"
#include "fuzz/FuzzSupport.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "onnx/onnx.pb.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

namespace {

/// The per-process directory holding the model file (and linked external
/// data); removed at exit.
/// The --input-shape equivalents for `model`: every graph input (that is not
/// an initializer) with a dynamic dimension gets a static shape.
zplan::ImportOptions bindDynamicInputs(const onnx::ModelProto &model) {
  zplan::ImportOptions options;
  std::set<std::string> initializers;
  for (const onnx::TensorProto &tensor : model.graph().initializer())
    initializers.insert(tensor.name());
  std::map<std::string, int64_t> symbolValues;
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    if (initializers.count(input.name()) || !input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      continue;
    const onnx::TensorShapeProto &shape = input.type().tensor_type().shape();
    std::vector<int64_t> dims;
    bool dynamic = false;
    for (int d = 0; d < shape.dim_size(); ++d) {
      const onnx::TensorShapeProto::Dimension &dim = shape.dim(d);
      if (dim.has_dim_value() && dim.dim_value() >= 0) {
        dims.push_back(dim.dim_value());
        continue;
      }
      dynamic = true;
      int64_t byPosition = d == 0 ? 2 : d == 1 ? 16 : 1;
      if (!dim.has_dim_param()) {
        dims.push_back(1);
        continue;
      }
      dims.push_back(
          symbolValues.emplace(dim.dim_param(), byPosition).first->second);
    }
    if (dynamic)
      options.inputShapes[input.name()] = dims;
  }
  return options;
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  zplan::fuzz::initializeHarness("importer");
  if (const char *modelDir = std::getenv("ZPLAN_FUZZ_MODEL_DIR")) {
    std::error_code ignored;
    for (const auto &entry :
         std::filesystem::directory_iterator(modelDir, ignored))
      if (entry.path().extension() == ".data")
        std::filesystem::create_symlink(
            std::filesystem::absolute(entry.path()),
            zplan::fuzz::workDirectory / entry.path().filename(), ignored);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  // Bytes that are not a ModelProto stop at the importer's first check; skip
  // the file write and the context for them.
  onnx::ModelProto model;
  if (!model.ParseFromArray(data, static_cast<int>(size)))
    return 0;
  zplan::ImportOptions options = bindDynamicInputs(model);

  std::filesystem::path modelPath = zplan::fuzz::workDirectory / "model.onnx";
  {
    std::ofstream file(modelPath, std::ios::binary | std::ios::trunc);
    file.write(reinterpret_cast<const char *>(data),
               static_cast<std::streamsize>(size));
    if (!file) {
      std::perror("zplan-fuzz-importer: cannot write the model file");
      std::abort();
    }
  }

  // A fresh context per input: nothing interned by one input (attributes,
  // types) outlives it, so memory stays flat over millions of runs.
  mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  auto module = zplan::importOnnxModel(context, modelPath.string(), options);
  if (!module) {
    std::string message = llvm::toString(module.takeError());
    // To see why seeds stop short of the op handlers.
    if (std::getenv("ZPLAN_FUZZ_VERBOSE"))
      llvm::errs() << "zplan-fuzz-importer: refused: " << message << "\n";
    // The importer verifies what it built and reports a failure as its own
    // bug; to the fuzzer that is a finding, not a refused input. Matched as
    // the message's start: names from the model appear inside other
    // messages, and libFuzzer learns the strings this harness compares
    // against, so a substring match is fooled by a node named after it.
    if (llvm::StringRef(message).starts_with(
            "the imported module does not verify (an importer bug)")) {
      llvm::errs() << "zplan-fuzz-importer: importer bug: " << message << "\n";
      std::abort();
    }
    return 0;
  }
  if (mlir::failed(mlir::verify(**module))) {
    llvm::errs() << "zplan-fuzz-importer: the imported module does not "
                    "verify\n";
    std::abort();
  }
  return 0;
}
