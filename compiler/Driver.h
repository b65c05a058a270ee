//===- Driver.h - what zcc does, as a library call ------------------------===//
//
// zcc's main only turns flags into CompileOptions (Options.h) and calls
// compileModel(); everything it does lives in the library so that it can be
// tested and reused.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_DRIVER_H
#define ZPLAN_COMPILER_DRIVER_H

#include "compiler/Options.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace zplan {

/// Runs zcc: import, canonicalisation, the plan search (PlanSearch.h) for
/// the chosen policy and, for the report, the other one, plan emission, the
/// requested dumps, and with -o the plan and its weights file
/// (`OUT.weights`). Every file (plan, weights, dump files) is written as a
/// temporary and renamed only when all are complete: a failure leaves none
/// of them. An output that is a directory, or the same file as the model or
/// one of its external-data files, is refused before anything is written.
/// Progress notes go to `notes`.
llvm::Error compileModel(const CompileOptions &options, llvm::raw_ostream &out,
                         llvm::raw_ostream &notes);

} // namespace zplan

#endif // ZPLAN_COMPILER_DRIVER_H
