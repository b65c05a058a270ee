//===- ReadableFile.h - read a file zrun was given, within its size -------===//
//
// Every file zrun reads (the plan, the weights, the inputs) comes from a
// user and may be anything: a device such as /dev/zero that never ends, a
// FIFO, a directory, a file that shrinks while it is read. This reader opens
// regular files only, takes their size from fstat once, and reads exact
// byte ranges inside that size with pread, so that memory is bounded by what
// the caller declared and a short or changing file is an error, not a short
// read noticed later as garbage.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_PLAN_READABLEFILE_H
#define ZPLAN_RUNTIME_PLAN_READABLEFILE_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace zplan::plan {

/// A regular file opened for reading: its descriptor (closed on destruction)
/// and the size fstat reported when it was opened.
class ReadableFile {
public:
  ReadableFile() = default;
  ReadableFile(const ReadableFile &) = delete;
  ReadableFile &operator=(const ReadableFile &) = delete;
  ~ReadableFile();

  /// Opens `path`; fails for anything but a regular file. `what` ("plan
  /// file", "npy file") names it in messages. A second open closes the
  /// first file.
  Status open(const std::string &path, std::string_view what);

  /// Reads exactly `count` bytes at `offset` into `destination`; fails when
  /// the range is not inside the size seen at open() or the file shrank.
  Status read(uint64_t offset, uint64_t count, void *destination) const;

  /// The size fstat reported at open().
  uint64_t bytes() const { return size; }
  const std::string &path() const { return filePath; }
  /// "plan file 'g.zplan'", as messages name the file.
  std::string subject() const;

private:
  int descriptor = -1;
  uint64_t size = 0;
  std::string filePath;
  std::string kind;
};

} // namespace zplan::plan

#endif // ZPLAN_RUNTIME_PLAN_READABLEFILE_H
