//===- ReadableFile.cpp - read a file zrun was given, within its size -----===//

#include "runtime/plan/ReadableFile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace zplan;
using namespace zplan::plan;

ReadableFile::~ReadableFile() {
  if (descriptor >= 0)
    ::close(descriptor);
}

std::string ReadableFile::subject() const {
  return kind + " " + inQuotes(filePath);
}

Status ReadableFile::open(const std::string &path, std::string_view what) {
  // Opening again replaces the file: the old descriptor is closed, not lost.
  if (descriptor >= 0)
    ::close(descriptor);
  descriptor = -1;
  size = 0;
  filePath = path;
  kind = what;
  // O_NONBLOCK: opening a FIFO with no writer would otherwise block forever
  // before fstat could tell that it is not a regular file.
  descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (descriptor < 0)
    return failure("cannot open ", subject(), ": ", std::strerror(errno));
  struct stat info;
  if (::fstat(descriptor, &info) != 0)
    return failure("cannot stat ", subject(), ": ", std::strerror(errno));
  if (S_ISDIR(info.st_mode))
    return failure(subject(), " is not a regular file (it is a directory)");
  // A device or a pipe has no size to bound the read by (/dev/zero never
  // ends): only regular files are read.
  if (!S_ISREG(info.st_mode))
    return failure(subject(), " is not a regular file");
  size = static_cast<uint64_t>(info.st_size);
  return Status::success();
}

Status ReadableFile::read(uint64_t offset, uint64_t count,
                          void *destination) const {
  uint64_t end;
  if (__builtin_add_overflow(offset, count, &end) || end > size)
    return failure(subject(), " is ", size, " bytes; cannot read ", count,
                   " bytes at byte ", offset);
  auto *bytes = static_cast<char *>(destination);
  while (count > 0) {
    // pread takes at most SSIZE_MAX; Linux transfers at most ~2 GiB a call.
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(count, 1u << 30));
    ssize_t got = ::pread(descriptor, bytes, chunk, static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return failure("cannot read ", subject(), " at byte ", offset, ": ",
                     std::strerror(errno));
    // The size was checked when opening: the file shrank under us.
    if (got == 0)
      return failure(subject(), " ended at byte ", offset,
                     " while reading it (was it changed while zrun ran?)");
    bytes += got;
    offset += static_cast<uint64_t>(got);
    count -= static_cast<uint64_t>(got);
  }
  return Status::success();
}
