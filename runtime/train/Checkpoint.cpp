//===- Checkpoint.cpp - sharded, atomic, verified training checkpoints ---===//
//
// The order of the file system operations is the whole design (see
// Checkpoint.h): data, then its manifest, then the directory's name, then
// `latest`, then removals; each made durable (fsync of the file, then of
// the directory holding its name) before the next one can make it visible.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Checkpoint.h"

#include "runtime/comm/Agreement.h"

#include "runtime/plan/ReadableFile.h"
#include "runtime/support/Checksum.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace zplan;
using namespace zplan::train;
namespace fs = std::filesystem;

namespace {

constexpr const char *kFormat = "zplan-checkpoint 1";
constexpr const char *kManifest = "manifest.txt";
constexpr const char *kLatest = "latest";
constexpr const char *kTemporaryPrefix = ".tmp-";
/// The largest manifest load() reads; real ones are a few KiB per rank.
constexpr uint64_t kMaxManifestBytes = 64ull << 20;

std::string stepName(uint64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08llu",
                static_cast<unsigned long long>(step));
  return name;
}

/// The step of a directory named step-<digits>, or false.
bool parseStepName(const std::string &name, uint64_t &step) {
  if (name.size() <= 5 || name.compare(0, 5, "step-") != 0 ||
      name.size() > 5 + 19)
    return false;
  step = 0;
  for (size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return false;
    step = step * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  return true;
}

std::string hexText(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(value));
  return text;
}

Status errnoFailure(const std::string &what, const std::string &path) {
  return failure(what, " ", inQuotes(path), ": ", std::strerror(errno));
}

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

/// Makes the names in `directory` durable (a rename or create in it).
Status syncDirectory(const std::string &directory) {
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

/// A piece of a file to write: bytes at `data`.
struct Piece {
  const void *data;
  uint64_t bytes;
};

/// Creates `path` (it must not exist), writes `pieces`, calling `atHalf`
/// once half of the bytes are written, and fsyncs it.
Status writeNewFile(const std::string &path, const std::vector<Piece> &pieces,
                    const std::function<void()> &atHalf) {
  int descriptor =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (descriptor < 0)
    return errnoFailure("cannot create checkpoint file", path);
  uint64_t total = 0;
  for (const Piece &piece : pieces)
    total += piece.bytes;
  uint64_t half = total / 2, written = 0;
  bool halfReported = false;
  Status status = Status::success();
  for (const Piece &piece : pieces) {
    const char *data = static_cast<const char *>(piece.data);
    uint64_t left = piece.bytes;
    // Split the piece that crosses the middle, so the hook sees exactly
    // half of the file on disk.
    if (!halfReported && written + left > half) {
      uint64_t first = half - written;
      status = writeAll(descriptor, data, first, path);
      if (!status.ok())
        break;
      data += first;
      left -= first;
      written += first;
      if (atHalf)
        atHalf();
      halfReported = true;
    }
    status = writeAll(descriptor, data, left, path);
    if (!status.ok())
      break;
    written += left;
  }
  if (status.ok() && !halfReported && atHalf)
    atHalf();
  if (status.ok() && ::fsync(descriptor) != 0)
    status = errnoFailure("cannot sync checkpoint file", path);
  if (::close(descriptor) != 0 && status.ok())
    status = errnoFailure("cannot close checkpoint file", path);
  return status;
}

Status checkRegions(const std::vector<CheckpointRegion> &regions) {
  for (size_t i = 0; i < regions.size(); ++i) {
    const std::string &name = regions[i].name;
    if (name.empty() || name.find_first_of("\t\n\r") != std::string::npos)
      return failure("checkpoint region ", inQuotes(name),
                     " is empty or holds a tab or a line break");
    for (size_t j = 0; j < i; ++j)
      if (regions[j].name == name)
        return failure("checkpoint region ", inQuotes(name), " is given twice");
    if (regions[i].bytes > 0 && regions[i].data == nullptr)
      return failure("checkpoint region ", inQuotes(name), " has no data");
  }
  return Status::success();
}

Status checkNames(const CheckpointInfo &info,
                  const std::vector<CheckpointRegion> &regions) {
  if (info.planIdentity.find_first_of("\n\r") != std::string::npos)
    return failure("checkpoint plan identity ", inQuotes(info.planIdentity),
                   " holds a line break");
  for (const auto &[key, value] : info.values) {
    if (key.empty() || key.find_first_of("=\t\n\r") != std::string::npos)
      return failure("checkpoint value key ", inQuotes(key),
                     " is empty or holds '=', a tab or a line break");
    if (value.find_first_of("\n\r") != std::string::npos)
      return failure("checkpoint value ", inQuotes(key), " holds a line break");
  }
  return checkRegions(regions);
}

uint64_t freshNonce() {
  std::random_device device;
  uint64_t nonce = (static_cast<uint64_t>(device()) << 32) ^ device();
  nonce ^= static_cast<uint64_t>(
      std::chrono::steady_clock::now().time_since_epoch().count());
  return nonce ^ (static_cast<uint64_t>(::getpid()) << 20);
}

void removeQuietly(const std::string &path) {
  std::error_code error;
  fs::remove_all(path, error);
}

//===----------------------------------------------------------------------===//
// Rank 0's part of save(): manifest, rename, latest, pruning
//===----------------------------------------------------------------------===//

struct SaveContext {
  std::string root;
  std::string temporary;
  std::string final;
  uint64_t nonce;
  const CheckpointOptions &options;

  void reach(SaveStage stage) const {
    if (options.onStage)
      options.onStage(stage);
  }
};

std::string manifestHead(const CheckpointInfo &info, int worldSize) {
  std::ostringstream text;
  text << "format\t" << kFormat << "\n"
       << "plan\t" << info.planIdentity << "\n"
       << "world-size\t" << worldSize << "\n"
       << "step\t" << info.step << "\n";
  for (const auto &[key, value] : info.values)
    text << "value\t" << key << "=" << value << "\n";
  return text.str();
}

Status publish(const SaveContext &context, const std::string &manifest) {
  std::string manifestPath = context.temporary + "/" + kManifest;
  ZR_RETURN_IF_ERROR(
      writeNewFile(manifestPath, {{manifest.data(), manifest.size()}},
                   [&] { context.reach(SaveStage::ManifestHalfWritten); }));
  ZR_RETURN_IF_ERROR(syncDirectory(context.temporary));
  context.reach(SaveStage::ManifestWritten);

  // The new directory takes its name atomically; an older step-<S> (a run
  // resumed from an earlier step saves S again) is exchanged with it, so
  // that the name never stops naming a complete checkpoint. The old one is
  // left under the temporary name and pruned below.
  std::error_code error;
  if (fs::exists(context.final, error)) {
    if (::renameat2(AT_FDCWD, context.temporary.c_str(), AT_FDCWD,
                    context.final.c_str(), RENAME_EXCHANGE) != 0) {
      // A file system without the exchange (NFS): move the old one aside
      // first. Between the two renames step-<S> does not exist, so a kill
      // exactly there leaves a `latest` that named it dangling; the old
      // checkpoint survives under the .tmp- name until the next save.
      if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
        return errnoFailure("cannot replace checkpoint directory",
                            context.final);
      std::string aside = context.root + "/" + kTemporaryPrefix + "replaced-" +
                          fs::path(context.final).filename().string() + "-" +
                          hexText(context.nonce);
      if (::rename(context.final.c_str(), aside.c_str()) != 0)
        return errnoFailure("cannot move aside old checkpoint directory",
                            context.final);
      if (::rename(context.temporary.c_str(), context.final.c_str()) != 0) {
        Status status = errnoFailure(
            "cannot rename the checkpoint directory to", context.final);
        // Put the old one back, so that `latest` names it again.
        (void)::rename(aside.c_str(), context.final.c_str());
        return status;
      }
    }
  } else if (::rename(context.temporary.c_str(), context.final.c_str()) != 0) {
    return errnoFailure("cannot rename the checkpoint directory to",
                        context.final);
  }
  ZR_RETURN_IF_ERROR(syncDirectory(context.root));
  context.reach(SaveStage::DirectoryRenamed);

  std::string latest = context.root + "/" + kLatest;
  std::string staged = context.root + "/" + kTemporaryPrefix + "latest-" +
                       hexText(context.nonce);
  std::string name = fs::path(context.final).filename().string() + "\n";
  ZR_RETURN_IF_ERROR(writeNewFile(staged, {{name.data(), name.size()}}, {}));
  context.reach(SaveStage::LatestStaged);
  if (::rename(staged.c_str(), latest.c_str()) != 0) {
    Status status = errnoFailure("cannot replace", latest);
    ::unlink(staged.c_str());
    return status;
  }
  ZR_RETURN_IF_ERROR(syncDirectory(context.root));
  context.reach(SaveStage::LatestReplaced);
  return Status::success();
}

/// Removes leftovers of interrupted saves and the checkpoints beyond the
/// newest `keepLast` of this run's line; the one just written is always
/// kept.
void prune(const SaveContext &context, uint64_t keepLast,
           std::vector<std::string> &warnings) {
  std::vector<std::pair<uint64_t, std::string>> older;
  std::vector<std::string> leftovers;
  std::error_code error;
  std::string finalName = fs::path(context.final).filename().string();
  for (fs::directory_iterator entry(context.root, error), end;
       !error && entry != end; entry.increment(error)) {
    std::string name = entry->path().filename().string();
    std::error_code kind;
    uint64_t step;
    if (name.rfind(kTemporaryPrefix, 0) == 0)
      leftovers.push_back(name);
    else if (name != finalName && parseStepName(name, step) &&
             entry->is_directory(kind))
      older.emplace_back(step, name);
  }
  if (error) {
    warnings.push_back("cannot list checkpoint directory " +
                       inQuotes(context.root) + ": " + error.message());
    return;
  }
  std::vector<std::string> doomed = leftovers;
  if (keepLast > 0) {
    // This run's line first: the steps below the new one, newest first.
    // Steps above it were left by a run that this one resumed before
    // reaching them; they go first (this run would overwrite them anyway).
    uint64_t newStep = 0;
    parseStepName(finalName, newStep);
    std::sort(older.begin(), older.end(),
              [newStep](const auto &left, const auto &right) {
                bool leftAbove = left.first > newStep;
                bool rightAbove = right.first > newStep;
                if (leftAbove != rightAbove)
                  return rightAbove;
                return left.first > right.first;
              });
    for (size_t i = keepLast - 1; i < older.size(); ++i)
      doomed.push_back(older[i].second);
  }
  for (const std::string &name : doomed) {
    std::string path = context.root + "/" + name;
    // An old checkpoint leaves the step-* names in one rename before it is
    // deleted file by file, so that a kill mid-way never leaves a
    // step-<S> directory that looks like a checkpoint and is not one.
    if (name.rfind(kTemporaryPrefix, 0) != 0) {
      std::string doomedPath = context.root + "/" + kTemporaryPrefix +
                               "removing-" + name + "-" +
                               hexText(context.nonce);
      if (::rename(path.c_str(), doomedPath.c_str()) != 0) {
        warnings.push_back("cannot remove old checkpoint " + inQuotes(path) +
                           ": " + std::strerror(errno));
        continue;
      }
      path = doomedPath;
    }
    fs::remove_all(path, error);
    if (error)
      warnings.push_back("cannot remove " + inQuotes(path) + ": " +
                         error.message());
    context.reach(SaveStage::OldOneRemoved);
  }
}

} // namespace

//===----------------------------------------------------------------------===//
// Agreement
//===----------------------------------------------------------------------===//

Status zplan::train::agreeOnStatus(const Status &local,
                                   comm::Communicator &communicator) {
  comm::Failures failures;
  ZR_RETURN_IF_ERROR(comm::shareFailures(communicator, !local.ok(), failures));
  if (failures.count == 0)
    return Status::success();
  int first = failures.first;
  std::vector<std::string> messages;
  ZR_RETURN_IF_ERROR(communicator.gatherText(local.message(), messages));
  std::string message;
  if (communicator.rank() == 0)
    message = failures.count == communicator.size()
                  ? messages[first]
                  : "rank " + std::to_string(first) + ": " + messages[first];
  uint64_t length = message.size();
  ZR_RETURN_IF_ERROR(communicator.broadcast(&length, sizeof(length), 0));
  message.resize(length);
  if (length > 0)
    ZR_RETURN_IF_ERROR(communicator.broadcast(message.data(), length, 0));
  return Status::error(message);
}

//===----------------------------------------------------------------------===//
// save
//===----------------------------------------------------------------------===//

Status zplan::train::saveCheckpoint(
    const std::string &root, const CheckpointInfo &info,
    const std::vector<CheckpointRegion> &regions,
    comm::Communicator &communicator, SaveResult &result,
    const CheckpointOptions &options) {
  int rank = communicator.rank();
  result = SaveResult();
  ZR_RETURN_IF_ERROR(agreeOnStatus(checkNames(info, regions), communicator));

  uint64_t nonce = rank == 0 ? freshNonce() : 0;
  ZR_RETURN_IF_ERROR(communicator.broadcast(&nonce, sizeof(nonce), 0));
  SaveContext context{root,
                      root + "/" + kTemporaryPrefix + stepName(info.step) +
                          "-" + hexText(nonce),
                      root + "/" + stepName(info.step), nonce, options};

  // Rank 0 makes the directory; every rank must then see it (a root on a
  // disk of one machine would scatter the rank files).
  Status status = Status::success();
  if (rank == 0) {
    std::error_code error;
    fs::create_directories(root, error);
    if (error || !fs::is_directory(root, error))
      status = failure("cannot create checkpoint directory ", inQuotes(root),
                       error ? ": " + error.message()
                             : std::string(": it is not a directory"));
    else if (::mkdir(context.temporary.c_str(), 0755) != 0)
      status =
          errnoFailure("cannot create checkpoint directory", context.temporary);
    if (status.ok())
      context.reach(SaveStage::TemporaryDirectoryMade);
  }
  ZR_RETURN_IF_ERROR(agreeOnStatus(status, communicator));
  auto abandon = [&](Status failed) {
    if (rank == 0)
      removeQuietly(context.temporary);
    return failed;
  };

  // Every rank: its file and the manifest lines that describe it.
  std::string file =
      context.temporary + "/rank-" + std::to_string(rank) + ".bin";
  std::ostringstream section;
  std::vector<Piece> pieces;
  for (const CheckpointRegion &region : regions) {
    pieces.push_back({region.data, region.bytes});
    section << "region\t" << rank << "\t" << region.bytes << "\t"
            << checksumText(checksum(region.data, region.bytes)) << "\t"
            << region.name << "\n";
  }
  std::error_code seen;
  if (rank != 0 && !fs::is_directory(context.temporary, seen))
    status =
        failure("cannot see checkpoint directory ", inQuotes(context.temporary),
                " that rank 0 made: --save needs a directory that "
                "every rank shares");
  else
    status = writeNewFile(
        file, pieces, [&] { context.reach(SaveStage::RankFileHalfWritten); });
  if (status.ok())
    context.reach(SaveStage::RankFileWritten);
  if (Status agreed = agreeOnStatus(status, communicator); !agreed.ok())
    return abandon(agreed);

  std::vector<std::string> sections;
  if (Status gathered = communicator.gatherText(section.str(), sections);
      !gathered.ok())
    return abandon(gathered);
  if (rank == 0) {
    std::string manifest = manifestHead(info, communicator.size());
    for (const std::string &text : sections)
      manifest += text;
    manifest += "end\t" +
                checksumText(checksum(manifest.data(), manifest.size())) + "\n";
    status = publish(context, manifest);
  }
  if (Status agreed = agreeOnStatus(status, communicator); !agreed.ok())
    return abandon(agreed);

  result.directory = context.final;
  if (rank == 0)
    prune(context, options.keepLast, result.warnings);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// load
//===----------------------------------------------------------------------===//

namespace {

Status readSmallFile(const std::string &path, std::string_view what,
                     uint64_t limit, std::string &text) {
  plan::ReadableFile file;
  ZR_RETURN_IF_ERROR(file.open(path, what));
  if (file.bytes() > limit)
    return failure(file.subject(), " is ", file.bytes(),
                   " bytes; a checkpoint's is at most ", limit);
  text.assign(file.bytes(), '\0');
  return file.read(0, file.bytes(), text.data());
}

/// The step directory `path` names: itself, or what its `latest` names.
Status resolveStepDirectory(const std::string &path, std::string &directory) {
  std::string base = fs::path(path).lexically_normal().string();
  while (base.size() > 1 && base.back() == '/')
    base.pop_back();
  std::string name = fs::path(base).filename().string();
  if (name.rfind(kTemporaryPrefix, 0) == 0)
    return failure("checkpoint directory ", inQuotes(path),
                   " is half-written (a save was interrupted); resume from "
                   "its parent's 'latest' or a step-* directory");
  std::error_code error;
  if (!fs::is_directory(base, error))
    return failure("checkpoint directory ", inQuotes(path),
                   fs::exists(base, error) ? " is not a directory"
                                           : " does not exist");
  if (fs::exists(base + "/" + kManifest, error)) {
    directory = base;
    return Status::success();
  }
  std::string latest = base + "/" + kLatest;
  uint64_t step;
  if (!fs::exists(latest, error)) {
    if (parseStepName(name, step))
      return failure("checkpoint directory ", inQuotes(path), " has no ",
                     kManifest, " (it is incomplete)");
    return failure("no checkpoint in ", inQuotes(path), ": it has no ",
                   inQuotes(kLatest), " file and no ", kManifest);
  }
  std::string text;
  ZR_RETURN_IF_ERROR(readSmallFile(latest, "checkpoint file", 256, text));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  if (!parseStepName(text, step))
    return failure("checkpoint file ", inQuotes(latest), " holds ",
                   inQuotes(text), ", not a step-<N> directory name");
  directory = base + "/" + text;
  if (!fs::is_directory(directory, error))
    return failure("checkpoint file ", inQuotes(latest), " names ",
                   inQuotes(text), ", which does not exist");
  return Status::success();
}

struct ManifestRegion {
  std::string name;
  uint64_t bytes = 0;
  uint64_t sum = 0;
};

struct Manifest {
  std::string plan;
  int64_t worldSize = -1;
  uint64_t step = 0;
  bool hasStep = false;
  CheckpointValues values;
  std::vector<std::vector<ManifestRegion>> ranks;
};

bool parseUnsigned(const std::string &text, uint64_t &value, int base = 10) {
  if (text.empty())
    return false;
  errno = 0;
  char *end = nullptr;
  unsigned long long parsed = std::strtoull(text.c_str(), &end, base);
  if (errno != 0 || *end != '\0' || text[0] == '-')
    return false;
  value = parsed;
  return true;
}

std::vector<std::string> splitTabs(const std::string &line, size_t limit) {
  std::vector<std::string> fields;
  size_t start = 0;
  while (fields.size() + 1 < limit) {
    size_t tab = line.find('\t', start);
    if (tab == std::string::npos)
      break;
    fields.push_back(line.substr(start, tab - start));
    start = tab + 1;
  }
  fields.push_back(line.substr(start));
  return fields;
}

Status parseManifest(const std::string &path, const std::string &text,
                     Manifest &manifest) {
  std::string subject = "checkpoint manifest " + inQuotes(path);
  // The last line is `end<TAB>checksum of everything before it`: a
  // truncated or edited manifest is refused before any field is trusted.
  size_t endLine = text.rfind("end\t");
  if (endLine == std::string::npos ||
      (endLine > 0 && text[endLine - 1] != '\n'))
    return failure(subject, " is incomplete (no end line)");
  std::string declared = text.substr(endLine + 4);
  while (!declared.empty() && declared.back() == '\n')
    declared.pop_back();
  if (declared != checksumText(checksum(text.data(), endLine)))
    return failure(subject, " does not match its checksum (", declared,
                   "): the file is corrupt");
  std::istringstream lines(text.substr(0, endLine));
  std::string line;
  bool formatSeen = false;
  int number = 0;
  while (std::getline(lines, line)) {
    ++number;
    std::vector<std::string> fields = splitTabs(line, 5);
    const std::string &kind = fields[0];
    auto bad = [&] {
      return failure(subject, " line ", number,
                     " is malformed: ", inQuotes(line));
    };
    if (number == 1) {
      if (kind != "format" || fields.size() != 2)
        return failure(subject, " is not a zplan checkpoint manifest");
      if (fields[1] != kFormat)
        return failure(subject, " has format ", inQuotes(fields[1]),
                       "; this zrun reads ", inQuotes(kFormat));
      formatSeen = true;
    } else if (kind == "plan" && fields.size() == 2) {
      manifest.plan = fields[1];
    } else if (kind == "world-size" && fields.size() == 2) {
      uint64_t size;
      if (!parseUnsigned(fields[1], size) || size == 0 || size > 1000000)
        return bad();
      manifest.worldSize = static_cast<int64_t>(size);
      manifest.ranks.assign(size, {});
    } else if (kind == "step" && fields.size() == 2) {
      if (!parseUnsigned(fields[1], manifest.step))
        return bad();
      manifest.hasStep = true;
    } else if (kind == "value") {
      std::string rest = line.substr(6);
      size_t equals = rest.find('=');
      if (equals == std::string::npos || equals == 0)
        return bad();
      manifest.values.emplace_back(rest.substr(0, equals),
                                   rest.substr(equals + 1));
    } else if (kind == "region" && fields.size() == 5) {
      uint64_t rank;
      ManifestRegion region;
      if (!parseUnsigned(fields[1], rank) || rank >= manifest.ranks.size() ||
          !parseUnsigned(fields[2], region.bytes) ||
          fields[3].rfind("0x", 0) != 0 ||
          !parseUnsigned(fields[3].substr(2), region.sum, 16))
        return bad();
      region.name = fields[4];
      manifest.ranks[rank].push_back(region);
    } else {
      return bad();
    }
  }
  if (!formatSeen || manifest.worldSize < 0 || !manifest.hasStep)
    return failure(subject, " lacks its format, world size or step");
  return Status::success();
}

/// Resolves `path` to its step directory and reads its manifest, checked
/// against the plan identity and world size of the reader.
Status openManifest(const std::string &path, const std::string &planIdentity,
                    int worldSize, std::string &directory, Manifest &manifest) {
  ZR_RETURN_IF_ERROR(resolveStepDirectory(path, directory));
  std::string manifestPath = directory + "/" + kManifest;
  std::string text;
  ZR_RETURN_IF_ERROR(readSmallFile(manifestPath, "checkpoint manifest",
                                   kMaxManifestBytes, text));
  ZR_RETURN_IF_ERROR(parseManifest(manifestPath, text, manifest));
  std::string subject = "checkpoint " + inQuotes(directory);
  if (manifest.plan != planIdentity)
    return failure(subject, " was written by another plan (identity ",
                   manifest.plan, "); this run's plan is ", planIdentity);
  if (manifest.worldSize != worldSize)
    return failure(subject, " was written by a plan with world size ",
                   manifest.worldSize, "; this run has ", worldSize);
  uint64_t named;
  if (parseStepName(fs::path(directory).filename().string(), named) &&
      named != manifest.step)
    return failure(subject, " holds step ", manifest.step,
                   " in its manifest, not the step its name says");
  return Status::success();
}

std::string rankFileOf(const std::string &directory, int rank) {
  return directory + "/rank-" + std::to_string(rank) + ".bin";
}

/// Opens rank `rank`'s file and checks that its size is the sum of its
/// regions'.
Status openRankFile(const std::string &directory, int rank,
                    const std::vector<ManifestRegion> &saved,
                    plan::ReadableFile &file) {
  ZR_RETURN_IF_ERROR(file.open(rankFileOf(directory, rank), "checkpoint file"));
  uint64_t total = 0;
  for (const ManifestRegion &region : saved)
    total += region.bytes;
  if (file.bytes() != total)
    return failure(file.subject(), " is ", file.bytes(),
                   " bytes; its manifest says ", total);
  return Status::success();
}

Status corruptRegion(const plan::ReadableFile &file, const std::string &name,
                     uint64_t offset, uint64_t bytes, uint64_t sum,
                     uint64_t expected) {
  return failure(file.subject(), ": region ", inQuotes(name), " (bytes ",
                 offset, "-", offset + bytes, ") does not match its checksum (",
                 checksumText(sum), ", manifest ", checksumText(expected),
                 "): the file is corrupt");
}

Status loadOnRank(const std::string &path, const std::string &planIdentity,
                  const std::vector<CheckpointRegion> &regions, int rank,
                  int worldSize, LoadedCheckpoint &loaded) {
  ZR_RETURN_IF_ERROR(checkRegions(regions));
  std::string directory;
  Manifest manifest;
  ZR_RETURN_IF_ERROR(
      openManifest(path, planIdentity, worldSize, directory, manifest));
  std::string subject = "checkpoint " + inQuotes(directory);

  const std::vector<ManifestRegion> &saved = manifest.ranks[rank];
  for (size_t i = 0; i < std::max(saved.size(), regions.size()); ++i) {
    if (i >= saved.size())
      return failure(subject, " has no region ", inQuotes(regions[i].name),
                     " for rank ", rank, " (it holds ", saved.size(),
                     " regions; this run has ", regions.size(), ")");
    if (i >= regions.size())
      return failure(subject, " holds region ", inQuotes(saved[i].name),
                     " for rank ", rank, ", which this run does not have");
    if (saved[i].name != regions[i].name)
      return failure(subject, " holds region ", inQuotes(saved[i].name),
                     " for rank ", rank, " where this run has ",
                     inQuotes(regions[i].name));
    if (saved[i].bytes != regions[i].bytes)
      return failure(subject, " holds ", saved[i].bytes, " bytes of region ",
                     inQuotes(saved[i].name), " for rank ", rank,
                     "; this run's is ", regions[i].bytes, " bytes");
  }

  plan::ReadableFile file;
  ZR_RETURN_IF_ERROR(openRankFile(directory, rank, saved, file));
  uint64_t offset = 0;
  for (size_t i = 0; i < regions.size(); ++i) {
    ZR_RETURN_IF_ERROR(file.read(offset, regions[i].bytes, regions[i].data));
    uint64_t sum = checksum(regions[i].data, regions[i].bytes);
    if (sum != saved[i].sum)
      return corruptRegion(file, saved[i].name, offset, regions[i].bytes, sum,
                           saved[i].sum);
    offset += regions[i].bytes;
  }
  loaded.directory = directory;
  loaded.step = manifest.step;
  loaded.values = std::move(manifest.values);
  return Status::success();
}

} // namespace

Status zplan::train::loadCheckpoint(
    const std::string &path, const std::string &planIdentity,
    const std::vector<CheckpointRegion> &regions,
    comm::Communicator &communicator, LoadedCheckpoint &loaded) {
  loaded = LoadedCheckpoint();
  LoadedCheckpoint local;
  Status status = loadOnRank(path, planIdentity, regions, communicator.rank(),
                             communicator.size(), local);
  ZR_RETURN_IF_ERROR(agreeOnStatus(status, communicator));
  loaded = std::move(local);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// CheckpointReader: every rank's file, one process
//===----------------------------------------------------------------------===//

Status CheckpointReader::open(const std::string &path,
                              const std::string &planIdentity, int worldSize,
                              CheckpointReader &reader) {
  reader = CheckpointReader();
  std::string directory;
  Manifest manifest;
  ZR_RETURN_IF_ERROR(
      openManifest(path, planIdentity, worldSize, directory, manifest));
  // Every rank file must be there, whole, before anything is read from
  // any of them.
  for (int rank = 0; rank < worldSize; ++rank) {
    plan::ReadableFile file;
    ZR_RETURN_IF_ERROR(
        openRankFile(directory, rank, manifest.ranks[rank], file));
  }
  reader.stepDirectory = directory;
  reader.savedStep = manifest.step;
  reader.savedValues = std::move(manifest.values);
  for (const std::vector<ManifestRegion> &saved : manifest.ranks) {
    std::vector<CheckpointRegionInfo> &regions = reader.ranks.emplace_back();
    for (const ManifestRegion &region : saved)
      regions.push_back({region.name, region.bytes, region.sum});
  }
  return Status::success();
}

std::string CheckpointReader::rankFile(int rank) const {
  return rankFileOf(stepDirectory, rank);
}

Status CheckpointReader::find(int rank, const std::string &name, size_t &index,
                              uint64_t &offset) const {
  if (rank < 0 || rank >= worldSize())
    return failure("checkpoint ", inQuotes(stepDirectory), " has no rank ",
                   rank, " (world size ", worldSize(), ")");
  offset = 0;
  for (index = 0; index < ranks[rank].size(); ++index) {
    if (ranks[rank][index].name == name)
      return Status::success();
    offset += ranks[rank][index].bytes;
  }
  return failure("checkpoint ", inQuotes(stepDirectory), " has no region ",
                 inQuotes(name), " for rank ", rank);
}

Status CheckpointReader::read(int rank, const std::string &name, void *data,
                              uint64_t bytes) const {
  size_t index;
  uint64_t offset;
  ZR_RETURN_IF_ERROR(find(rank, name, index, offset));
  const CheckpointRegionInfo &region = ranks[rank][index];
  if (region.bytes != bytes)
    return failure("checkpoint ", inQuotes(stepDirectory), " holds ",
                   region.bytes, " bytes of region ", inQuotes(name),
                   " for rank ", rank, "; the plan's is ", bytes, " bytes");
  plan::ReadableFile file;
  ZR_RETURN_IF_ERROR(file.open(rankFile(rank), "checkpoint file"));
  ZR_RETURN_IF_ERROR(file.read(offset, bytes, data));
  uint64_t sum = checksum(data, bytes);
  if (sum != region.checksum)
    return corruptRegion(file, name, offset, bytes, sum, region.checksum);
  return Status::success();
}

Status CheckpointReader::verify(int rank, const std::string &name) const {
  size_t index;
  uint64_t offset;
  ZR_RETURN_IF_ERROR(find(rank, name, index, offset));
  const CheckpointRegionInfo &region = ranks[rank][index];
  plan::ReadableFile file;
  ZR_RETURN_IF_ERROR(file.open(rankFile(rank), "checkpoint file"));
  // Optimizer state is twice the shards: stream it, keep nothing.
  constexpr uint64_t kPiece = 16ull << 20;
  std::vector<uint8_t> piece(std::min(region.bytes, kPiece));
  Checksum sum;
  for (uint64_t done = 0; done < region.bytes;) {
    uint64_t count = std::min(region.bytes - done, kPiece);
    ZR_RETURN_IF_ERROR(file.read(offset + done, count, piece.data()));
    sum.update(piece.data(), count);
    done += count;
  }
  if (sum.value() != region.checksum)
    return corruptRegion(file, name, offset, region.bytes, sum.value(),
                         region.checksum);
  return Status::success();
}
