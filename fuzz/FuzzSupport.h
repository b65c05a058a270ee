//===- FuzzSupport.h - set-up shared by the libFuzzer harnesses -----------===//
//
// What every harness does once in LLVMFuzzerInitialize: silence protobuf's
// log (it reports every string field with invalid UTF-8, thousands of times
// a second, burying the sanitizer reports), and make a private work
// directory, removed at exit, for the files an input must become (the
// importer and the plan loader read paths, not bytes).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_FUZZ_FUZZSUPPORT_H
#define ZPLAN_FUZZ_FUZZSUPPORT_H

#include <google/protobuf/stubs/logging.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace zplan::fuzz {

/// The harness's work directory, set by initializeHarness().
inline std::filesystem::path workDirectory;

/// Quiets protobuf and makes workDirectory under $TMPDIR (or /tmp) as
/// `zplan-fuzz-NAME-XXXXXX`; aborts when it cannot, since no input could run.
inline void initializeHarness(const char *name) {
  google::protobuf::SetLogHandler([](google::protobuf::LogLevel, const char *,
                                     int, const std::string &) {});
  const char *temporary = std::getenv("TMPDIR");
  std::string pattern =
      std::string(temporary && *temporary ? temporary : "/tmp") +
      "/zplan-fuzz-" + name + "-XXXXXX";
  if (!mkdtemp(pattern.data())) {
    std::fprintf(stderr, "zplan-fuzz-%s: mkdtemp: cannot make %s\n", name,
                 pattern.c_str());
    std::abort();
  }
  workDirectory = pattern;
  std::atexit([] {
    std::error_code ignored;
    std::filesystem::remove_all(workDirectory, ignored);
  });
}

} // namespace zplan::fuzz

#endif // ZPLAN_FUZZ_FUZZSUPPORT_H
