//===- OutputFiles.h - zcc's outputs, all written or none -----------------===//
//
// Every file zcc writes (plan, weights, dump files) is written to a
// temporary beside it and renamed into place only once all of them are
// complete, so a failing compile leaves none of its files; no output may
// name an input (the model or its external data), compared as files on
// disk, not as strings. The temporaries are registered with the crash
// handler (CrashHandler.h), which removes them if zcc dies on the way.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_OUTPUTFILES_H
#define ZPLAN_COMPILER_OUTPUTFILES_H

#include "compiler/Options.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace zplan {

/// The files one compile writes. Each is written to a temporary beside its
/// final path; commit() renames them all once every one is complete, and
/// whatever was not committed is removed when this object dies, so a failed
/// compile leaves none of its files.
class PendingOutputs {
public:
  PendingOutputs() = default;
  PendingOutputs(const PendingOutputs &) = delete;
  PendingOutputs &operator=(const PendingOutputs &) = delete;
  ~PendingOutputs();

  /// Creates `directory` and its missing parents; the ones created here are
  /// removed again unless the outputs are committed.
  llvm::Error addDirectory(llvm::StringRef directory);

  /// A new temporary for `path`, created empty and registered with the crash
  /// handler; `fill` writes it.
  llvm::Error
  add(llvm::StringRef path,
      llvm::function_ref<llvm::Error(llvm::StringRef temporary)> fill);

  /// Writes `bytes` as `path`.
  llvm::Error addBytes(llvm::StringRef path, llvm::StringRef bytes);

  /// Renames every temporary into place, in the order added. A failure
  /// removes what was already renamed.
  llvm::Error commit();

private:
  struct Output {
    std::string path;
    std::string temporary;
  };

  std::vector<Output> outputs;
  /// Renamed during a commit() that has not finished.
  std::vector<std::string> committed;
  /// Made for the dump files, outermost first.
  std::vector<std::string> createdDirectories;
};

/// Where the dump `kind` (one of kDumpKinds) is written in `dumpDir`.
std::string dumpFilePath(llvm::StringRef dumpDir, llvm::StringRef kind);

/// Refuses an output of `options` (-o, its weights file, the dump files in
/// --dump-dir) that is a directory (it could never be renamed into place)
/// or that is the same file as one of `inputs`: a compile must not destroy
/// what it reads. Also refuses an -o whose directory does not exist, found
/// before any work rather than when the plan is written.
llvm::Error checkOutputPaths(const CompileOptions &options,
                             llvm::ArrayRef<std::string> inputs);

} // namespace zplan

#endif // ZPLAN_COMPILER_OUTPUTFILES_H
