//===- Driver.cpp - what zcc does, as a library call ----------------------===//
//
// compileModel() is the order of zcc's stages and nothing else: each stage
// is a call into the file that owns it (Options.h, FrontEnd.h,
// ModulePlanSearch.h or OffloadChoice.h, plan/Report.h, OutputFiles.h), and the
// crash phase is named before each, so that a crash says which stage it was in.
//
//===----------------------------------------------------------------------===//

#include "compiler/Driver.h"

#include "compiler/CrashHandler.h"
#include "compiler/Errors.h"
#include "compiler/FrontEnd.h"
#include "compiler/ModulePlanSearch.h"
#include "compiler/OffloadChoice.h"
#include "compiler/OutputFiles.h"
#include "compiler/Registration.h"
#include "compiler/analysis/CostModel.h"
#include "compiler/plan/Dumps.h"
#include "compiler/plan/Report.h"
#include "compiler/plan/WeightsWriter.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "runtime/plan/PlanFormat.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

using namespace zplan;

llvm::Error zplan::compileModel(const CompileOptions &options,
                                llvm::raw_ostream &out,
                                llvm::raw_ostream &notes) {
  if (llvm::Error error = validateOptions(options))
    return error;
  if (llvm::Error error = checkOutputPaths(options, {options.modelPath}))
    return error;
  llvm::Expected<HardwareProfile> profile =
      loadHardwareProfile(options.hardware, options.hardwareProfile);
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
  for (const std::string &warning : collectTieWarnings(**module))
    notes << "zcc: warning: " << warning << "\n";
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
  // --offload auto chooses --offload-optimizer and --offload-params; what
  // follows uses the options it chose.
  CompileOptions resolved = options;
  std::string offloadChoice;
  llvm::Expected<PlanSearchResult> search =
      options.offload == "auto"
          ? chooseOffload(**module, options, cost, diagnostics, searched,
                          resolved, offloadChoice)
          : searchModulePlan(**module, options, options.policy, cost,
                             diagnostics, searched);
  if (!search)
    return search.takeError();
  if (!offloadChoice.empty())
    notes << "zcc: " << offloadChoice << "\n";
  EmittedPlan &chosen = *searched.plans[search->chosen];

  setCrashPhase("writing the dumps");
  PendingOutputs outputs;
  // A dump goes to its file in --dump-dir (committed with the plan), or to
  // `out`.
  auto emitDump = [&](llvm::StringRef kind,
                      llvm::StringRef text) -> llvm::Error {
    if (options.dumpDir.empty()) {
      out << text;
      return llvm::Error::success();
    }
    if (llvm::Error error = outputs.addDirectory(options.dumpDir))
      return error;
    return outputs.addBytes(dumpFilePath(options.dumpDir, kind), text);
  };
  if (options.dumps.count("ir"))
    if (llvm::Error error = emitDump(
            "ir",
            (importedIr + "// -----// IR after the schedule (policy " +
             spell(options.policy) + ") //----- //\n// " + search->summary +
             "\n" + searched.scheduledIr[search->chosen])
                .str()))
      return error;
  if (options.dumps.count("schedule"))
    if (llvm::Error error = emitDump("schedule", formatScheduleDump(chosen)))
      return error;
  if (options.dumps.count("memory"))
    if (llvm::Error error = emitDump("memory", formatMemoryDump(chosen)))
      return error;
  if (options.dumps.count("report")) {
    SearchedPlans baselinePlans;
    std::string note;
    std::optional<ReportedPlan> baseline =
        findBaselinePlan(**module, resolved, cost, diagnostics, searched,
                         *search, baselinePlans, note);
    bool combined = options.mode == CompileMode::TrainGenerate ||
                    options.mode == CompileMode::TrainInfer;
    if (llvm::Error error = emitDump(
            "report", formatCompileReport(
                          searched.reported(search->chosen, options.policy),
                          baseline, combined, search->summary, note)))
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
