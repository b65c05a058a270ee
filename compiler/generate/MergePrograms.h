//===- MergePrograms.h - one module from two imports of one model ---------===//
//
// The importer specialises a model to one set of static shapes, so a plan
// whose programs run at different shapes (prefill and decode; training and
// generation, docs/one-plan.md) is built from several imports of the same
// model, merged into one module. The merged module declares each parameter
// once, so the schedule shards it once and every program reads the same
// shards, master weights and optimizer state.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_GENERATE_MERGEPROGRAMS_H
#define ZPLAN_COMPILER_GENERATE_MERGEPROGRAMS_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

namespace zplan {

/// Moves every function and module-level symbol of `from` (nn.kv_cache, ...)
/// to the end of `into`, and drops `from`'s parameter declarations: both
/// modules must declare the same parameters, each with the same type and the
/// same data (the same initializer, inline or at the same external-data
/// location); otherwise, or when another symbol is declared by both, the
/// error names it and `into` is left unchanged. `intoName` and `fromName`
/// say what the modules are in messages ("training", "generation").
llvm::Error mergePrograms(mlir::ModuleOp into, llvm::StringRef intoName,
                          mlir::ModuleOp from, llvm::StringRef fromName);

} // namespace zplan

#endif // ZPLAN_COMPILER_GENERATE_MERGEPROGRAMS_H
