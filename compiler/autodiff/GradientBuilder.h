//===- GradientBuilder.h - emitting backward ops, and the rule registry ---===//
//
// The gradient rules of zplan-autodiff are small functions, one per nn op,
// grouped by family (ElementwiseRules.cpp, LinalgRules.cpp, ...). Each reads
// the forward op and the cotangents of its results and emits the backward ops
// that give the cotangents of its operands. GradientBuilder is what they
// emit with: it computes every result type (numpy broadcasting, reductions,
// matmul batch dimensions) so a rule reads like its math, and it stamps every
// op with the location "<node>/grad" of the forward node it differentiates.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_AUTODIFF_GRADIENTBUILDER_H
#define ZPLAN_COMPILER_AUTODIFF_GRADIENTBUILDER_H

#include "dialects/nn/NNDialect.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include <functional>

namespace zplan::autodiff {

/// The NameLoc "<node>/grad" for the backward ops of a forward op whose
/// location names its ONNX node (the op name when it has none).
mlir::Location gradientLocation(mlir::Operation *forward);

/// The ONNX node name of an op, for messages ("<unnamed>" when unknown).
std::string nodeName(mlir::Operation *op);

/// Emits nn ops at the builder's insertion point with result types derived
/// from the operands, all at one location.
class GradientBuilder {
public:
  GradientBuilder(mlir::OpBuilder &builder, mlir::Location loc,
                  std::function<bool(mlir::Value)> needsGradient)
      : builder(builder), loc(loc), needsGradientFn(std::move(needsGradient)) {}

  /// True when the cotangent of forward value `value` is wanted (it is a
  /// float value that depends on a parameter). Rules skip the others, so
  /// no dead backward op is emitted for masks and constants.
  bool needsGradient(mlir::Value value) const { return needsGradientFn(value); }

  mlir::OpBuilder &getBuilder() { return builder; }
  mlir::Location getLoc() const { return loc; }

  /// A splat constant of `type` (any shape; rank 0 for a scalar that
  /// broadcasts).
  mlir::Value constant(mlir::RankedTensorType type, double value);
  /// A rank-0 constant of `elementType`.
  mlir::Value scalar(mlir::Type elementType, double value);
  /// A rank-0 constant with the element type of `like`.
  mlir::Value scalarLike(mlir::Value like, double value);

  // Elementwise, numpy broadcasting to the joint shape.
  mlir::Value add(mlir::Value lhs, mlir::Value rhs);
  mlir::Value sub(mlir::Value lhs, mlir::Value rhs);
  mlir::Value mul(mlir::Value lhs, mlir::Value rhs);
  mlir::Value div(mlir::Value lhs, mlir::Value rhs);
  mlir::Value pow(mlir::Value lhs, mlir::Value rhs);
  /// i1 results of the comparisons.
  mlir::Value greater(mlir::Value lhs, mlir::Value rhs);
  mlir::Value less(mlir::Value lhs, mlir::Value rhs);
  mlir::Value equal(mlir::Value lhs, mlir::Value rhs);
  mlir::Value where(mlir::Value condition, mlir::Value onTrue,
                    mlir::Value onFalse);
  /// Same shape, another element type.
  mlir::Value cast(mlir::Value value, mlir::Type elementType);

  /// A unary nn op (same type in and out).
  template <typename OpT> mlir::Value unary(mlir::Value value) {
    return builder.create<OpT>(loc, value.getType(), value);
  }

  // Movement and reductions.
  mlir::Value reshape(mlir::Value value, llvm::ArrayRef<int64_t> shape);
  mlir::Value transpose(mlir::Value value, llvm::ArrayRef<int64_t> perm);
  /// Swaps the last two dimensions.
  mlir::Value transposeLastTwo(mlir::Value value);
  mlir::Value expand(mlir::Value value, llvm::ArrayRef<int64_t> shape);
  mlir::Value reduceSum(mlir::Value value, llvm::ArrayRef<int64_t> axes,
                        bool keepdims);
  mlir::Value slice(mlir::Value value, llvm::ArrayRef<int64_t> starts,
                    llvm::ArrayRef<int64_t> steps,
                    llvm::ArrayRef<int64_t> shape);
  /// numpy matmul of operands of rank >= 2, optionally with rhs's last two
  /// dimensions swapped; batch dimensions broadcast.
  mlir::Value matmul(mlir::Value lhs, mlir::Value rhs, bool transposeRhs);

  /// Sums `gradient` (of a broadcast result) down to the shape of `target`:
  /// reduce_sum over the dimensions numpy broadcasting added or stretched,
  /// then a reshape. The identity when the shapes agree.
  mlir::Value unbroadcast(mlir::Value gradient, mlir::Type target);

private:
  template <typename OpT>
  mlir::Value broadcastBinary(mlir::Value lhs, mlir::Value rhs,
                              mlir::Type elementType);

  mlir::OpBuilder &builder;
  mlir::Location loc;
  std::function<bool(mlir::Value)> needsGradientFn;
};

/// A gradient rule: given the forward op and the cotangents of its results
/// (null for a result with none, i.e. zero), sets `operandGradients[i]` for
/// every operand i that needsGradient() (leaving the others null). Returns
/// failure after reporting an error on the op.
using GradientRule = std::function<mlir::LogicalResult(
    GradientBuilder &, mlir::Operation *, llvm::ArrayRef<mlir::Value>,
    llvm::MutableArrayRef<mlir::Value>)>;

/// Op name ("nn.matmul") -> rule.
class GradientRegistry {
public:
  /// Every rule of every family.
  GradientRegistry();

  void add(llvm::StringRef opName, GradientRule rule) {
    rules[opName] = std::move(rule);
  }
  /// The rule for `opName`, or null when there is none.
  const GradientRule *lookup(llvm::StringRef opName) const {
    auto found = rules.find(opName);
    return found == rules.end() ? nullptr : &found->second;
  }

private:
  llvm::StringMap<GradientRule> rules;
};

/// The rule families (one file each).
void registerElementwiseRules(GradientRegistry &registry);
void registerLinalgRules(GradientRegistry &registry);
void registerMovementRules(GradientRegistry &registry);
void registerReductionRules(GradientRegistry &registry);
void registerNormalizationRules(GradientRegistry &registry);
void registerLossRules(GradientRegistry &registry);

/// Shape of a ranked tensor value.
inline llvm::ArrayRef<int64_t> shapeOf(mlir::Value value) {
  return llvm::cast<mlir::RankedTensorType>(value.getType()).getShape();
}

} // namespace zplan::autodiff

#endif // ZPLAN_COMPILER_AUTODIFF_GRADIENTBUILDER_H
