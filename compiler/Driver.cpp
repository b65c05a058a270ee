//===- Driver.cpp - what zcc does, as a library call ----------------------===//
//
// Validation happens before any work so that a bad flag never leaves a
// half-done run behind, and dump files are written through a temporary file
// and renamed (llvm::writeToOutput), so they appear complete or not at all.
//
//===----------------------------------------------------------------------===//

#include "compiler/Driver.h"

#include "compiler/Pipeline.h"
#include "compiler/Registration.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>

using namespace zplan;

static llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
}

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
  return static_cast<uint64_t>(std::llround(value * *scale));
}

llvm::Error zplan::validateOptions(const CompileOptions &options) {
  if (options.worldSize < 1)
    return makeError("--world-size must be at least 1, got " +
                     llvm::Twine(options.worldSize));
  if (!llvm::is_contained({"infer", "train", "generate"}, options.mode))
    return makeError("unknown --mode '" + options.mode +
                     "'; expected infer, train or generate");
  if (!llvm::is_contained({"h200", "h100", "a100", "cpu"}, options.hardware))
    return makeError("unknown --hardware '" + options.hardware +
                     "'; expected h200, h100, a100 or cpu");
  for (const std::string &dump : options.dumps)
    if (!llvm::is_contained(kDumpKinds, dump))
      return makeError("unknown --dump '" + dump +
                       "'; expected ir, schedule, memory or report");
  if (options.mode != "infer")
    return makeError("--mode " + options.mode +
                     " is not available yet; this zcc compiles --mode infer");
  return llvm::Error::success();
}

/// Writes `text` as `name` in the dump directory, or to `out` when there is
/// none. A file is written whole or not at all.
static llvm::Error emitDump(const CompileOptions &options, llvm::StringRef name,
                            llvm::StringRef text, llvm::raw_ostream &out) {
  if (options.dumpDir.empty()) {
    out << text;
    return llvm::Error::success();
  }
  if (std::error_code error =
          llvm::sys::fs::create_directories(options.dumpDir))
    return makeError("cannot create --dump-dir '" + options.dumpDir +
                     "': " + error.message());
  llvm::SmallString<256> path(options.dumpDir);
  llvm::sys::path::append(path, name);
  return llvm::writeToOutput(path, [&](llvm::raw_ostream &file) {
    file << text;
    return llvm::Error::success();
  });
}

llvm::Error zplan::compileModel(const CompileOptions &options,
                                llvm::raw_ostream &out,
                                llvm::raw_ostream &notes) {
  if (llvm::Error error = validateOptions(options))
    return error;

  mlir::DialectRegistry registry;
  registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  // Diagnostics from passes become the error message, not stray output.
  std::string diagnostics;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    llvm::raw_string_ostream os(diagnostics);
    os << diag.getLocation() << ": " << diag << "\n";
    return mlir::success();
  });

  auto module = importOnnxModel(context, options.modelPath, options.import);
  if (!module)
    return module.takeError();

  mlir::PassManager pm(&context);
  buildImportPipeline(pm);
  if (mlir::failed(pm.run(**module)))
    return makeError("the import pipeline failed:\n" + diagnostics);

  if (options.dumps.count("ir")) {
    std::string text;
    llvm::raw_string_ostream os(text);
    (*module)->print(os);
    os << "\n";
    if (llvm::Error error = emitDump(options, "ir.mlir", text, out))
      return error;
  }
  for (const char *later : {"schedule", "memory", "report"})
    if (options.dumps.count(later))
      notes << "zcc: note: --dump " << later
            << " comes with the schedule stage, which this zcc does not "
               "have yet; nothing dumped\n";
  if (!options.outputPath.empty())
    notes << "zcc: note: plan emission (-o " << options.outputPath
          << ") comes with the schedule stage; no plan written\n";
  return llvm::Error::success();
}
