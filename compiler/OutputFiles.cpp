//===- OutputFiles.cpp - zcc's outputs, all written or none ---------------===//
//
// A temporary is registered with the crash handler as soon as it exists and
// unregistered only once it is renamed or removed, so that at every moment
// a crash finds each file zcc would leave behind.
//
//===----------------------------------------------------------------------===//

#include "compiler/OutputFiles.h"

#include "compiler/CrashHandler.h"
#include "compiler/Errors.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/raw_ostream.h"

#include <utility>

using namespace zplan;

/// Removes a temporary that was not renamed into place.
static void discard(const std::string &temporary) {
  if (temporary.empty())
    return;
  llvm::sys::fs::remove(temporary);
  unregisterTemporaryFile(temporary);
}

PendingOutputs::~PendingOutputs() {
  for (Output &output : outputs)
    discard(output.temporary);
  for (const std::string &path : committed)
    llvm::sys::fs::remove(path);
  // Innermost first; remove() takes a directory only when it is empty.
  for (const std::string &directory : llvm::reverse(createdDirectories)) {
    llvm::sys::fs::remove(directory);
    unregisterTemporaryFile(directory);
  }
}

llvm::Error PendingOutputs::addDirectory(llvm::StringRef directory) {
  std::vector<std::string> missing;
  for (llvm::StringRef path = directory;
       !path.empty() && !llvm::sys::fs::exists(path);
       path = llvm::sys::path::parent_path(path))
    missing.push_back(path.str());
  for (const std::string &path : llvm::reverse(missing)) {
    if (std::error_code code = llvm::sys::fs::create_directory(path))
      return makeError("cannot create --dump-dir '" + directory +
                       "': " + code.message());
    createdDirectories.push_back(path);
    if (!registerTemporaryFile(path))
      return makeError("too many temporary files open to create '" + directory +
                       "'");
  }
  return llvm::Error::success();
}

llvm::Error PendingOutputs::add(
    llvm::StringRef path,
    llvm::function_ref<llvm::Error(llvm::StringRef temporary)> fill) {
  llvm::SmallString<256> temporary;
  int fd = -1;
  if (std::error_code code = llvm::sys::fs::createUniqueFile(
          path + ".tmp-%%%%%%%%", fd, temporary))
    return makeError("cannot create a temporary file beside '" + path +
                     "': " + code.message());
  llvm::sys::Process::SafelyCloseFileDescriptor(fd);
  if (!registerTemporaryFile(temporary)) {
    llvm::sys::fs::remove(temporary);
    return makeError("too many temporary files open to write '" + path + "'");
  }
  outputs.push_back({path.str(), temporary.str().str()});
  return fill(temporary);
}

llvm::Error PendingOutputs::addBytes(llvm::StringRef path,
                                     llvm::StringRef bytes) {
  return add(path, [&](llvm::StringRef temporary) -> llvm::Error {
    std::error_code code;
    llvm::raw_fd_ostream file(temporary, code);
    if (!code) {
      file << bytes;
      file.close();
      code = file.error();
      // A stream destroyed with its error still set is a fatal error.
      file.clear_error();
    }
    if (code)
      return makeError("cannot write '" + path + "': " + code.message());
    return llvm::Error::success();
  });
}

llvm::Error PendingOutputs::commit() {
  for (Output &output : outputs) {
    if (std::error_code code =
            llvm::sys::fs::rename(output.temporary, output.path))
      return makeError("cannot move the finished '" + output.path +
                       "' into place: " + code.message());
    unregisterTemporaryFile(output.temporary);
    output.temporary.clear();
    committed.push_back(output.path);
  }
  for (const std::string &directory : createdDirectories)
    unregisterTemporaryFile(directory);
  outputs.clear();
  committed.clear();
  createdDirectories.clear();
  return llvm::Error::success();
}

std::string zplan::dumpFilePath(llvm::StringRef dumpDir, llvm::StringRef kind) {
  for (const DumpKind &dump : kDumpKinds)
    if (dump.name == kind) {
      llvm::SmallString<256> path(dumpDir);
      llvm::sys::path::append(path, dump.fileName);
      return path.str().str();
    }
  llvm_unreachable("validateOptions refuses an unknown dump kind");
}

llvm::Error zplan::checkOutputPaths(const CompileOptions &options,
                                    llvm::ArrayRef<std::string> inputs) {
  std::vector<std::pair<std::string, std::string>> outputs;
  if (!options.outputPath.empty()) {
    outputs.push_back({"-o", options.outputPath});
    outputs.push_back({"the weights file", options.outputPath + ".weights"});
  }
  if (!options.dumpDir.empty())
    for (const DumpKind &dump : kDumpKinds)
      if (options.dumps.count(dump.name.str()))
        outputs.push_back(
            {"the dump file", dumpFilePath(options.dumpDir, dump.name)});
  if (!options.outputPath.empty()) {
    // Found before any work rather than when the plan is written.
    llvm::StringRef parent = llvm::sys::path::parent_path(options.outputPath);
    if (!parent.empty() && !llvm::sys::fs::is_directory(parent))
      return makeError("-o '" + options.outputPath + "': the directory '" +
                       parent + "' does not exist");
  }
  for (auto &[what, path] : outputs) {
    if (llvm::sys::fs::is_directory(path))
      return makeError(what + " '" + path +
                       "' is a directory; expected a file path");
    for (const std::string &input : inputs) {
      bool same = false;
      // equivalent() fails when either file does not exist: then they
      // cannot be the same file.
      if (!llvm::sys::fs::equivalent(path, input, same) && same)
        return makeError(what + " '" + path + "' is the input '" + input +
                         "'; refusing to overwrite it");
    }
  }
  return llvm::Error::success();
}
