//===- DurableFiles.cpp - files that survive a crash, written in order ----===//

#include "runtime/train/DurableFiles.h"

#include "runtime/plan/ReadableFile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

using namespace zplan;
using namespace zplan::train;

namespace {

Status writeAll(int descriptor, const void *data, uint64_t bytes,
                const std::string &path) {
  const char *cursor = static_cast<const char *>(data);
  while (bytes > 0) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(bytes, 1u << 30));
    ssize_t written = ::write(descriptor, cursor, chunk);
    if (written < 0 && errno == EINTR)
      continue;
    if (written < 0)
      return errnoFailure("cannot write checkpoint file", path);
    cursor += written;
    bytes -= static_cast<uint64_t>(written);
  }
  return Status::success();
}

} // namespace

Status zplan::train::errnoFailure(const std::string &what,
                                  const std::string &path) {
  return failure(what, " ", inQuotes(path), ": ", std::strerror(errno));
}

Status zplan::train::syncDirectory(const std::string &directory) {
  int descriptor =
      ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (descriptor < 0)
    return errnoFailure("cannot open checkpoint directory", directory);
  int result = ::fsync(descriptor);
  int code = errno;
  ::close(descriptor);
  if (result != 0) {
    errno = code;
    return errnoFailure("cannot sync checkpoint directory", directory);
  }
  return Status::success();
}

Status zplan::train::writeNewFile(const std::string &path,
                                  const std::vector<FilePiece> &pieces,
                                  const std::function<void()> &atHalf) {
  int descriptor =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (descriptor < 0)
    return errnoFailure("cannot create checkpoint file", path);
  uint64_t total = 0;
  for (const FilePiece &piece : pieces)
    total += piece.bytes;
  uint64_t half = total / 2, written = 0;
  bool halfReported = false;
  // Writes one chunk of a piece, split where it crosses the middle, so the
  // hook sees exactly half of the file on disk.
  auto emit = [&](const void *bytes, uint64_t left) -> Status {
    const char *data = static_cast<const char *>(bytes);
    if (!halfReported && written + left > half) {
      uint64_t first = half - written;
      ZR_RETURN_IF_ERROR(writeAll(descriptor, data, first, path));
      data += first;
      left -= first;
      written += first;
      if (atHalf)
        atHalf();
      halfReported = true;
    }
    ZR_RETURN_IF_ERROR(writeAll(descriptor, data, left, path));
    written += left;
    return Status::success();
  };
  Status status = Status::success();
  for (const FilePiece &piece : pieces) {
    uint64_t before = written;
    status =
        piece.produce ? piece.produce(emit) : emit(piece.data, piece.bytes);
    if (status.ok() && written - before != piece.bytes)
      status = failure("checkpoint file ", inQuotes(path), ": a piece gave ",
                       written - before, " bytes of its ", piece.bytes);
    if (!status.ok())
      break;
  }
  if (status.ok() && !halfReported && atHalf)
    atHalf();
  if (status.ok() && ::fsync(descriptor) != 0)
    status = errnoFailure("cannot sync checkpoint file", path);
  if (::close(descriptor) != 0 && status.ok())
    status = errnoFailure("cannot close checkpoint file", path);
  return status;
}

Status zplan::train::readSmallFile(const std::string &path,
                                   std::string_view what, uint64_t limit,
                                   std::string &text) {
  plan::ReadableFile file;
  ZR_RETURN_IF_ERROR(file.open(path, what));
  if (file.bytes() > limit)
    return failure(file.subject(), " is ", file.bytes(),
                   " bytes; a checkpoint's is at most ", limit);
  text.assign(file.bytes(), '\0');
  return file.read(0, file.bytes(), text.data());
}
