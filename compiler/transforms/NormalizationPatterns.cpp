//===- NormalizationPatterns.cpp - form layer_norm and rms_norm -----------===//
//
// Opset < 17 exports LayerNorm as
//   d = x - ReduceMean(x); y = d / Sqrt(ReduceMean(Pow(d, 2)) + eps)
// followed by `* weight + bias`; Llama's RMSNorm exports as
//   y = x * Reciprocal(Sqrt(ReduceMean(Pow(x, 2)) + eps))
// followed by `weight * y`. The core of each chain becomes a weightless
// norm op, and two small patterns absorb the Mul and Add after it, so the
// weight and bias can come in either order and either operand position.
// Tests: test/transforms/form-nn-ops.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"
#include "compiler/transforms/PatternMatching.h"

using namespace mlir;
using namespace zplan;

namespace {

/// Trailing, consecutive, keepdims axes: the shape layer_norm normalises.
static std::optional<int64_t> trailingAxesStart(nn::ReduceMeanOp mean) {
  int64_t rank =
      llvm::cast<RankedTensorType>(mean.getInput().getType()).getRank();
  ArrayRef<int64_t> axes = mean.getAxes();
  if (!mean.getKeepdims() || axes.empty() || axes.back() != rank - 1)
    return std::nullopt;
  for (size_t i = 1; i < axes.size(); ++i)
    if (axes[i] != axes[i - 1] + 1)
      return std::nullopt;
  return axes.front();
}

/// Matches `value` = x^2 (Pow with exponent 2, or x * x); binds x.
static bool matchSquare(Value value, Value &base) {
  if (auto pow = value.getDefiningOp<nn::PowOp>()) {
    if (!isSplatNear(pow.getRhs(), 2.0))
      return false;
    base = pow.getLhs();
    return true;
  }
  if (auto mul = value.getDefiningOp<nn::MulOp>()) {
    if (mul.getLhs() != mul.getRhs())
      return false;
    base = mul.getLhs();
    return true;
  }
  return false;
}

/// Matches `value` = Sqrt(ReduceMean(base^2) + eps); binds base, the mean
/// and eps.
static bool matchRootMeanSquare(Value value, Value &base,
                                nn::ReduceMeanOp &mean, double &epsilon) {
  auto sqrt = value.getDefiningOp<nn::SqrtOp>();
  if (!sqrt)
    return false;
  auto add = sqrt.getInput().getDefiningOp<nn::AddOp>();
  if (!add)
    return false;
  return matchEitherOrder(
      add,
      [&](Value v) {
        mean = v.getDefiningOp<nn::ReduceMeanOp>();
        return mean && matchSquare(mean.getInput(), base);
      },
      [&](Value v) {
        std::optional<double> eps = getSplatFloat(v);
        if (eps)
          epsilon = *eps;
        return eps.has_value();
      });
}

/// (x - mean(x)) / sqrt(mean((x - mean(x))^2) + eps)  ->  layer_norm(x)
struct FormLayerNorm : OpRewritePattern<nn::DivOp> {
  FormLayerNorm(MLIRContext *context)
      : OpRewritePattern(context, /*benefit=*/2) {}

  LogicalResult matchAndRewrite(nn::DivOp div,
                                PatternRewriter &rewriter) const override {
    auto centered = div.getLhs().getDefiningOp<nn::SubOp>();
    if (!centered)
      return failure();
    auto mean = centered.getRhs().getDefiningOp<nn::ReduceMeanOp>();
    Value input = centered.getLhs();
    if (!mean || mean.getInput() != input)
      return failure();
    std::optional<int64_t> axis = trailingAxesStart(mean);
    Value squaredBase;
    nn::ReduceMeanOp variance;
    double epsilon = 0;
    if (!axis ||
        !matchRootMeanSquare(div.getRhs(), squaredBase, variance, epsilon) ||
        squaredBase != centered.getResult() ||
        variance.getAxes() != mean.getAxes() ||
        input.getType() != div.getType())
      return failure();
    rewriter.replaceOpWithNewOp<nn::LayerNormOp>(
        div, div.getType(), input, /*weight=*/Value(), /*bias=*/Value(),
        rewriter.getI64IntegerAttr(*axis),
        rewriter.getF32FloatAttr(static_cast<float>(epsilon)));
    return success();
  }
};

/// x * (1 / sqrt(mean(x^2) + eps)), or x / sqrt(...)  ->  rms_norm(x)
struct FormRmsNorm : OpRewritePattern<nn::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::MulOp mul,
                                PatternRewriter &rewriter) const override {
    Value input, base;
    nn::ReduceMeanOp mean;
    double epsilon = 0;
    auto isInverseRms = [&](Value v) {
      Value denominator;
      if (auto reciprocal = v.getDefiningOp<nn::ReciprocalOp>())
        denominator = reciprocal.getInput();
      else if (auto div = v.getDefiningOp<nn::DivOp>();
               div && isSplatNear(div.getLhs(), 1.0))
        denominator = div.getRhs();
      return denominator &&
             matchRootMeanSquare(denominator, base, mean, epsilon);
    };
    if (!matchEitherOrder(mul, isInverseRms,
                          [&](Value v) { return (input = v), true; }))
      return failure();
    return formRmsNorm(mul, input, base, mean, epsilon, rewriter);
  }

  static LogicalResult formRmsNorm(Operation *root, Value input, Value base,
                                   nn::ReduceMeanOp mean, double epsilon,
                                   PatternRewriter &rewriter) {
    if (base != input || !isMeanOverLastDim(mean) ||
        input.getType() != root->getResult(0).getType())
      return failure();
    rewriter.replaceOpWithNewOp<nn::RmsNormOp>(
        root, input.getType(), input, /*weight=*/Value(),
        rewriter.getF32FloatAttr(static_cast<float>(epsilon)));
    return success();
  }
};

struct FormRmsNormFromDiv : OpRewritePattern<nn::DivOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::DivOp div,
                                PatternRewriter &rewriter) const override {
    Value base;
    nn::ReduceMeanOp mean;
    double epsilon = 0;
    if (!matchRootMeanSquare(div.getRhs(), base, mean, epsilon))
      return failure();
    return FormRmsNorm::formRmsNorm(div, div.getLhs(), base, mean, epsilon,
                                    rewriter);
  }
};

/// The shape a norm's weight and bias must have.
static ArrayRef<int64_t> normalizedShape(Operation *norm, int64_t axis) {
  return llvm::cast<RankedTensorType>(norm->getOperand(0).getType())
      .getShape()
      .drop_front(axis);
}

static ArrayRef<int64_t> shapeOf(Value value) {
  return llvm::cast<RankedTensorType>(value.getType()).getShape();
}

/// layer_norm(x) * w  ->  layer_norm(x) weight w, and likewise for rms_norm.
struct AbsorbNormWeight : OpRewritePattern<nn::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::MulOp mul,
                                PatternRewriter &rewriter) const override {
    Operation *norm = nullptr;
    Value weight;
    auto isWeightless = [&](Value v) {
      Operation *op = v.getDefiningOp();
      if (!op || !v.hasOneUse())
        return false;
      if (auto ln = llvm::dyn_cast<nn::LayerNormOp>(op);
          ln && !ln.getWeight() && !ln.getBias()) {
        norm = op;
        return true;
      }
      if (auto rms = llvm::dyn_cast<nn::RmsNormOp>(op);
          rms && !rms.getWeight()) {
        norm = op;
        return true;
      }
      return false;
    };
    if (!matchEitherOrder(mul, isWeightless,
                          [&](Value v) { return (weight = v), true; }))
      return failure();
    int64_t axis = 0;
    if (auto ln = llvm::dyn_cast<nn::LayerNormOp>(norm))
      axis = ln.getAxis();
    else
      axis = shapeOf(norm->getOperand(0)).size() - 1;
    if (shapeOf(weight) != normalizedShape(norm, axis) ||
        mul.getType() != norm->getResult(0).getType())
      return failure();
    rewriter.modifyOpInPlace(norm, [&] {
      if (auto ln = llvm::dyn_cast<nn::LayerNormOp>(norm))
        ln.getWeightMutable().assign(weight);
      else
        llvm::cast<nn::RmsNormOp>(norm).getWeightMutable().assign(weight);
    });
    // The weight may be defined after the norm; it must dominate it now.
    if (Operation *def = weight.getDefiningOp();
        def && def->getBlock() == norm->getBlock() &&
        norm->isBeforeInBlock(def))
      rewriter.moveOpAfter(norm, def);
    rewriter.replaceOp(mul, norm->getResults());
    return success();
  }
};

/// layer_norm(x) weight w + b  ->  layer_norm(x) weight w bias b
struct AbsorbLayerNormBias : OpRewritePattern<nn::AddOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::AddOp add,
                                PatternRewriter &rewriter) const override {
    nn::LayerNormOp norm;
    Value bias;
    auto isBiasless = [&](Value v) {
      norm = v.getDefiningOp<nn::LayerNormOp>();
      return norm && v.hasOneUse() && norm.getWeight() && !norm.getBias();
    };
    if (!matchEitherOrder(add, isBiasless,
                          [&](Value v) { return (bias = v), true; }))
      return failure();
    if (shapeOf(bias) != normalizedShape(norm, norm.getAxis()) ||
        add.getType() != norm.getType())
      return failure();
    rewriter.modifyOpInPlace(norm, [&] { norm.getBiasMutable().assign(bias); });
    if (Operation *def = bias.getDefiningOp();
        def && def->getBlock() == norm->getBlock() &&
        norm->isBeforeInBlock(def))
      rewriter.moveOpAfter(norm, def);
    rewriter.replaceOp(add, norm.getResult());
    return success();
  }
};

} // namespace

void zplan::populateNormalizationPatterns(RewritePatternSet &patterns) {
  patterns.add<FormLayerNorm, FormRmsNorm, FormRmsNormFromDiv, AbsorbNormWeight,
               AbsorbLayerNormBias>(patterns.getContext());
}
