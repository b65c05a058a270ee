//===- Files.cpp - zrun's own file I/O: bounded reads, staged writes ------===//

#include "runtime/tooling/Files.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

using namespace zplan;
using namespace zplan::tooling;

//===----------------------------------------------------------------------===//
// Identity
//===----------------------------------------------------------------------===//

FileIdentity FileIdentity::of(const std::string &path) {
  FileIdentity identity;
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    identity.exists = true;
    identity.device = static_cast<uint64_t>(info.st_dev);
    identity.inode = static_cast<uint64_t>(info.st_ino);
  }
  // weakly_canonical resolves what exists (symbolic links, "..") and
  // normalises the rest, so "out/../a.npy" and "./a.npy" name one file
  // even before it is created.
  std::error_code error;
  std::filesystem::path normal = std::filesystem::weakly_canonical(
      std::filesystem::absolute(path, error), error);
  identity.normalPath = error ? path : normal.string();
  return identity;
}

bool FileIdentity::sameAs(const FileIdentity &other) const {
  if (exists && other.exists)
    return device == other.device && inode == other.inode;
  return normalPath == other.normalPath;
}

Status zplan::tooling::checkWritable(const std::string &path,
                                     const std::string &what) {
  std::filesystem::path directory = std::filesystem::path(path).parent_path();
  if (directory.empty())
    directory = ".";
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error))
    return failure("cannot write ", what, " to ", inQuotes(path), ": ",
                   "directory ", inQuotes(directory.string()),
                   " does not exist");
  if (::access(directory.c_str(), W_OK) != 0)
    return failure("cannot write ", what, " to ", inQuotes(path), ": ",
                   "directory ", inQuotes(directory.string()), ": ",
                   std::strerror(errno));
  if (std::filesystem::is_directory(path, error))
    return failure("cannot write ", what, " to ", inQuotes(path),
                   ": it is a directory");
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Staged files
//===----------------------------------------------------------------------===//

StagedFile::StagedFile(StagedFile &&other) noexcept
    : finalPath(std::move(other.finalPath)),
      temporaryPath(std::move(other.temporaryPath)),
      description(std::move(other.description)) {
  other.temporaryPath.clear();
}

StagedFile &StagedFile::operator=(StagedFile &&other) noexcept {
  if (this != &other) {
    discard();
    finalPath = std::move(other.finalPath);
    temporaryPath = std::move(other.temporaryPath);
    description = std::move(other.description);
    other.temporaryPath.clear();
  }
  return *this;
}

StagedFile::~StagedFile() { discard(); }

void StagedFile::discard() {
  if (!temporaryPath.empty())
    ::unlink(temporaryPath.c_str());
  temporaryPath.clear();
}

Status StagedFile::stage(const std::string &path, std::string_view bytes,
                         std::string_view what) {
  discard();
  finalPath = path;
  description = std::string(what);
  std::filesystem::path target(path);
  std::filesystem::path directory = target.parent_path();
  // A hidden name in the same directory: rename() is atomic only within
  // one file system.
  static std::atomic<unsigned> counter{0};
  std::string name = "." + target.filename().string() + ".zrun-" +
                     std::to_string(::getpid()) + "-" +
                     std::to_string(counter++) + ".tmp";
  std::string temporary = (directory / name).string();
  int descriptor =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (descriptor < 0)
    return failure("cannot write ", description, ": cannot create ",
                   inQuotes(temporary), ": ", std::strerror(errno));
  temporaryPath = temporary;
  const char *cursor = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t written = ::write(descriptor, cursor, left);
    if (written < 0 && errno == EINTR)
      continue;
    if (written < 0) {
      int code = errno;
      ::close(descriptor);
      discard();
      return failure("cannot write ", description, ": ", std::strerror(code));
    }
    cursor += written;
    left -= static_cast<size_t>(written);
  }
  if (::fsync(descriptor) != 0 || ::close(descriptor) != 0) {
    int code = errno;
    discard();
    return failure("cannot write ", description, ": ", std::strerror(code));
  }
  return Status::success();
}

Status StagedFile::commit() {
  if (temporaryPath.empty())
    return failure("cannot write ", description, ": nothing was staged");
  if (::rename(temporaryPath.c_str(), finalPath.c_str()) != 0) {
    int code = errno;
    discard();
    return failure("cannot write ", description, ": cannot rename onto ",
                   inQuotes(finalPath), ": ", std::strerror(code));
  }
  temporaryPath.clear();
  return Status::success();
}

Status StagedFiles::stage(const std::string &path, std::string_view bytes,
                          std::string_view what) {
  files.emplace_back();
  Status status = files.back().stage(path, bytes, what);
  // Drop every staged file at the first failure: a run that fails leaves
  // no temporary behind, even if its caller keeps the set.
  if (!status.ok())
    files.clear();
  return status;
}

Status StagedFiles::commitAll() {
  for (size_t index = 0; index < files.size(); ++index)
    if (Status status = files[index].commit(); !status.ok()) {
      for (size_t done = 0; done < index; ++done)
        ::unlink(files[done].path().c_str());
      files.clear();
      return status;
    }
  files.clear();
  return Status::success();
}

Status zplan::tooling::writeFileAtomically(const std::string &path,
                                           std::string_view bytes,
                                           std::string_view what) {
  StagedFile file;
  if (Status status = file.stage(path, bytes, what); !status.ok())
    return status;
  return file.commit();
}

Status
zplan::tooling::checkOverwritesNothing(const std::vector<NamedFile> &read,
                                       const std::vector<NamedFile> &written) {
  std::vector<FileIdentity> readIds, writtenIds;
  for (const NamedFile &file : read)
    readIds.push_back(FileIdentity::of(file.path));
  for (const NamedFile &file : written)
    writtenIds.push_back(FileIdentity::of(file.path));
  for (size_t index = 0; index < written.size(); ++index) {
    const NamedFile &output = written[index];
    for (size_t input = 0; input < read.size(); ++input)
      if (writtenIds[index].sameAs(readIds[input]))
        return failure(output.what, " would overwrite ", read[input].what, ": ",
                       inQuotes(output.path), " is ",
                       inQuotes(read[input].path));
    for (size_t other = 0; other < index; ++other)
      if (writtenIds[index].sameAs(writtenIds[other]))
        return failure(output.what, " and ", written[other].what,
                       " are both written to ", inQuotes(output.path),
                       output.path == written[other].path
                           ? ""
                           : " (as " + inQuotes(written[other].path) + ")");
  }
  return Status::success();
}
