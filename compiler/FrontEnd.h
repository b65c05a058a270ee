//===- FrontEnd.h - the module each --mode compiles -----------------------===//
//
// Before the schedule, every mode builds one module holding all the
// programs its plan runs: the import and canonicalisation, the training step
// (--mode train), the KV-cache rewrite (--mode generate), and for
// train,generate the merge of the generation programs into the training
// module (MergePrograms.h), whose parameters they share.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_FRONTEND_H
#define ZPLAN_COMPILER_FRONTEND_H

#include "compiler/Options.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>
#include <vector>

namespace zplan {

/// The one module every program of `options.mode` lives in, or an error:
/// the importer's, or a pipeline's followed by the pass diagnostics, which
/// `diagnostics` (filled by the caller's diagnostic handler) collects.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
buildModule(mlir::MLIRContext &context, const CompileOptions &options,
            std::string &diagnostics);

/// What the front end did in `mode`, for the ir dump's first header.
llvm::StringRef describeFrontEnd(CompileMode mode);

/// The model and every external-data file its parameters name in `module`,
/// resolved against the model's directory as the importer resolves them:
/// the files no output may be.
std::vector<std::string> collectInputFiles(const CompileOptions &options,
                                           mlir::ModuleOp module);

/// One warning per tie --tie forced between tensors whose values differ
/// (the trained model is then not the file's), without the "zcc: warning: "
/// prefix.
std::vector<std::string> collectTieWarnings(mlir::ModuleOp module);

} // namespace zplan

#endif // ZPLAN_COMPILER_FRONTEND_H
