//===- FlagWords.h - one command-line word as a flag and its value --------===//
//
// zrun's parsers (runtime/tooling/Arguments, runtime/train/TrainOptions,
// runtime/generate/GenerateOptions) accept `--flag value` and
// `--flag=value`; this splits the second form and reads integer values.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SUPPORT_FLAGWORDS_H
#define ZPLAN_RUNTIME_SUPPORT_FLAGWORDS_H

#include "runtime/support/Status.h"

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace zplan {

struct FlagWord {
  std::string flag;
  std::string value;
  /// The word was `--flag=value` (value may be empty).
  bool hasValue = false;
};

/// `--flag=value` as {"--flag", "value", true}; any other word as itself.
inline FlagWord splitFlagWord(const std::string &word) {
  size_t equals = word.find('=');
  if (word.rfind("--", 0) != 0 || equals == std::string::npos)
    return {word, "", false};
  return {word.substr(0, equals), word.substr(equals + 1), true};
}

/// `text` as a decimal integer in [low, high] (no sign, nothing after it),
/// or an error naming `flag`, the range and the text.
inline Status parseFlagInteger(const std::string &flag, const std::string &text,
                               uint64_t low, uint64_t high, uint64_t &out) {
  char *end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || text[0] == '+' || *end != '\0' ||
      errno != 0 || value < low || value > high)
    return failure(flag, " takes an integer from ", low, " to ", high, ", got ",
                   inQuotes(text));
  out = value;
  return Status::success();
}

} // namespace zplan

#endif // ZPLAN_RUNTIME_SUPPORT_FLAGWORDS_H
