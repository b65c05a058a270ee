//===- Elementwise.cpp - arithmetic, comparison, logic, math, Cast --------===//
//
// Element-wise ops: numpy broadcasting of the inputs, then one function per
// element, computed in double or int64 and rounded to the element type.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>

namespace zplan::onnx_import {

/// Python-style remainder (sign of the divisor), ONNX Mod with fmod = 0.
template <typename T> T flooredRemainder(T remainder, T divisor) {
  if (remainder != 0 && ((remainder < 0) != (divisor < 0)))
    remainder += divisor;
  return remainder;
}

int64_t integerPower(int64_t base, int64_t exponent) {
  if (exponent < 0)
    // Only |base| == 1 keeps a nonzero integer part.
    return base == 1 ? 1 : base == -1 ? (exponent % 2 ? -1 : 1) : 0;
  int64_t result = 1;
  while (exponent) {
    if (exponent & 1)
      result = wrappingMul(result, base);
    base = wrappingMul(base, base);
    exponent >>= 1;
  }
  return result;
}

llvm::Error inferBinaryArithmetic(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  const ValueInfo &lhs = *ctx.input(0), &rhs = *ctx.input(1);
  // Pow alone allows the exponent a different type; the result has the
  // base's type.
  if (op != "Pow" && lhs.type != rhs.type)
    return typeMismatchError(ctx, lhs.type, rhs.type);
  std::optional<std::vector<int64_t>> shape =
      broadcastShapes(lhs.shape, rhs.shape);
  if (!shape)
    return broadcastError(ctx, lhs.shape, rhs.shape);
  ElementType type = lhs.type;
  ctx.setOutput(0, type, *shape);
  if (!ctx.canFold(*shape, {&lhs, &rhs}))
    return llvm::Error::success();

  std::vector<int64_t> lhsAt = broadcastOffsets(lhs.shape, *shape);
  std::vector<int64_t> rhsAt = broadcastOffsets(rhs.shape, *shape);
  int64_t count = lhsAt.size();
  const HostTensor &a = *lhs.value, &b = *rhs.value;
  bool fmod = ctx.getInt("fmod", 0) != 0;

  bool integerResult = !elementTypeInfo(type).isFloat &&
                       (op != "Pow" || !elementTypeInfo(rhs.type).isFloat);
  if (integerResult) {
    std::vector<int64_t> values(count);
    for (int64_t i = 0; i < count; ++i) {
      int64_t x = a.getInt(lhsAt[i]), y = b.getInt(rhsAt[i]);
      int64_t &r = values[i];
      if (op == "Add") {
        r = wrappingAdd(x, y);
      } else if (op == "Sub") {
        r = wrappingSub(x, y);
      } else if (op == "Mul") {
        r = wrappingMul(x, y);
      } else if (op == "Pow") {
        r = integerPower(x, y);
      } else {
        // Div and Mod: truncating division, like onnxruntime's C++ kernels.
        if (y == 0)
          return ctx.error("integer division by zero");
        bool overflows = x == std::numeric_limits<int64_t>::min() && y == -1;
        if (op == "Div")
          r = overflows ? x : x / y;
        else
          r = overflows ? 0 : fmod ? x % y : flooredRemainder(x % y, y);
      }
    }
    ctx.setOutput(0, HostTensor::fromInts(type, *shape, std::move(values)));
    return llvm::Error::success();
  }

  std::vector<double> values(count);
  for (int64_t i = 0; i < count; ++i) {
    double x = a.getDouble(lhsAt[i]), y = b.getDouble(rhsAt[i]);
    double &r = values[i];
    if (op == "Add")
      r = x + y;
    else if (op == "Sub")
      r = x - y;
    else if (op == "Mul")
      r = x * y;
    else if (op == "Div")
      r = x / y;
    else if (op == "Pow")
      r = std::pow(x, y);
    else
      r = fmod ? std::fmod(x, y) : flooredRemainder(std::fmod(x, y), y);
  }
  // fromFloats rounds to the element type (or truncates, for an integer base
  // raised to a float exponent).
  ctx.setOutput(0, HostTensor::fromFloats(type, *shape, std::move(values)));
  return llvm::Error::success();
}

llvm::Error inferVariadicMinMaxSum(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  std::vector<const ValueInfo *> operands;
  for (size_t i = 0; i < ctx.numInputs(); ++i) {
    operands.push_back(ctx.input(i));
    if (operands.back()->type != operands.front()->type)
      return typeMismatchError(ctx, operands.front()->type,
                               operands.back()->type);
  }
  std::vector<int64_t> shape;
  if (llvm::Error err = broadcastAll(ctx, operands, shape))
    return err;
  ElementType type = operands.front()->type;
  ctx.setOutput(0, type, shape);
  if (!ctx.allInputsConstant() || !ctx.canFold(shape, {}))
    return llvm::Error::success();

  int64_t count = numElements(shape);
  bool floating = elementTypeInfo(type).isFloat;
  std::vector<double> floats;
  std::vector<int64_t> ints;
  for (size_t k = 0; k < operands.size(); ++k) {
    std::vector<int64_t> at = broadcastOffsets(operands[k]->shape, shape);
    const HostTensor &value = *operands[k]->value;
    if (floating) {
      if (k == 0) {
        for (int64_t offset : at)
          floats.push_back(value.floats[offset]);
        continue;
      }
      for (int64_t i = 0; i < count; ++i) {
        double x = value.floats[at[i]];
        // NaN propagates, as in onnxruntime's Min/Max.
        if (op == "Sum")
          floats[i] = roundToElementType(floats[i] + x, type);
        else if (std::isnan(x))
          floats[i] = x;
        else if (op == "Min")
          floats[i] =
              std::isnan(floats[i]) ? floats[i] : std::min(floats[i], x);
        else
          floats[i] =
              std::isnan(floats[i]) ? floats[i] : std::max(floats[i], x);
      }
    } else {
      if (k == 0) {
        for (int64_t offset : at)
          ints.push_back(value.ints[offset]);
        continue;
      }
      for (int64_t i = 0; i < count; ++i) {
        int64_t x = value.ints[at[i]];
        ints[i] = op == "Sum"   ? wrappingAdd(ints[i], x)
                  : op == "Min" ? std::min(ints[i], x)
                                : std::max(ints[i], x);
      }
    }
  }
  ctx.setOutput(0, floating
                       ? HostTensor::fromFloats(type, shape, std::move(floats))
                       : HostTensor::fromInts(type, shape, std::move(ints)));
  return llvm::Error::success();
}

/// A binary op with a bool result: broadcasts `lhs` with `rhs` into output
/// 0 and, when the node folds, fills it with `element(i, j)` of lhs's
/// element i and rhs's element j.
static llvm::Error
inferBinaryToBool(NodeContext &ctx, const ValueInfo &lhs, const ValueInfo &rhs,
                  llvm::function_ref<bool(int64_t, int64_t)> element) {
  std::optional<std::vector<int64_t>> shape =
      broadcastShapes(lhs.shape, rhs.shape);
  if (!shape)
    return broadcastError(ctx, lhs.shape, rhs.shape);
  ctx.setOutput(0, ElementType::Bool, *shape);
  if (!ctx.canFold(*shape, {&lhs, &rhs}))
    return llvm::Error::success();
  std::vector<int64_t> lhsAt = broadcastOffsets(lhs.shape, *shape);
  std::vector<int64_t> rhsAt = broadcastOffsets(rhs.shape, *shape);
  std::vector<int64_t> values(lhsAt.size());
  for (size_t i = 0; i < values.size(); ++i)
    values[i] = element(lhsAt[i], rhsAt[i]);
  ctx.setOutput(
      0, HostTensor::fromInts(ElementType::Bool, *shape, std::move(values)));
  return llvm::Error::success();
}

llvm::Error inferComparison(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  const ValueInfo &lhs = *ctx.input(0), &rhs = *ctx.input(1);
  if (lhs.type != rhs.type)
    return typeMismatchError(ctx, lhs.type, rhs.type);
  bool floating = elementTypeInfo(lhs.type).isFloat;
  return inferBinaryToBool(ctx, lhs, rhs, [&](int64_t i, int64_t j) {
    // Compare in the storage's own domain: int64 values beyond 2^53 would
    // collide as doubles.
    int order;
    if (floating) {
      double x = lhs.value->floats[i], y = rhs.value->floats[j];
      if (std::isnan(x) || std::isnan(y))
        return false;
      order = x < y ? -1 : x > y ? 1 : 0;
    } else {
      int64_t x = lhs.value->ints[i], y = rhs.value->ints[j];
      order = x < y ? -1 : x > y ? 1 : 0;
    }
    if (op == "Equal")
      return order == 0;
    if (op == "Less")
      return order < 0;
    if (op == "LessOrEqual")
      return order <= 0;
    if (op == "Greater")
      return order > 0;
    return order >= 0;
  });
}

llvm::Error inferLogical(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  const ValueInfo &lhs = *ctx.input(0);
  if (lhs.type != ElementType::Bool)
    return ctx.error(std::string("inputs must be i1, got ") +
                     typeName(lhs.type));
  if (op == "Not") {
    ctx.setOutput(0, ElementType::Bool, lhs.shape);
    if (!ctx.canFold(lhs.shape, {&lhs}))
      return llvm::Error::success();
    std::vector<int64_t> values = lhs.value->ints;
    for (int64_t &value : values)
      value = !value;
    ctx.setOutput(0, HostTensor::fromInts(ElementType::Bool, lhs.shape,
                                          std::move(values)));
    return llvm::Error::success();
  }
  const ValueInfo &rhs = *ctx.input(1);
  if (rhs.type != ElementType::Bool)
    return ctx.error(std::string("inputs must be i1, got ") +
                     typeName(rhs.type));
  return inferBinaryToBool(ctx, lhs, rhs, [&](int64_t i, int64_t j) {
    bool x = lhs.value->ints[i], y = rhs.value->ints[j];
    return op == "And" ? x && y : op == "Or" ? x || y : x != y;
  });
}

llvm::Error inferUnaryMath(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  const ValueInfo &data = *ctx.input(0);
  bool integerCapable =
      op == "Neg" || op == "Abs" || op == "Sign" || op == "Relu";
  if (!elementTypeInfo(data.type).isFloat && !integerCapable)
    return ctx.error(std::string("integer input ") + typeName(data.type) +
                     " is not supported");
  ctx.setOutput(0, data.type, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return llvm::Error::success();

  if (!elementTypeInfo(data.type).isFloat) {
    std::vector<int64_t> values = data.value->ints;
    for (int64_t &x : values) {
      if (op == "Neg")
        x = wrappingSub(0, x);
      else if (op == "Abs")
        x = x < 0 ? wrappingSub(0, x) : x;
      else if (op == "Sign")
        x = (x > 0) - (x < 0);
      else
        x = std::max<int64_t>(x, 0);
    }
    ctx.setOutput(
        0, HostTensor::fromInts(data.type, data.shape, std::move(values)));
    return llvm::Error::success();
  }

  static const std::unordered_map<std::string, double (*)(double)> functions = {
      {"Neg", [](double x) { return -x; }},
      {"Abs", [](double x) { return std::fabs(x); }},
      {"Sqrt", [](double x) { return std::sqrt(x); }},
      {"Reciprocal", [](double x) { return 1.0 / x; }},
      {"Exp", [](double x) { return std::exp(x); }},
      {"Log", [](double x) { return std::log(x); }},
      {"Floor", [](double x) { return std::floor(x); }},
      {"Ceil", [](double x) { return std::ceil(x); }},
      {"Erf", [](double x) { return std::erf(x); }},
      {"Tanh", [](double x) { return std::tanh(x); }},
      {"Sigmoid", [](double x) { return 1.0 / (1.0 + std::exp(-x)); }},
      {"Relu", [](double x) { return x > 0 ? x : 0.0; }},
      {"Cos", [](double x) { return std::cos(x); }},
      {"Sin", [](double x) { return std::sin(x); }},
      {"Sign",
       [](double x) { return std::isnan(x) ? x : double((x > 0) - (x < 0)); }},
  };
  double (*function)(double) = functions.at(op);
  std::vector<double> values = data.value->floats;
  for (double &x : values)
    x = function(x);
  ctx.setOutput(
      0, HostTensor::fromFloats(data.type, data.shape, std::move(values)));
  return llvm::Error::success();
}

llvm::Error inferFloatClassification(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  ctx.setOutput(0, ElementType::Bool, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return llvm::Error::success();
  bool isNaN = ctx.opType() == "IsNaN";
  bool detectPositive = ctx.getInt("detect_positive", 1) != 0;
  bool detectNegative = ctx.getInt("detect_negative", 1) != 0;
  std::vector<int64_t> values(data.value->numElements(), 0);
  if (elementTypeInfo(data.type).isFloat) {
    for (size_t i = 0; i < values.size(); ++i) {
      double x = data.value->floats[i];
      values[i] =
          isNaN ? std::isnan(x)
                : std::isinf(x) && (x > 0 ? detectPositive : detectNegative);
    }
  }
  ctx.setOutput(0, HostTensor::fromInts(ElementType::Bool, data.shape,
                                        std::move(values)));
  return llvm::Error::success();
}

/// Gelu (opset 20): x * Phi(x), exactly (approximate "none", with erf) or
/// with the tanh approximation (GPT-2's gelu_new).
llvm::Error inferGelu(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  if (!elementTypeInfo(data.type).isFloat)
    return ctx.error("input must be floating-point, got " +
                     typeName(data.type));
  std::string approximate = "none";
  if (const onnx::AttributeProto *attribute = ctx.findAttribute("approximate"))
    approximate = attribute->s();
  if (approximate != "none" && approximate != "tanh")
    return ctx.error("approximate must be 'none' or 'tanh', got '" +
                     approximate + "'");
  ctx.setOutput(0, data.type, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return llvm::Error::success();
  std::vector<double> values = data.value->floats;
  for (double &x : values)
    x = approximate == "tanh"
            ? 0.5 * x *
                  (1.0 + std::tanh(std::sqrt(2.0 / 3.14159265358979323846) *
                                   (x + 0.044715 * x * x * x)))
            : 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  ctx.setOutput(
      0, HostTensor::fromFloats(data.type, data.shape, std::move(values)));
  return llvm::Error::success();
}

llvm::Error inferCast(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  ElementType target;
  if (ctx.opType() == "CastLike") {
    target = ctx.input(1)->type;
  } else {
    const onnx::AttributeProto *to = ctx.findAttribute("to");
    if (!to)
      return ctx.error("the to attribute is required");
    std::optional<ElementType> type =
        elementTypeFromOnnx(static_cast<int32_t>(to->i()));
    if (!type)
      return ctx.error("unsupported target type " + std::to_string(to->i()));
    target = *type;
  }
  ctx.setOutput(0, target, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return llvm::Error::success();
  // The factories implement the conversions: rounding to narrower floats,
  // truncation toward zero from float to integer, wrapping between integers.
  const HostTensor &value = *data.value;
  ctx.setOutput(0,
                elementTypeInfo(value.type).isFloat
                    ? HostTensor::fromFloats(target, data.shape, value.floats)
                    : HostTensor::fromInts(target, data.shape, value.ints));
  return llvm::Error::success();
}

} // namespace zplan::onnx_import
