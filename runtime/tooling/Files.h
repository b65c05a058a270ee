//===- Files.h - zrun's own file I/O: bounded reads, staged writes --------===//
//
// zrun reads files a user names (inputs) and writes files a user names
// (outputs, the trace), and neither may hurt the user. Reads: only regular
// files (never /dev/zero, a FIFO or a terminal, which have no size and would
// grow memory without limit), and never more bytes than the caller declared
// and stat reported (plan::ReadableFile). Writes: every file of a run is staged
// in a temporary beside its path and renamed into place only when all of them
// are staged; a run that fails leaves none of them (DESIGN.md: "outputs appear
// complete or not at all"). And no output may land on a file the run reads or
// on another output: files are compared as the kernel sees them (device and
// inode), not by spelling.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_FILES_H
#define ZPLAN_RUNTIME_TOOLING_FILES_H

#include "runtime/plan/ReadableFile.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zplan::tooling {

/// Which file a path names, as the kernel sees it: device and inode when it
/// exists (following symbolic links), else its absolute, normalised path.
struct FileIdentity {
  bool exists = false;
  uint64_t device = 0;
  uint64_t inode = 0;
  std::string normalPath;

  static FileIdentity of(const std::string &path);
  /// True when both name the same file (or, for files that do not exist
  /// yet, the same path).
  bool sameAs(const FileIdentity &other) const;
};

/// A file a command reads or writes, as its messages name it: "the plan
/// file", "input 'ids'", "output 'logits'".
struct NamedFile {
  std::string what;
  std::string path;
};

/// No file a command writes may be a file it reads, or another file it
/// writes: rename() would replace the input (a run that reads logits.npy and
/// writes logits.npy destroys its own input), and two outputs on one file
/// leave only the last. Compared as files (FileIdentity), not as spellings;
/// names both files when it fails.
Status checkOverwritesNothing(const std::vector<NamedFile> &read,
                              const std::vector<NamedFile> &written);

/// Fails, naming `what` ("output 'logits'") and the reason, when a file
/// cannot be created at `path`: its directory is missing or not writable, or
/// `path` is a directory.
Status checkWritable(const std::string &path, const std::string &what);

/// A file written in two steps: stage() writes the bytes to a temporary file
/// beside `path`; commit() renames it into place. Destroying a staged,
/// uncommitted file removes the temporary.
class StagedFile {
public:
  StagedFile() = default;
  StagedFile(const StagedFile &) = delete;
  StagedFile &operator=(const StagedFile &) = delete;
  StagedFile(StagedFile &&other) noexcept;
  StagedFile &operator=(StagedFile &&other) noexcept;
  ~StagedFile();

  /// Writes `bytes` to a fresh temporary file in the directory of `path`
  /// and flushes it; `what` ("output 'logits'") names it in messages.
  Status stage(const std::string &path, std::string_view bytes,
               std::string_view what);
  /// Renames the temporary onto the path given to stage().
  Status commit();
  /// The path given to stage().
  const std::string &path() const { return finalPath; }

private:
  void discard();

  std::string finalPath;
  std::string temporaryPath;
  std::string description;
};

/// Every file a run writes: staged one by one, committed together. If a
/// stage fails, or the set is destroyed before commitAll(), no temporary is
/// left and no path is touched.
class StagedFiles {
public:
  /// Stages one more file (see StagedFile::stage()).
  Status stage(const std::string &path, std::string_view bytes,
               std::string_view what);
  /// Renames every staged file into place. Should a rename fail (the
  /// directory vanished), the files of this set already renamed are removed
  /// again, so that the run leaves none of its files.
  Status commitAll();

private:
  std::vector<StagedFile> files;
};

/// stage() and commit() of one file.
Status writeFileAtomically(const std::string &path, std::string_view bytes,
                           std::string_view what);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_FILES_H
