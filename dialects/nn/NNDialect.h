//===- NNDialect.h - the nn dialect ---------------------------------------===//
//
// Declarations of the nn dialect and its ops (see NNOps.td for what each op
// means). Include this header to use nn ops from C++.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_DIALECTS_NN_NNDIALECT_H
#define ZPLAN_DIALECTS_NN_NNDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

namespace zplan::nn {

/// Numpy broadcast of the static shapes `a` and `b`, or failure when a pair
/// of dimensions is neither equal nor 1.
mlir::FailureOr<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b);

/// Checks that every operand broadcasts (numpy rules) to the result shape.
mlir::LogicalResult verifyBroadcast(mlir::Operation *op);

/// The ONNX node name an nn op's location carries: the NameLoc the importer
/// gave it, or the first NameLoc inside the FusedLoc of an op formed from
/// several nodes; nullopt when there is none.
std::optional<llvm::StringRef> onnxNodeName(mlir::Location loc);

/// Op trait for elementwise ops whose operands broadcast to the result.
template <typename ConcreteType>
class BroadcastOperands
    : public mlir::OpTrait::TraitBase<ConcreteType, BroadcastOperands> {
public:
  static mlir::LogicalResult verifyTrait(mlir::Operation *op) {
    return verifyBroadcast(op);
  }
};

} // namespace zplan::nn

#include "dialects/nn/NNDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/nn/NNOps.h.inc"

#endif // ZPLAN_DIALECTS_NN_NNDIALECT_H
