//===- CheckpointManifest.cpp - a checkpoint's names and its manifest ----===//
//
// The manifest ends in `end<TAB>checksum of everything before it`, so that
// a truncated or edited one is refused before any field is trusted.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/CheckpointManifest.h"

#include "runtime/support/Checksum.h"
#include "runtime/train/DurableFiles.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

using namespace zplan;
using namespace zplan::train;
using namespace zplan::train::manifest;
namespace fs = std::filesystem;

std::string manifest::stepName(uint64_t step) {
  char name[32];
  std::snprintf(name, sizeof(name), "step-%08llu",
                static_cast<unsigned long long>(step));
  return name;
}

bool manifest::parseStepName(const std::string &name, uint64_t &step) {
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

std::string manifest::hexText(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(value));
  return text;
}

std::string manifest::rankFileOf(const std::string &directory, int rank) {
  return directory + "/rank-" + std::to_string(rank) + ".bin";
}

std::string manifest::head(const CheckpointInfo &info, int worldSize) {
  std::ostringstream text;
  text << "format\t" << kFormat << "\n"
       << "plan\t" << info.planIdentity << "\n"
       << "world-size\t" << worldSize << "\n"
       << "step\t" << info.step << "\n";
  for (const auto &[key, value] : info.values)
    text << "value\t" << key << "=" << value << "\n";
  return text.str();
}

namespace {

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
      Region region;
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

} // namespace

Status manifest::open(const std::string &path, const std::string &planIdentity,
                      int worldSize, std::string &directory,
                      Manifest &manifest) {
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

Status manifest::checkRegions(const std::vector<CheckpointRegion> &regions) {
  for (size_t i = 0; i < regions.size(); ++i) {
    const std::string &name = regions[i].name;
    if (name.empty() || name.find_first_of("\t\n\r") != std::string::npos)
      return failure("checkpoint region ", inQuotes(name),
                     " is empty or holds a tab or a line break");
    for (size_t j = 0; j < i; ++j)
      if (regions[j].name == name)
        return failure("checkpoint region ", inQuotes(name), " is given twice");
    if (!regions[i].parts.empty()) {
      uint64_t total = 0;
      for (uint64_t part : regions[i].parts)
        total += part;
      if (total != regions[i].bytes || !regions[i].readPart ||
          !regions[i].writePart)
        return failure("checkpoint region ", inQuotes(name), " has parts of ",
                       total, " bytes in all for its ", regions[i].bytes,
                       ", or no way to read or write them");
    } else if (regions[i].bytes > 0 && regions[i].data == nullptr) {
      return failure("checkpoint region ", inQuotes(name), " has no data");
    }
  }
  return Status::success();
}
