//===- PatternMatching.h - helpers for matching primitive chains ----------===//
//
// Exporters are free in how they order operands of commutative ops and how
// they associate products (`x * 0.5 * y` or `0.5 * (x * y)`). These helpers
// let the nn-forming patterns match the chains up to that freedom.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_TRANSFORMS_PATTERNMATCHING_H
#define ZPLAN_COMPILER_TRANSFORMS_PATTERNMATCHING_H

#include "dialects/nn/NNDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "llvm/ADT/STLExtras.h"
#include <cmath>
#include <optional>

namespace zplan {

/// The value of a floating-point nn.constant whose elements are all equal.
inline std::optional<double> getSplatFloat(mlir::Value value) {
  auto constant = value.getDefiningOp<nn::ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = llvm::dyn_cast<mlir::DenseFPElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<llvm::APFloat>().convertToDouble();
}

/// True when `value` is a float splat constant within `tolerance` (relative)
/// of `expected`. Exporters round constants like sqrt(2) to float32.
inline bool isSplatNear(mlir::Value value, double expected,
                        double tolerance = 1e-5) {
  std::optional<double> actual = getSplatFloat(value);
  return actual && std::fabs(*actual - expected) <=
                       tolerance * std::max(1.0, std::fabs(expected));
}

/// Matches `op`'s two operands against `first` and `second` in either order;
/// on success the two predicates have bound what they matched.
template <typename BinaryOp, typename FirstPred, typename SecondPred>
bool matchEitherOrder(BinaryOp op, FirstPred first, SecondPred second) {
  if (first(op.getLhs()) && second(op.getRhs()))
    return true;
  return first(op.getRhs()) && second(op.getLhs());
}

/// Flattens a tree of nn.mul into its factors. Only single-use inner products
/// are opened: a product used elsewhere is a value in its own right.
inline void collectFactors(mlir::Value value,
                           llvm::SmallVectorImpl<mlir::Value> &factors,
                           bool isRoot = true) {
  auto mul = value.getDefiningOp<nn::MulOp>();
  if (!mul || (!isRoot && !value.hasOneUse())) {
    factors.push_back(value);
    return;
  }
  collectFactors(mul.getLhs(), factors, false);
  collectFactors(mul.getRhs(), factors, false);
}

/// Removes from `factors` the first one satisfying `pred`; false if none.
template <typename Pred>
bool takeFactor(llvm::SmallVectorImpl<mlir::Value> &factors, Pred pred) {
  for (auto *it = factors.begin(); it != factors.end(); ++it) {
    if (pred(*it)) {
      factors.erase(it);
      return true;
    }
  }
  return false;
}

/// The single reduced axis of a keepdims reduce_mean over the last dimension,
/// or nullopt for any other reduction.
inline bool isMeanOverLastDim(nn::ReduceMeanOp mean) {
  int64_t rank =
      llvm::cast<mlir::RankedTensorType>(mean.getInput().getType()).getRank();
  return mean.getKeepdims() && mean.getAxes().size() == 1 &&
         mean.getAxes()[0] == rank - 1;
}

} // namespace zplan

#endif // ZPLAN_COMPILER_TRANSFORMS_PATTERNMATCHING_H
