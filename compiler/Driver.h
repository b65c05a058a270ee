//===- Driver.h - what zcc does, as a library call ------------------------===//
//
// zcc's main only turns flags into CompileOptions and calls compileModel();
// everything it does lives here so that it can be tested and reused.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_DRIVER_H
#define ZPLAN_COMPILER_DRIVER_H

#include "compiler/import/OnnxImporter.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace zplan {

/// The dumps DESIGN.md defines.
inline constexpr const char *kDumpKinds[] = {"ir", "schedule", "memory",
                                             "report"};

struct CompileOptions {
  std::string modelPath;
  /// The plan to write (-o); empty for none.
  std::string outputPath;
  int64_t worldSize = 1;
  /// infer, train or generate.
  std::string mode = "infer";
  /// h200, h100, a100 or cpu.
  std::string hardware = "cpu";
  /// Bytes per rank; nullopt for no limit.
  std::optional<uint64_t> memoryBudget;
  ImportOptions import;
  std::set<std::string> dumps;
  /// Where dumps go as files; empty to print them on stdout.
  std::string dumpDir;
  /// default (the scheduler's) or jit (hook-based ZeRO-3, the baseline);
  /// the report always shows both.
  std::string policy = "default";
  int64_t bucketBytes = 32 << 20;
  int64_t persistenceThreshold = 100000;
  int64_t maxInFlight = 2;
  int64_t maxInFlightBytes = 0;
};

/// Parses a byte size: a non-negative number with an optional unit, B, KiB,
/// MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000), e.g.
/// "16GiB", "512MiB", "1.5GiB", "4096".
llvm::Expected<uint64_t> parseByteSize(llvm::StringRef text);

/// Checks option values and combinations before any work (world size,
/// mode, hardware, dump kinds).
llvm::Error validateOptions(const CompileOptions &options);

/// Runs zcc: import, canonicalisation, the schedule (for the chosen policy
/// and, for the report, the other one), plan emission, the requested dumps,
/// and with -o the plan and its weights file (`OUT.weights`), each written
/// whole or not at all. Progress notes go to `notes`.
llvm::Error compileModel(const CompileOptions &options,
                         llvm::raw_ostream &out, llvm::raw_ostream &notes);

} // namespace zplan

#endif // ZPLAN_COMPILER_DRIVER_H
