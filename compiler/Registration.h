//===- Registration.h - dialects and passes every zplan tool knows --------===//
//
// zcc and zcc-opt register the same dialects and passes through these two
// calls, so a pipeline written for one runs unchanged in the other.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_REGISTRATION_H
#define ZPLAN_COMPILER_REGISTRATION_H

#include "mlir/IR/DialectRegistry.h"

namespace zplan {

/// nn, zero, and the upstream dialects their IR uses (func).
void registerAllDialects(mlir::DialectRegistry &registry);

/// Every pass of Passes.td and the named pipelines of Pipeline.h.
void registerAllPasses();

} // namespace zplan

#endif // ZPLAN_COMPILER_REGISTRATION_H
