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
#include "compiler/analysis/CostModel.h"
#include "compiler/plan/Dumps.h"
#include "compiler/plan/PlanEmitter.h"
#include "compiler/plan/Simulator.h"
#include "compiler/plan/WeightsWriter.h"
#include "runtime/plan/PlanFormat.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <optional>

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
  if (options.policy != "default" && options.policy != "jit")
    return makeError("unknown --policy '" + options.policy +
                     "'; expected default or jit");
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

/// Writes `bytes` to `path` through a temporary file renamed into place.
static llvm::Error writeFileAtomically(llvm::StringRef path,
                                       llvm::StringRef bytes) {
  return llvm::writeToOutput(path, [&](llvm::raw_ostream &file) {
    file << bytes;
    return llvm::Error::success();
  });
}

/// Runs the schedule pipeline for `policy` under `budget` on a copy of
/// `module` and emits its plan.
static llvm::Expected<EmittedPlan>
scheduleAndEmitOnce(mlir::ModuleOp module, const CompileOptions &options,
                    llvm::StringRef policy, uint64_t budget,
                    const CostModel &cost, std::string &diagnostics,
                    std::string *scheduledIr) {
  mlir::OwningOpRef<mlir::ModuleOp> copy = module.clone();
  mlir::PassManager pm(module.getContext());
  ScheduleOptions schedule;
  schedule.worldSize = options.worldSize;
  schedule.policy = policy.str();
  schedule.memoryBudget = budget;
  schedule.hardware = options.hardware;
  schedule.bucketBytes = options.bucketBytes;
  schedule.persistenceThreshold = options.persistenceThreshold;
  schedule.maxInFlight = options.maxInFlight;
  schedule.maxInFlightBytes = options.maxInFlightBytes;
  buildSchedulePipeline(pm, schedule);
  diagnostics.clear();
  if (mlir::failed(pm.run(*copy)))
    return makeError("scheduling (policy " + policy + ") failed: " +
                     llvm::StringRef(diagnostics).rtrim());
  if (scheduledIr) {
    scheduledIr->clear();
    llvm::raw_string_ostream os(*scheduledIr);
    copy->print(os);
    os << "\n";
  }
  EmitOptions emit;
  emit.hardware = options.hardware;
  emit.memoryBudget = options.memoryBudget.value_or(0);
  emit.modelName = llvm::sys::path::filename(options.modelPath).str();
  if (!options.outputPath.empty())
    emit.weightsFile =
        llvm::sys::path::filename(options.outputPath).str() + ".weights";
  return emitPlan(*copy, emit, cost);
}

/// The schedule keeps the live bytes within the budget; the planned arena
/// can still exceed them by its fragmentation (a few percent). Then the
/// schedule is made again under a budget lowered by the overshoot, a few
/// times, before giving up with the last plan's numbers.
static llvm::Expected<EmittedPlan>
scheduleAndEmit(mlir::ModuleOp module, const CompileOptions &options,
                llvm::StringRef policy, const CostModel &cost,
                std::string &diagnostics, std::string *scheduledIr) {
  uint64_t budget = options.memoryBudget.value_or(0);
  uint64_t target = budget;
  std::string overBudget;
  for (int attempt = 0;; ++attempt) {
    llvm::Expected<EmittedPlan> emitted = scheduleAndEmitOnce(
        module, options, policy, target, cost, diagnostics, scheduledIr);
    // A tighter retry that cannot be scheduled: the first plan's overshoot
    // is the better explanation.
    if (!emitted && attempt > 0) {
      llvm::consumeError(emitted.takeError());
      return makeError(overBudget);
    }
    if (!emitted || budget == 0)
      return emitted;
    uint64_t total = emitted->residentBytes + emitted->arena.arenaBytes;
    if (total <= budget)
      return emitted;
    uint64_t over = total - budget;
    if (overBudget.empty())
      overBudget =
          ("the planned memory does not fit the budget of " +
           llvm::Twine(budget) + " B per rank (policy " + policy +
           "): shards and persistent groups " +
           llvm::Twine(emitted->residentBytes) + " B + arena " +
           llvm::Twine(emitted->arena.arenaBytes) + " B (live peak " +
           llvm::Twine(emitted->arena.lowerBound) + " B at instruction #" +
           llvm::Twine(emitted->arena.peakIndex) + ") = " + llvm::Twine(total) +
           " B, " + llvm::Twine(over) + " B over, also when rescheduled "
           "under tighter budgets")
              .str();
    if (attempt == 3 || over >= target)
      return makeError(overBudget);
    target -= over;
  }
}

llvm::Error zplan::compileModel(const CompileOptions &options,
                                llvm::raw_ostream &out,
                                llvm::raw_ostream &notes) {
  if (llvm::Error error = validateOptions(options))
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

  auto module = importOnnxModel(context, options.modelPath, options.import);
  if (!module)
    return module.takeError();

  mlir::PassManager pm(&context);
  buildImportPipeline(pm);
  if (mlir::failed(pm.run(**module)))
    return makeError("the import pipeline failed:\n" + diagnostics);

  std::string importedIr, scheduledIr;
  if (options.dumps.count("ir")) {
    llvm::raw_string_ostream os(importedIr);
    os << "// -----// IR after import and canonicalisation //----- //\n";
    (*module)->print(os);
    os << "\n";
  }
  llvm::Expected<EmittedPlan> chosen =
      scheduleAndEmit(**module, options, options.policy, cost, diagnostics,
                      options.dumps.count("ir") ? &scheduledIr : nullptr);
  if (!chosen)
    return chosen.takeError();

  // The default policy never does worse than hook-style placement: the
  // prefetch pass moves one gather at a time in program order, and under a
  // tight budget the early ones can take the headroom the later ones need.
  // So the jit placement is compiled too and kept when the cost model says
  // it is faster; the report says which one was kept.
  std::string choice;
  // The jit plan, when compiled here: the report's baseline reuses it.
  std::optional<EmittedPlan> jitPlan;
  if (options.policy == "default") {
    std::string hookIr;
    llvm::Expected<EmittedPlan> hook =
        scheduleAndEmit(**module, options, "jit", cost, diagnostics,
                        options.dumps.count("ir") ? &hookIr : nullptr);
    if (hook) {
      if (options.dumps.count("report"))
        jitPlan = *hook;
      double ownTime =
          simulate(chosen->plan.programs(0), chosen->seconds).totalSeconds;
      double hookTime =
          simulate(hook->plan.programs(0), hook->seconds).totalSeconds;
      if (hookTime < ownTime) {
        choice = "// placement: the default policy kept the hook-distance "
                 "placement (" +
                 std::to_string(hookTime * 1e3) + " ms simulated) over the "
                 "prefetch pass's (" + std::to_string(ownTime * 1e3) +
                 " ms)\n";
        std::swap(*chosen, *hook);
        std::swap(scheduledIr, hookIr);
      }
    } else {
      llvm::consumeError(hook.takeError());
    }
  }

  if (options.dumps.count("ir"))
    if (llvm::Error error = emitDump(
            options, "ir.mlir",
            importedIr + "// -----// IR after the schedule (policy " +
                options.policy + ") //----- //\n" + scheduledIr,
            out))
      return error;
  if (options.dumps.count("schedule"))
    if (llvm::Error error = emitDump(options, "schedule.txt",
                                     formatScheduleDump(*chosen), out))
      return error;
  if (options.dumps.count("memory"))
    if (llvm::Error error =
            emitDump(options, "memory.txt", formatMemoryDump(*chosen), out))
      return error;
  if (options.dumps.count("report")) {
    // The other policy, compiled the same way, is the baseline.
    std::string other = options.policy == "jit" ? "default" : "jit";
    llvm::Expected<EmittedPlan> baseline =
        jitPlan ? llvm::Expected<EmittedPlan>(std::move(*jitPlan))
                : scheduleAndEmit(**module, options, other, cost, diagnostics,
                                  nullptr);
    std::vector<std::pair<std::string, const EmittedPlan *>> policies{
        {options.policy, &*chosen}};
    std::string note;
    if (baseline)
      policies.push_back({other, &*baseline});
    else
      note = "// " + other + " policy: " + llvm::toString(baseline.takeError()) +
             "\n";
    if (llvm::Error error = emitDump(options, "report.txt",
                                     formatReport(policies) + choice + note,
                                     out))
      return error;
  }

  if (!options.outputPath.empty()) {
    // Weights first, then the plan: a plan on disk always has its weights.
    std::string weights = options.outputPath + ".weights";
    std::string temporary = weights + ".partial";
    uint64_t planIdentity;
    std::string planBytes = plan::serializePlan(chosen->plan, &planIdentity);
    if (llvm::Error error = writeWeights(chosen->plan, planIdentity,
                                         options.modelPath, temporary)) {
      llvm::sys::fs::remove(temporary);
      return error;
    }
    if (std::error_code code = llvm::sys::fs::rename(temporary, weights))
      return makeError("cannot move the weights into '" + weights +
                       "': " + code.message());
    if (llvm::Error error = writeFileAtomically(options.outputPath, planBytes))
      return error;
    notes << "zcc: wrote " << options.outputPath << " ("
          << chosen->plan.programs(0).instructions_size()
          << " instructions, arena " << formatSize(chosen->arena.arenaBytes)
          << " per rank) and " << weights << "\n";
  }
  return llvm::Error::success();
}
