//===- ActivationPatterns.cpp - form gelu and silu ------------------------===//
//
// GELU reaches ONNX (before opset 20) as a product of three factors:
//   erf form:  x * 0.5 * (1 + erf(x / sqrt(2)))        (x * 0.7071 also seen)
//   tanh form: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
// associated in whatever order the model's Python wrote. The patterns
// flatten the product (PatternMatching.h) and look for the three factors.
// SiLU is x * sigmoid(x). Tests: test/transforms/form-nn-ops.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"
#include "compiler/transforms/PatternMatching.h"

#include <cmath>

using namespace mlir;
using namespace zplan;

namespace {

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;

/// Matches `value` = 1 + f(...) with f the unary op OpT; binds f's input.
template <typename OpT> static bool matchOnePlus(Value value, Value &inner) {
  auto add = value.getDefiningOp<nn::AddOp>();
  return add && matchEitherOrder(
                    add, [](Value v) { return isSplatNear(v, 1.0); },
                    [&](Value v) {
                      auto op = v.getDefiningOp<OpT>();
                      if (op)
                        inner = op.getInput();
                      return static_cast<bool>(op);
                    });
}

/// Matches `value` = x / sqrt(2) or x * (1 / sqrt(2)); binds x.
static bool matchScaledBySqrtHalf(Value value, Value &x) {
  if (auto div = value.getDefiningOp<nn::DivOp>()) {
    x = div.getLhs();
    return isSplatNear(div.getRhs(), kSqrt2);
  }
  auto mul = value.getDefiningOp<nn::MulOp>();
  return mul && matchEitherOrder(
                    mul, [](Value v) { return isSplatNear(v, 1.0 / kSqrt2); },
                    [&](Value v) { return (x = v), true; });
}

/// Matches sqrt(2/pi) * (x + 0.044715 * x^3) in any operand order; binds x.
static bool matchTanhArgument(Value value, Value &x) {
  auto mul = value.getDefiningOp<nn::MulOp>();
  if (!mul)
    return false;
  Value sum;
  if (!matchEitherOrder(
          mul, [](Value v) { return isSplatNear(v, kSqrt2OverPi); },
          [&](Value v) { return (sum = v), true; }))
    return false;
  auto add = sum.getDefiningOp<nn::AddOp>();
  if (!add)
    return false;
  Value cubed;
  return matchEitherOrder(
      add, [&](Value v) { return (x = v), true; },
      [&](Value v) {
        auto scaled = v.getDefiningOp<nn::MulOp>();
        if (!scaled ||
            !matchEitherOrder(
                scaled, [](Value c) { return isSplatNear(c, 0.044715); },
                [&](Value c) { return (cubed = c), true; }))
          return false;
        auto pow = cubed.getDefiningOp<nn::PowOp>();
        return pow && pow.getLhs() == x && isSplatNear(pow.getRhs(), 3.0);
      });
}

struct FormGelu : OpRewritePattern<nn::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::MulOp mul,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> factors;
    collectFactors(mul.getResult(), factors);
    if (factors.size() != 3)
      return failure();
    if (!takeFactor(factors, [](Value v) { return isSplatNear(v, 0.5); }))
      return failure();
    // The remaining two are x and (1 + erf/tanh(g(x))), in either order.
    for (int swap = 0; swap < 2; ++swap) {
      Value x = factors[swap], bracket = factors[1 - swap];
      Value inner, matchedX;
      StringRef approximate;
      if (matchOnePlus<nn::ErfOp>(bracket, inner) &&
          matchScaledBySqrtHalf(inner, matchedX))
        approximate = "none";
      else if (matchOnePlus<nn::TanhOp>(bracket, inner) &&
               matchTanhArgument(inner, matchedX))
        approximate = "tanh";
      else
        continue;
      if (matchedX != x || x.getType() != mul.getType())
        return failure();
      rewriter.replaceOpWithNewOp<nn::GeluOp>(mul, x.getType(), x, approximate);
      return success();
    }
    return failure();
  }
};

struct FormSilu : OpRewritePattern<nn::MulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(nn::MulOp mul,
                                PatternRewriter &rewriter) const override {
    Value x;
    if (!matchEitherOrder(
            mul,
            [&](Value v) {
              auto sigmoid = v.getDefiningOp<nn::SigmoidOp>();
              return sigmoid && (x = sigmoid.getInput());
            },
            [&](Value v) { return v == x; }) ||
        x.getType() != mul.getType())
      return failure();
    rewriter.replaceOpWithNewOp<nn::SiluOp>(mul, x);
    return success();
  }
};

} // namespace

void zplan::populateActivationPatterns(RewritePatternSet &patterns) {
  patterns.add<FormGelu, FormSilu>(patterns.getContext());
}
