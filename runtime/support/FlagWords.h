//===- FlagWords.h - one command-line word as a flag and its value --------===//
//
// zrun's parsers (runtime/tooling/Arguments, runtime/train/TrainOptions,
// runtime/generate/GenerateOptions) accept `--flag value` and
// `--flag=value`; this is what they share: the split of the second form,
// taking a flag's value, the loop over a command's flags, and integer and
// number values in a range, with one wording for every message.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SUPPORT_FLAGWORDS_H
#define ZPLAN_RUNTIME_SUPPORT_FLAGWORDS_H

#include "runtime/support/Status.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

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

/// The value of the flag at `words[index]`: `value` as split from
/// `--flag=value`, or the next word (advancing `index`).
inline Status takeFlagValue(const std::vector<std::string> &words,
                            size_t &index, const FlagWord &word,
                            std::string &value) {
  if (word.hasValue) {
    value = word.value;
    return Status::success();
  }
  if (index + 1 >= words.size())
    return failure(word.flag, " needs a value");
  value = words[++index];
  return Status::success();
}

/// Walks `words`, the flags of `command` ("train"): each must be in `known`
/// and given once (`seen` collects them), with a value, except the
/// `switches` (also in `known`), which take none (`apply` gets "");
/// `apply(flag, value)` sets it.
inline Status
forEachFlag(const std::vector<std::string> &words,
            const std::set<std::string> &known, const char *command,
            std::set<std::string> &seen,
            const std::function<Status(const std::string &flag,
                                       const std::string &value)> &apply,
            const std::set<std::string> &switches = {}) {
  for (size_t i = 0; i < words.size(); ++i) {
    FlagWord word = splitFlagWord(words[i]);
    if (!known.count(word.flag))
      return failure("unknown option ", inQuotes(words[i]), " of ",
                     inQuotes(command), "; see zrun --help");
    if (!seen.insert(word.flag).second)
      return failure(word.flag, " is given twice");
    std::string value;
    if (!switches.count(word.flag))
      ZR_RETURN_IF_ERROR(takeFlagValue(words, i, word, value));
    else if (word.hasValue)
      return failure(word.flag, " takes no value");
    ZR_RETURN_IF_ERROR(apply(word.flag, value));
  }
  return Status::success();
}

/// Where a number value may lie: from `low` to `high`, each end open or
/// closed; an infinite `high` reads "inf".
struct NumberRange {
  double low;
  bool lowOpen;
  double high;
  bool highOpen;
};

/// `text` as a finite number in `range`, or an error naming `flag`, the
/// range ("(0, inf)", "[0, 1)") and the text.
inline Status parseFlagNumber(const std::string &flag, const std::string &text,
                              NumberRange range, double &out) {
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  // strtod skips leading white space; a value is the number alone.
  bool spaced =
      !text.empty() && std::isspace(static_cast<unsigned char>(text[0]));
  bool inRange = !spaced && std::isfinite(value) &&
                 (range.lowOpen ? value > range.low : value >= range.low) &&
                 (range.highOpen ? value < range.high : value <= range.high);
  if (text.empty() || *end != '\0' || errno != 0 || !inRange) {
    std::ostringstream high;
    if (std::isinf(range.high))
      high << "inf";
    else
      high << range.high;
    return failure(flag, " takes a number in ", range.lowOpen ? "(" : "[",
                   range.low, ", ", high.str(), range.highOpen ? ")" : "]",
                   ", got ", inQuotes(text));
  }
  out = value;
  return Status::success();
}

/// `text` as a decimal integer in [low, high] (no sign, nothing after it),
/// or an error naming `flag`, the range and the text.
inline Status parseFlagInteger(const std::string &flag, const std::string &text,
                               uint64_t low, uint64_t high, uint64_t &out) {
  char *end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  // strtoull skips leading white space and takes a sign: digits only.
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])) ||
      *end != '\0' || errno != 0 || value < low || value > high)
    return failure(flag, " takes an integer from ", low, " to ", high, ", got ",
                   inQuotes(text));
  out = value;
  return Status::success();
}

} // namespace zplan

#endif // ZPLAN_RUNTIME_SUPPORT_FLAGWORDS_H
