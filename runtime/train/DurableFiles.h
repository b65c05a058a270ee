//===- DurableFiles.h - files that survive a crash, written in order ------===//
//
// A checkpoint is safe only if what makes it visible (a manifest, a name,
// `latest`) reaches the disk after what it points to: these write a file
// whole and fsync it, fsync the directory that holds a new name, and read a
// small file with a bound. Private to runtime/train.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_DURABLEFILES_H
#define ZPLAN_RUNTIME_TRAIN_DURABLEFILES_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace zplan::train {

/// "WHAT 'PATH': strerror(errno)".
Status errnoFailure(const std::string &what, const std::string &path);

/// A piece of a file to write: bytes at `data`.
struct FilePiece {
  const void *data;
  uint64_t bytes;
  /// Instead of `data`: writes the piece's bytes by calling `emit` on
  /// consecutive chunks (a region read part by part).
  std::function<Status(
      const std::function<Status(const void *, uint64_t)> &emit)>
      produce = nullptr;
};

/// Creates `path` (it must not exist), writes `pieces`, calling `atHalf`
/// once half of the bytes are written, and fsyncs it.
Status writeNewFile(const std::string &path,
                    const std::vector<FilePiece> &pieces,
                    const std::function<void()> &atHalf);

/// Makes the names in `directory` durable (a rename or create in it).
Status syncDirectory(const std::string &directory);

/// Reads the regular file `path` (`what` names it in messages) into `text`;
/// fails when it holds more than `limit` bytes.
Status readSmallFile(const std::string &path, std::string_view what,
                     uint64_t limit, std::string &text);

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_DURABLEFILES_H
