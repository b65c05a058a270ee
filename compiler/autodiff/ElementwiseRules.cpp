//===- ElementwiseRules.cpp - gradients of elementwise nn ops -------------===//
//
// Unary functions y = f(x): dx = dy * f'(x), written with y where that saves
// recomputation. Binary ops broadcast (numpy), so each operand's cotangent
// is summed back to its own shape (GradientBuilder::unbroadcast). The math
// is stated at each rule; PyTorch's conventions decide the non-smooth points
// (relu'(0) = 0, |x|'(0) = 0, max/min split ties evenly).
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/GradientBuilder.h"

#include <cmath>

using namespace mlir;
using namespace zplan;
using namespace zplan::autodiff;

namespace {

/// dx from (builder, x, y, dy) for a unary op y = f(x).
using UnaryDerivative =
    std::function<Value(GradientBuilder &, Value x, Value y, Value dy)>;

/// Wraps a unary derivative into a rule.
GradientRule unaryRule(UnaryDerivative derivative) {
  return [derivative](GradientBuilder &b, Operation *op,
                      ArrayRef<Value> resultGradients,
                      MutableArrayRef<Value> operandGradients) {
    Value x = op->getOperand(0);
    if (b.needsGradient(x) && resultGradients[0])
      operandGradients[0] =
          derivative(b, x, op->getResult(0), resultGradients[0]);
    return success();
  };
}

/// The cotangents of a broadcasting binary op z = f(a, b), given the
/// unbroadcast-free partials (computed at the result's shape).
using BinaryPartial = std::function<Value(GradientBuilder &, Value a, Value b,
                                          Value z, Value dz)>;

GradientRule binaryRule(BinaryPartial lhsPartial, BinaryPartial rhsPartial) {
  return [lhsPartial, rhsPartial](GradientBuilder &b, Operation *op,
                                  ArrayRef<Value> resultGradients,
                                  MutableArrayRef<Value> operandGradients) {
    Value lhs = op->getOperand(0), rhs = op->getOperand(1);
    Value z = op->getResult(0), dz = resultGradients[0];
    if (!dz)
      return success();
    if (b.needsGradient(lhs))
      operandGradients[0] =
          b.unbroadcast(lhsPartial(b, lhs, rhs, z, dz), lhs.getType());
    if (b.needsGradient(rhs))
      operandGradients[1] =
          b.unbroadcast(rhsPartial(b, lhs, rhs, z, dz), rhs.getType());
    return success();
  };
}

/// A float 0/1 mask from an i1 tensor.
Value asFloat(GradientBuilder &b, Value condition, Value like) {
  return b.cast(condition, getElementTypeOrSelf(like));
}

/// The splat value of a constant operand, if it is one.
std::optional<double> splatConstant(Value value) {
  auto constant = value.getDefiningOp<nn::ConstantOp>();
  if (!constant)
    return std::nullopt;
  auto dense = llvm::dyn_cast<DenseFPElementsAttr>(constant.getValue());
  if (!dense || !dense.isSplat())
    return std::nullopt;
  return dense.getSplatValue<APFloat>().convertToDouble();
}

/// max/min: the weight of the lhs in the result, 1 where it wins, 1/2 on a
/// tie (torch.maximum / torch.minimum), 0 where it loses.
Value lhsWinWeight(GradientBuilder &b, Value lhs, Value rhs, bool isMax) {
  Value wins = isMax ? b.greater(lhs, rhs) : b.less(lhs, rhs);
  Value ties = b.equal(lhs, rhs);
  return b.add(asFloat(b, wins, lhs),
               b.mul(asFloat(b, ties, lhs), b.scalarLike(lhs, 0.5)));
}

} // namespace

void zplan::autodiff::registerElementwiseRules(GradientRegistry &registry) {
  // y = -x: dx = -dy.
  registry.add("nn.neg",
               unaryRule([](GradientBuilder &b, Value, Value, Value dy) {
                 return b.unary<nn::NegOp>(dy);
               }));
  // y = sqrt(x): dx = dy / (2 y).
  registry.add("nn.sqrt",
               unaryRule([](GradientBuilder &b, Value, Value y, Value dy) {
                 return b.div(b.mul(dy, b.scalarLike(dy, 0.5)), y);
               }));
  // y = exp(x): dx = dy * y.
  registry.add("nn.exp", unaryRule([](GradientBuilder &b, Value, Value y,
                                      Value dy) { return b.mul(dy, y); }));
  // y = log(x): dx = dy / x.
  registry.add("nn.log", unaryRule([](GradientBuilder &b, Value x, Value,
                                      Value dy) { return b.div(dy, x); }));
  // y = tanh(x): dx = dy * (1 - y^2).
  registry.add("nn.tanh",
               unaryRule([](GradientBuilder &b, Value, Value y, Value dy) {
                 return b.mul(dy, b.sub(b.scalarLike(y, 1.0), b.mul(y, y)));
               }));
  // y = sigmoid(x): dx = dy * y * (1 - y).
  registry.add("nn.sigmoid",
               unaryRule([](GradientBuilder &b, Value, Value y, Value dy) {
                 return b.mul(b.mul(dy, y), b.sub(b.scalarLike(y, 1.0), y));
               }));
  // y = max(x, 0): dx = dy where x > 0, else 0 (relu'(0) = 0 as PyTorch).
  registry.add("nn.relu",
               unaryRule([](GradientBuilder &b, Value x, Value, Value dy) {
                 return b.where(b.greater(x, b.scalarLike(x, 0.0)), dy,
                                b.scalarLike(dy, 0.0));
               }));
  // y = x s with s = sigmoid(x): dx = dy * s * (1 + x (1 - s)).
  registry.add(
      "nn.silu", unaryRule([](GradientBuilder &b, Value x, Value, Value dy) {
        Value s = b.unary<nn::SigmoidOp>(x);
        Value one = b.scalarLike(x, 1.0);
        return b.mul(b.mul(dy, s), b.add(one, b.mul(x, b.sub(one, s))));
      }));
  // y = gelu(x): dx = nn.gelu_grad(dy, x) (the derivative of the chosen
  // approximation, see NNOps.td).
  registry.add("nn.gelu", [](GradientBuilder &b, Operation *op,
                             ArrayRef<Value> resultGradients,
                             MutableArrayRef<Value> operandGradients) {
    auto gelu = llvm::cast<nn::GeluOp>(op);
    if (b.needsGradient(gelu.getInput()) && resultGradients[0])
      operandGradients[0] = b.getBuilder().create<nn::GeluGradOp>(
          b.getLoc(), gelu.getType(), resultGradients[0], gelu.getInput(),
          gelu.getApproximateAttr());
    return success();
  });
  // y = erf(x): dx = dy * 2/sqrt(pi) * exp(-x^2).
  registry.add(
      "nn.erf", unaryRule([](GradientBuilder &b, Value x, Value, Value dy) {
        Value gauss = b.unary<nn::ExpOp>(b.unary<nn::NegOp>(b.mul(x, x)));
        return b.mul(b.mul(dy, gauss), b.scalarLike(x, 2.0 / std::sqrt(M_PI)));
      }));
  // y = 1/x: dx = -dy * y^2.
  registry.add("nn.reciprocal",
               unaryRule([](GradientBuilder &b, Value, Value y, Value dy) {
                 return b.unary<nn::NegOp>(b.mul(dy, b.mul(y, y)));
               }));
  // y = |x|: dx = dy * sign(x), sign(0) = 0 as PyTorch.
  registry.add("nn.abs",
               unaryRule([](GradientBuilder &b, Value x, Value, Value dy) {
                 Value zero = b.scalarLike(x, 0.0);
                 Value sign = b.sub(asFloat(b, b.greater(x, zero), x),
                                    asFloat(b, b.less(x, zero), x));
                 return b.mul(dy, sign);
               }));
  // y = cos(x): dx = -dy * sin(x).
  registry.add("nn.cos",
               unaryRule([](GradientBuilder &b, Value x, Value, Value dy) {
                 return b.unary<nn::NegOp>(b.mul(dy, b.unary<nn::SinOp>(x)));
               }));
  // y = sin(x): dx = dy * cos(x).
  registry.add("nn.sin",
               unaryRule([](GradientBuilder &b, Value x, Value, Value dy) {
                 return b.mul(dy, b.unary<nn::CosOp>(x));
               }));
  // y = cast(x) between float types: dx = cast(dy) back to x's type. (A
  // cast to or from an integer or i1 carries no gradient: the integer side
  // is never active.)
  registry.add("nn.cast",
               unaryRule([](GradientBuilder &b, Value x, Value, Value dy) {
                 return b.cast(dy, getElementTypeOrSelf(x));
               }));

  // z = a + b: da = dz, db = dz (each summed to its shape).
  registry.add("nn.add", binaryRule([](GradientBuilder &, Value, Value, Value,
                                       Value dz) { return dz; },
                                    [](GradientBuilder &, Value, Value, Value,
                                       Value dz) { return dz; }));
  // z = a - b: da = dz, db = -dz.
  registry.add("nn.sub",
               binaryRule([](GradientBuilder &, Value, Value, Value,
                             Value dz) { return dz; },
                          [](GradientBuilder &b, Value, Value, Value,
                             Value dz) { return b.unary<nn::NegOp>(dz); }));
  // z = a * b: da = dz * b, db = dz * a.
  registry.add("nn.mul",
               binaryRule([](GradientBuilder &b, Value, Value rhs, Value,
                             Value dz) { return b.mul(dz, rhs); },
                          [](GradientBuilder &b, Value lhs, Value, Value,
                             Value dz) { return b.mul(dz, lhs); }));
  // z = a / b: da = dz / b, db = -dz * z / b (= -dz a / b^2).
  registry.add(
      "nn.div",
      binaryRule([](GradientBuilder &b, Value, Value rhs, Value,
                    Value dz) { return b.div(dz, rhs); },
                 [](GradientBuilder &b, Value, Value rhs, Value z, Value dz) {
                   return b.unary<nn::NegOp>(b.div(b.mul(dz, z), rhs));
                 }));
  // z = a^b: da = dz * b * a^(b-1) (a^(b-1) folded for the exponents 1 and
  // 2 exporters use); db = dz * z * log(a), only when b needs a gradient.
  registry.add("nn.pow",
               binaryRule(
                   [](GradientBuilder &b, Value lhs, Value rhs, Value,
                      Value dz) -> Value {
                     std::optional<double> exponent = splatConstant(rhs);
                     if (exponent && *exponent == 1.0)
                       return dz;
                     if (exponent && *exponent == 2.0)
                       return b.mul(dz, b.mul(lhs, b.scalarLike(lhs, 2.0)));
                     Value lowered = exponent
                                         ? b.scalarLike(rhs, *exponent - 1.0)
                                         : b.sub(rhs, b.scalarLike(rhs, 1.0));
                     return b.mul(b.mul(dz, rhs), b.pow(lhs, lowered));
                   },
                   [](GradientBuilder &b, Value lhs, Value, Value z, Value dz) {
                     return b.mul(b.mul(dz, z), b.unary<nn::LogOp>(lhs));
                   }));
  // z = max(a, b): da = dz * w, db = dz * (1 - w), w = [a > b] + [a == b]/2.
  for (bool isMax : {true, false})
    registry.add(
        isMax ? "nn.max" : "nn.min",
        binaryRule(
            [isMax](GradientBuilder &b, Value lhs, Value rhs, Value, Value dz) {
              return b.mul(dz, lhsWinWeight(b, lhs, rhs, isMax));
            },
            [isMax](GradientBuilder &b, Value lhs, Value rhs, Value, Value dz) {
              Value weight = b.sub(b.scalarLike(lhs, 1.0),
                                   lhsWinWeight(b, lhs, rhs, isMax));
              return b.mul(dz, weight);
            }));
  // z = where(c, t, f): dt = dz where c else 0, df = 0 where c else dz; the
  // condition is boolean and gets nothing.
  registry.add("nn.where", [](GradientBuilder &b, Operation *op,
                              ArrayRef<Value> resultGradients,
                              MutableArrayRef<Value> operandGradients) {
    auto where = llvm::cast<nn::WhereOp>(op);
    Value dz = resultGradients[0];
    if (!dz)
      return success();
    Value zero = b.scalarLike(dz, 0.0);
    if (b.needsGradient(where.getOnTrue()))
      operandGradients[1] = b.unbroadcast(
          b.where(where.getCondition(), dz, zero), where.getOnTrue().getType());
    if (b.needsGradient(where.getOnFalse()))
      operandGradients[2] =
          b.unbroadcast(b.where(where.getCondition(), zero, dz),
                        where.getOnFalse().getType());
    return success();
  });
}
