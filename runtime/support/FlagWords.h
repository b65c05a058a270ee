//===- FlagWords.h - one command-line word as a flag and its value --------===//
//
// zrun's parsers (runtime/tooling/Arguments, runtime/train/TrainOptions)
// accept `--flag value` and `--flag=value`; this splits the second form.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SUPPORT_FLAGWORDS_H
#define ZPLAN_RUNTIME_SUPPORT_FLAGWORDS_H

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

} // namespace zplan

#endif // ZPLAN_RUNTIME_SUPPORT_FLAGWORDS_H
