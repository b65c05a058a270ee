//===- CrashHandler.h - every crash as one zcc: error line ----------------===//
//
// A crash in zcc (a signal, an abort, a failed assertion, an uncaught
// exception, llvm::report_fatal_error) must read like any other error: one
// line `zcc: error: internal error: WHAT while PHASE`, exit status 1, and no
// output file left behind, complete or partial. LLVM's own handlers print a
// stack dump and re-raise the signal instead, so zcc installs these in their
// place and never calls InitLLVM or PrintStackTraceOnErrorSignal. The driver
// names the phase it is in and registers each temporary file it creates;
// the signal handler, which may only do async-signal-safe work, unlinks them
// with unlink(2), writes the message with write(2) and leaves with _exit(2).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_CRASHHANDLER_H
#define ZPLAN_COMPILER_CRASHHANDLER_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

namespace zplan {

/// Installs the handlers for fatal signals, std::terminate, LLVM fatal
/// errors and failed assertions. `tool` prefixes the message ("zcc").
/// Also ignores SIGXFSZ, so that a write past `ulimit -f` fails with EFBIG
/// (and becomes an ordinary error naming the file) instead of killing zcc.
void installCrashHandlers(const char *tool);

/// Names what zcc is doing now ("importing 'model.onnx'"); a crash says
/// "while <phase>". Call from the main thread only.
void setCrashPhase(const llvm::Twine &phase);

/// Files (and directories made for them, registered before their files) a
/// crash must remove. At most a handful at once: registration
/// returns false when there is no free slot (the caller then fails rather
/// than risk leaving the file behind).
bool registerTemporaryFile(llvm::StringRef path);
void unregisterTemporaryFile(llvm::StringRef path);

/// Test-only: when the environment variable ZCC_TEST_CRASH is KIND or
/// KIND@POINT, with KIND one of abort, segv, exception, fatal, assert and
/// POINT equal to `point` (without @POINT: "write"), crashes that way now, so
/// that lit tests can prove each crash becomes one error line and leaves no
/// file. Does nothing otherwise. Not a user-facing feature.
void crashIfTestRequested(llvm::StringRef point);

} // namespace zplan

#endif // ZPLAN_COMPILER_CRASHHANDLER_H
