//===- Status.h - how runtime code reports failure
//-------------------------===//
//
// The runtime builds without exceptions in its hot paths and without LLVM, so
// every function that can fail returns a Status: ok, or a one-line message
// naming what was wrong (the file, the buffer, the instruction). Messages
// carry no "zrun: error: " prefix; the tool adds it. This is the bottom layer
// of the runtime: kernels, communicators, memory and traces include it, and
// nothing above it.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SUPPORT_STATUS_H
#define ZPLAN_RUNTIME_SUPPORT_STATUS_H

#include <sstream>
#include <string>
#include <string_view>
#include <utility>

namespace zplan {

/// The result of an operation that can fail: ok, or a one-line message.
class [[nodiscard]] Status {
public:
  static Status success() { return Status(); }
  static Status error(std::string message) {
    Status status;
    status.failed = true;
    status.text = std::move(message);
    return status;
  }

  bool ok() const { return !failed; }
  /// Empty when ok().
  const std::string &message() const { return text; }

private:
  Status() = default;
  bool failed = false;
  std::string text;
};

/// A failed Status whose message is the streamed pieces, so every runtime
/// message is built the same way: failure("buffer ", id, " is ", what).
template <typename... Pieces> Status failure(const Pieces &...pieces) {
  std::ostringstream os;
  (os << ... << pieces);
  return Status::error(os.str());
}

/// 'text', as messages quote names.
inline std::string inQuotes(std::string_view text) {
  return "'" + std::string(text) + "'";
}

} // namespace zplan

/// Evaluates `expression` (a Status) and returns it from the enclosing
/// function when it failed.
#define ZR_RETURN_IF_ERROR(expression)                                         \
  do {                                                                         \
    ::zplan::Status zrStatus_ = (expression);                                  \
    if (!zrStatus_.ok())                                                       \
      return zrStatus_;                                                        \
  } while (false)

#endif // ZPLAN_RUNTIME_SUPPORT_STATUS_H
