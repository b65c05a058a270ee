//===- ZeroDialect.h - the zero dialect -----------------------------------===//
//
// Declarations of the zero dialect: shard and token types and the sharding,
// gather, release and reduce-scatter ops (see ZeroOps.td).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_DIALECTS_ZERO_ZERODIALECT_H
#define ZPLAN_DIALECTS_ZERO_ZERODIALECT_H

#include "dialects/nn/NNDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"

#include "dialects/zero/ZeroDialect.h.inc"

namespace zplan::zero {
/// The elements of zero.optimizer_update's hyper operand (tensor<8xf32>):
/// the slots plan.proto's HyperParameter enum lists, which zrun writes before
/// every optimizer step. The plan emitter asserts that the two agree.
inline constexpr int64_t kHyperParameterCount = 8;
} // namespace zplan::zero

#define GET_TYPEDEF_CLASSES
#include "dialects/zero/ZeroTypes.h.inc"

#define GET_OP_CLASSES
#include "dialects/zero/ZeroOps.h.inc"

#endif // ZPLAN_DIALECTS_ZERO_ZERODIALECT_H
