//===- CrashHandler.cpp - every crash as one zcc: error line --------------===//
//
// State the signal handler reads lives in fixed-size static buffers, written
// only outside signal context: the handler may not allocate, lock or call
// stdio. The other handlers (terminate, fatal error, assertion) run in
// ordinary context but share the same async-signal-safe exit path.
//
//===----------------------------------------------------------------------===//

#include "compiler/CrashHandler.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/ErrorHandling.h"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <exception>
#include <typeinfo>
#include <unistd.h>
#include <vector>

using namespace zplan;

namespace {

constexpr size_t kMaxPath = 4096;
constexpr size_t kMaxTemporaries = 32;

char toolName[32] = "zcc";
char phase[kMaxPath] = "starting";
char temporaries[kMaxTemporaries][kMaxPath];
/// Only the first crash reports; a second one (say, a fault in the handler
/// path) just leaves.
std::atomic<bool> crashing{false};

/// Appends `text` to `buffer` at `length`, truncating at the buffer's end.
/// Async-signal-safe.
void append(char *buffer, size_t capacity, size_t &length, const char *text) {
  for (; *text && length + 1 < capacity; ++text)
    buffer[length++] = *text == '\n' ? ' ' : *text;
  buffer[length] = '\0';
}

/// Removes the registered temporaries, writes "TOOL: error: internal error:
/// WHAT while PHASE" and exits 1. Async-signal-safe.
[[noreturn]] void die(const char *what, const char *detail) {
  if (crashing.exchange(true))
    _exit(1);
  // Files first, then the directories made for them, innermost (registered
  // last) first; unlink fails harmlessly on a directory and rmdir on a file.
  for (char *path : temporaries)
    if (path[0])
      unlink(path);
  for (size_t slot = kMaxTemporaries; slot-- > 0;)
    if (temporaries[slot][0])
      rmdir(temporaries[slot]);
  char message[2 * kMaxPath];
  size_t length = 0;
  append(message, sizeof(message), length, toolName);
  append(message, sizeof(message), length, ": error: internal error: ");
  append(message, sizeof(message), length, what);
  if (detail && *detail) {
    append(message, sizeof(message), length, " (");
    append(message, sizeof(message), length, detail);
    append(message, sizeof(message), length, ")");
  }
  append(message, sizeof(message), length, " while ");
  append(message, sizeof(message), length, phase);
  if (length + 1 < sizeof(message))
    message[length++] = '\n';
  for (size_t written = 0; written < length;) {
    ssize_t n = write(STDERR_FILENO, message + written, length - written);
    if (n <= 0)
      break;
    written += static_cast<size_t>(n);
  }
  _exit(1);
}

struct FatalSignal {
  int number;
  const char *description;
};

constexpr FatalSignal kFatalSignals[] = {
    {SIGABRT, "abort (SIGABRT)"},
    {SIGSEGV, "segmentation fault (SIGSEGV)"},
    {SIGBUS, "bus error (SIGBUS)"},
    {SIGFPE, "arithmetic exception (SIGFPE)"},
    {SIGILL, "illegal instruction (SIGILL)"},
    {SIGTRAP, "trap (SIGTRAP)"},
    {SIGSYS, "bad system call (SIGSYS)"},
};

void onFatalSignal(int number) {
  for (const FatalSignal &signal : kFatalSignals)
    if (signal.number == number)
      die(signal.description, nullptr);
  die("fatal signal", nullptr);
}

/// std::terminate: an uncaught exception (named by its demangled type) or a
/// terminate call without one. Not in signal context, so it may allocate.
[[noreturn]] void onTerminate() {
  const char *type = "no active exception";
  std::string demangledName;
  if (std::type_info *info = abi::__cxa_current_exception_type()) {
    int status = 0;
    char *demangled =
        abi::__cxa_demangle(info->name(), nullptr, nullptr, &status);
    demangledName = status == 0 && demangled ? demangled : info->name();
    std::free(demangled);
    type = demangledName.c_str();
  }
  die("uncaught exception", type);
}

void onFatalError(void *, const char *reason, bool) {
  die("fatal error", reason);
}

} // namespace

/// glibc's assert() calls this; zcc's definition replaces libc's for every
/// assert compiled into the binary (the MLIR and zplan libraries are static),
/// so a failed assertion is one error line rather than a message plus
/// SIGABRT.
extern "C" [[noreturn]] void __assert_fail(const char *assertion,
                                           const char *file, unsigned line,
                                           const char *function) noexcept {
  (void)function;
  char detail[kMaxPath];
  size_t length = 0;
  append(detail, sizeof(detail), length, assertion);
  append(detail, sizeof(detail), length, " at ");
  append(detail, sizeof(detail), length, file);
  char reversed[16];
  size_t digits = 0;
  do {
    reversed[digits++] = static_cast<char>('0' + line % 10);
    line /= 10;
  } while (line && digits < sizeof(reversed) - 1);
  char number[16];
  for (size_t i = 0; i < digits; ++i)
    number[i] = reversed[digits - 1 - i];
  number[digits] = '\0';
  append(detail, sizeof(detail), length, ":");
  append(detail, sizeof(detail), length, number);
  die("assertion failed", detail);
}

void zplan::installCrashHandlers(const char *tool) {
  size_t length = 0;
  append(toolName, sizeof(toolName), length, tool);
  for (const FatalSignal &signal : kFatalSignals) {
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_handler = onFatalSignal;
    sigemptyset(&action.sa_mask);
    // SA_NODEFER and no SA_RESETHAND: a fault inside the handler re-enters
    // it, and `crashing` makes that one exit at once.
    action.sa_flags = SA_NODEFER;
    sigaction(signal.number, &action, nullptr);
  }
  std::signal(SIGXFSZ, SIG_IGN);
  std::set_terminate(onTerminate);
  llvm::install_fatal_error_handler(onFatalError, nullptr);
  // operator new failing reports through the bad-alloc handler below, as
  // InitLLVM arranges.
  llvm::install_out_of_memory_new_handler();
  llvm::install_bad_alloc_error_handler(
      [](void *, const char *reason, bool) { die("out of memory", reason); },
      nullptr);
}

void zplan::setCrashPhase(const llvm::Twine &text) {
  llvm::SmallString<256> storage;
  llvm::StringRef value = text.toStringRef(storage);
  size_t length = 0;
  char next[kMaxPath];
  next[0] = '\0';
  for (char c : value) {
    if (length + 1 >= sizeof(next))
      break;
    next[length++] = c == '\n' ? ' ' : c;
  }
  next[length] = '\0';
  std::memcpy(phase, next, length + 1);
}

bool zplan::registerTemporaryFile(llvm::StringRef path) {
  if (path.size() + 1 > kMaxPath)
    return false;
  for (char *slot : temporaries)
    if (!slot[0]) {
      std::memcpy(slot, path.data(), path.size());
      slot[path.size()] = '\0';
      return true;
    }
  return false;
}

void zplan::unregisterTemporaryFile(llvm::StringRef path) {
  for (char *slot : temporaries)
    if (slot[0] && path == slot)
      slot[0] = '\0';
}

void zplan::crashIfTestRequested(llvm::StringRef point) {
  const char *request = std::getenv("ZCC_TEST_CRASH");
  if (!request)
    return;
  auto [kind, where] = llvm::StringRef(request).split('@');
  if ((where.empty() ? llvm::StringRef("write") : where) != point)
    return;
  if (kind == "abort")
    std::abort();
  if (kind == "segv")
    std::raise(SIGSEGV);
  if (kind == "exception")
    // libstdc++ throws std::out_of_range itself: zcc is built without
    // exceptions and cannot throw one directly.
    (void)std::vector<int>().at(1);
  if (kind == "fatal")
    llvm::report_fatal_error("ZCC_TEST_CRASH=fatal");
  if (kind == "assert")
    __assert_fail("ZCC_TEST_CRASH=assert", __FILE__, __LINE__, __func__);
}
