//===- Diagnostics.h - shared wording for verifier messages ---------------===//
//
// Verifiers of both dialects report the same kinds of mistakes (a shape that
// is not the expected one, an axis out of range). They all go through these
// helpers so that every message names the operand and prints the values the
// same way, e.g. "'nn.matmul' op result has shape 2x16x8, expected 2x16x256".
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_DIALECTS_DIAGNOSTICS_H
#define ZPLAN_DIALECTS_DIAGNOSTICS_H

#include "dialects/ShapeFormatting.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include <string>

namespace zplan {

/// Reports that `what` (an operand or result name) has `actual` shape where
/// `expected` was required.
inline mlir::LogicalResult emitShapeMismatch(mlir::Operation *op,
                                             llvm::StringRef what,
                                             llvm::ArrayRef<int64_t> actual,
                                             llvm::ArrayRef<int64_t> expected) {
  return op->emitOpError() << what << " has shape " << formatShape(actual)
                           << ", expected " << formatShape(expected);
}

/// Reports an axis (or permutation entry) outside [0, rank).
inline mlir::LogicalResult emitAxisOutOfRange(mlir::Operation *op,
                                              llvm::StringRef what,
                                              int64_t axis, int64_t rank) {
  return op->emitOpError() << what << " " << axis
                           << " is out of range for rank " << rank;
}

} // namespace zplan

#endif // ZPLAN_DIALECTS_DIAGNOSTICS_H
