//===- Elementwise.cpp - unary, binary, compare, where and cast kernels ---===//
//
// The nn dialect's elementwise ops. Binary ops, comparisons and `where`
// broadcast their operands to the result shape with numpy rules, through
// forEachRun, whose innermost run is as long as the operands allow (a whole
// row for a bias add). Transcendental functions of f32 use the f32 libm
// functions (within an ulp or two); the composite ones (sigmoid, silu, gelu)
// are evaluated in double and rounded once. Integer arithmetic wraps
// (computed unsigned) instead of invoking undefined behaviour; integer
// division by zero is an error, found before anything is written.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/ActivationSupport.h"

#include <cmath>
#include <limits>
#include <optional>
#include <type_traits>

namespace zplan::cpu::detail {

namespace {

/// The type composite float functions are evaluated in.
template <typename T> using Wide = double;

/// Wrapping integer arithmetic: computed in the unsigned type of the same
/// width, so that overflow wraps (two's complement) and is never undefined.
template <typename T, typename Fn> T wrapping(T a, T b, Fn fn) {
  using Unsigned = std::make_unsigned_t<T>;
  return static_cast<T>(fn(static_cast<Unsigned>(a), static_cast<Unsigned>(b)));
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

/// Which element types a unary op takes.
enum class Domain { FloatOnly, Numeric };

template <Domain domain, typename Fn>
Status unary(const KernelCall &call, Fn fn) {
  if (Status status = expectArity(call, 1, 1); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (Status status = expectType(call, "result", result, input.dtype);
      !status.ok())
    return status;
  if (Status status = expectShape(call, "result", result, input.shape);
      !status.ok())
    return status;
  if (domain == Domain::Numeric && input.dtype == ElementType::Bool)
    return call.error("input has element type bool, expected a number");
  int64_t count = input.numElements();
  auto body = [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (domain == Domain::FloatOnly && !std::is_floating_point_v<T>) {
      return Status::success(); // unreachable: dispatchFloatType
    } else {
      const T *x = input.as<T>();
      T *y = result.as<T>();
      for (int64_t i = 0; i < count; ++i)
        y[i] = fn(x[i]);
      return Status::success();
    }
  };
  if constexpr (domain == Domain::FloatOnly)
    return dispatchFloatType(call, "input", input.dtype, body);
  else
    return dispatchType(call, "input", input.dtype, body);
}

template <typename T> T sigmoidOf(T x) {
  Wide<T> wide = x;
  return static_cast<T>(1.0 / (1.0 + std::exp(-wide)));
}

} // namespace

Status runNeg(const KernelCall &call) {
  return unary<Domain::Numeric>(call, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>)
      return -x;
    else
      return wrapping<T>(0, x, [](auto a, auto b) { return a - b; });
  });
}

Status runAbs(const KernelCall &call) {
  return unary<Domain::Numeric>(call, [](auto x) {
    using T = decltype(x);
    if constexpr (std::is_floating_point_v<T>)
      return std::abs(x);
    else if constexpr (std::is_unsigned_v<T>)
      return x;
    else
      return x < 0 ? wrapping<T>(
                         0, x, [](auto a, auto b) { return a - b; })
                   : x;
  });
}

Status runRelu(const KernelCall &call) {
  return unary<Domain::Numeric>(call, [](auto x) {
    using T = decltype(x);
    // NaN stays NaN, as in ONNX Relu (max(x, 0) with x NaN).
    return x < T(0) ? T(0) : x;
  });
}

Status runSqrt(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, [](auto x) { return std::sqrt(x); });
}

Status runReciprocal(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, [](auto x) {
    using T = decltype(x);
    return T(1) / x;
  });
}

Status runExp(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, [](auto x) { return std::exp(x); });
}

Status runLog(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, [](auto x) { return std::log(x); });
}

Status runErf(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, [](auto x) { return std::erf(x); });
}

Status runTanh(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, [](auto x) { return std::tanh(x); });
}

Status runCos(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, [](auto x) { return std::cos(x); });
}

Status runSin(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, [](auto x) { return std::sin(x); });
}

Status runSigmoid(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, [](auto x) { return sigmoidOf(x); });
}

Status runSilu(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, [](auto x) {
    using T = decltype(x);
    Wide<T> wide = x;
    return static_cast<T>(wide / (1.0 + std::exp(-wide)));
  });
}

Status readGeluApproximation(const KernelCall &call, bool &tanhForm) {
  std::string approximate = textAttributeOr(call, "approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    return call.error("approximate is \"" + approximate +
                      "\", expected \"none\" or \"tanh\"");
  tanhForm = approximate == "tanh";
  return Status::success();
}

Status runGelu(const KernelCall &call) {
  bool tanhForm;
  if (Status status = readGeluApproximation(call, tanhForm); !status.ok())
    return status;
  if (!tanhForm) {
    // x/2 (1 + erf(x/sqrt 2)), written with erfc so that the tail for
    // large negative x keeps its digits instead of cancelling to 0.
    return unary<Domain::FloatOnly>(call, [](auto x) {
      using T = decltype(x);
      Wide<T> wide = x;
      return static_cast<T>(0.5 * wide * std::erfc(-wide * kSqrtHalf));
    });
  }
  return unary<Domain::FloatOnly>(call, [](auto x) {
    using T = decltype(x);
    Wide<T> wide = x;
    return static_cast<T>(0.5 * wide *
                          (1.0 + std::tanh(geluTanhArgument(wide))));
  });
}

//===----------------------------------------------------------------------===//
// Binary, compare, where
//===----------------------------------------------------------------------===//

namespace {

/// Broadcasts operand `index` (called `what`) to the result shape.
Status operandStrides(const KernelCall &call, size_t index, const char *what,
                      std::vector<int64_t> &strides) {
  const TensorRef &operand = call.operands[index];
  const std::vector<int64_t> &target = call.results[0].shape;
  if (broadcastStrides(operand.shape, target, strides))
    return Status::success();
  return call.error(
      std::string(what) + " of shape " + formatShape(operand.shape) +
      " does not broadcast to the result shape " + formatShape(target));
}

/// out = fn(a, b) over the result shape; `a`, `b` read with broadcast
/// strides. Inner runs are specialised for the contiguous and the
/// scalar-broadcast cases so that they vectorise.
template <typename In, typename Out, typename Fn>
void broadcastBinary(const In *a, const std::vector<int64_t> &aStrides,
                     const In *b, const std::vector<int64_t> &bStrides,
                     const std::vector<int64_t> &shape, Out *out, Fn fn) {
  forEachRun<2>(shape, {aStrides, bStrides}, {0, 0},
                [&](int64_t o, const std::array<int64_t, 2> &in,
                    const std::array<int64_t, 2> &step, int64_t count) {
                  const In *x = a + in[0];
                  const In *y = b + in[1];
                  Out *z = out + o;
                  if (step[0] == 1 && step[1] == 1) {
                    for (int64_t j = 0; j < count; ++j)
                      z[j] = fn(x[j], y[j]);
                  } else if (step[0] == 1 && step[1] == 0) {
                    In right = *y;
                    for (int64_t j = 0; j < count; ++j)
                      z[j] = fn(x[j], right);
                  } else if (step[0] == 0 && step[1] == 1) {
                    In left = *x;
                    for (int64_t j = 0; j < count; ++j)
                      z[j] = fn(left, y[j]);
                  } else {
                    for (int64_t j = 0; j < count; ++j)
                      z[j] = fn(x[j * step[0]], y[j * step[1]]);
                  }
                });
}

/// Checks a binary op: two operands of one element type that broadcast to
/// the result; the result has `resultType` (the operands' type if none).
Status checkBinary(const KernelCall &call,
                   std::optional<ElementType> resultType,
                   std::vector<int64_t> &lhsStrides,
                   std::vector<int64_t> &rhsStrides) {
  if (Status status = expectArity(call, 2, 2); !status.ok())
    return status;
  const TensorRef &lhs = call.operands[0], &rhs = call.operands[1];
  if (Status status = expectType(call, "rhs", rhs, lhs.dtype); !status.ok())
    return status;
  if (Status status = expectType(call, "result", call.results[0],
                                 resultType.value_or(lhs.dtype));
      !status.ok())
    return status;
  if (Status status = operandStrides(call, 0, "lhs", lhsStrides); !status.ok())
    return status;
  return operandStrides(call, 1, "rhs", rhsStrides);
}

/// An arithmetic binary op: `fn(a, b)` for every numeric type (bool is
/// refused). `check(tag)` may refuse the operands before any work.
template <typename Fn, typename Check>
Status arithmetic(const KernelCall &call, Fn fn, Check check) {
  std::vector<int64_t> lhsStrides, rhsStrides;
  if (Status status = checkBinary(call, std::nullopt, lhsStrides, rhsStrides);
      !status.ok())
    return status;
  const TensorRef &lhs = call.operands[0], &rhs = call.operands[1],
                  &result = call.results[0];
  if (lhs.dtype == ElementType::Bool)
    return call.error("operands have element type bool, expected numbers");
  return dispatchType(call, "lhs", lhs.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (Status status = check(tag); !status.ok())
      return status;
    broadcastBinary(lhs.as<T>(), lhsStrides, rhs.as<T>(), rhsStrides,
                    result.shape, result.as<T>(),
                    [&](T a, T b) -> T { return fn(a, b); });
    return Status::success();
  });
}

template <typename Fn> Status arithmetic(const KernelCall &call, Fn fn) {
  return arithmetic(call, fn, [](auto) { return Status::success(); });
}

/// A comparison: bool result (0 or 1), operands of any type (bool too).
template <typename Fn> Status compare(const KernelCall &call, Fn fn) {
  std::vector<int64_t> lhsStrides, rhsStrides;
  if (Status status =
          checkBinary(call, ElementType::Bool, lhsStrides, rhsStrides);
      !status.ok())
    return status;
  const TensorRef &lhs = call.operands[0], &rhs = call.operands[1],
                  &result = call.results[0];
  return dispatchType(call, "lhs", lhs.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    broadcastBinary(lhs.as<T>(), lhsStrides, rhs.as<T>(), rhsStrides,
                    result.shape, result.as<uint8_t>(),
                    [&](T a, T b) -> uint8_t { return fn(a, b) ? 1 : 0; });
    return Status::success();
  });
}

/// Integer power by squaring (wrapping); a negative exponent truncates
/// 1/base^n toward zero as integer division would.
template <typename T> T integerPower(T base, T exponent) {
  if constexpr (std::is_signed_v<T>) {
    if (exponent < 0) {
      if (base == 1)
        return 1;
      if (base == -1)
        return (exponent % 2) ? T(-1) : T(1);
      return 0;
    }
  }
  using Unsigned = std::make_unsigned_t<T>;
  Unsigned result = 1, factor = static_cast<Unsigned>(base);
  for (auto n = static_cast<Unsigned>(exponent); n; n >>= 1) {
    if (n & 1)
      result = static_cast<Unsigned>(result * factor);
    factor = static_cast<Unsigned>(factor * factor);
  }
  return static_cast<T>(result);
}

} // namespace

Status runAdd(const KernelCall &call) {
  return arithmetic(call, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_floating_point_v<T>)
      return a + b;
    else
      return wrapping<T>(a, b, [](auto x, auto y) { return x + y; });
  });
}

Status runSub(const KernelCall &call) {
  return arithmetic(call, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_floating_point_v<T>)
      return a - b;
    else
      return wrapping<T>(a, b, [](auto x, auto y) { return x - y; });
  });
}

Status runMul(const KernelCall &call) {
  return arithmetic(call, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_floating_point_v<T>)
      return a * b;
    else
      return wrapping<T>(a, b, [](auto x, auto y) { return x * y; });
  });
}

Status runDiv(const KernelCall &call) {
  auto noZeroDivisor = [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (std::is_integral_v<T>) {
      const TensorRef &rhs = call.operands[1];
      const T *divisor = rhs.as<T>();
      for (int64_t i = 0, n = rhs.numElements(); i < n; ++i)
        if (divisor[i] == 0)
          return call.error("integer division by zero (rhs element " +
                            std::to_string(i) + ")");
    }
    return Status::success();
  };
  return arithmetic(
      call,
      [](auto a, auto b) {
        using T = decltype(a);
        if constexpr (std::is_floating_point_v<T>) {
          return a / b;
        } else if constexpr (std::is_signed_v<T>) {
          // The one overflowing quotient, min / -1, wraps to min.
          if (b == -1)
            return wrapping<T>(0, a, [](auto x, auto y) { return x - y; });
          return static_cast<T>(a / b); // C++ truncates toward zero
        } else {
          return static_cast<T>(a / b);
        }
      },
      noZeroDivisor);
}

Status runPow(const KernelCall &call) {
  return arithmetic(call, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_floating_point_v<T>)
      return std::pow(a, b);
    else
      return integerPower<T>(a, b);
  });
}

Status runMax(const KernelCall &call) {
  return arithmetic(call, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(a) || std::isnan(b))
        return std::numeric_limits<T>::quiet_NaN();
    return a < b ? b : a;
  });
}

Status runMin(const KernelCall &call) {
  return arithmetic(call, [](auto a, auto b) {
    using T = decltype(a);
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(a) || std::isnan(b))
        return std::numeric_limits<T>::quiet_NaN();
    return b < a ? b : a;
  });
}

Status runEqual(const KernelCall &call) {
  return compare(call, [](auto a, auto b) { return a == b; });
}

Status runLess(const KernelCall &call) {
  return compare(call, [](auto a, auto b) { return a < b; });
}

Status runGreater(const KernelCall &call) {
  return compare(call, [](auto a, auto b) { return a > b; });
}

Status runWhere(const KernelCall &call) {
  if (Status status = expectArity(call, 3, 3); !status.ok())
    return status;
  const TensorRef &condition = call.operands[0], &onTrue = call.operands[1],
                  &onFalse = call.operands[2], &result = call.results[0];
  if (Status status =
          expectType(call, "condition", condition, ElementType::Bool);
      !status.ok())
    return status;
  if (Status status = expectType(call, "on_false", onFalse, onTrue.dtype);
      !status.ok())
    return status;
  if (Status status = expectType(call, "result", result, onTrue.dtype);
      !status.ok())
    return status;
  std::array<std::vector<int64_t>, 3> strides;
  const char *names[] = {"condition", "on_true", "on_false"};
  for (size_t i = 0; i < 3; ++i)
    if (Status status = operandStrides(call, i, names[i], strides[i]);
        !status.ok())
      return status;
  // A select moves elements: only their width matters.
  return dispatchBySize(call, "on_true", onTrue.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const uint8_t *c = condition.as<uint8_t>();
    const T *a = onTrue.as<T>();
    const T *b = onFalse.as<T>();
    T *out = result.as<T>();
    forEachRun<3>(result.shape, strides, {0, 0, 0},
                  [&](int64_t o, const std::array<int64_t, 3> &in,
                      const std::array<int64_t, 3> &step, int64_t count) {
                    for (int64_t j = 0; j < count; ++j)
                      out[o + j] = c[in[0] + j * step[0]]
                                       ? a[in[1] + j * step[1]]
                                       : b[in[2] + j * step[2]];
                  });
    return Status::success();
  });
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

namespace {

/// One element from From to To: float to integer truncates toward zero
/// (saturating, NaN to 0, where C++ would be undefined); to bool is x != 0.
template <typename To, typename From> To convert(From x, bool toBool) {
  if (toBool)
    return x != From(0) ? To(1) : To(0);
  if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    if (std::isnan(x))
      return 0;
    double truncated = std::trunc(static_cast<double>(x));
    if (truncated <= static_cast<double>(std::numeric_limits<To>::min()))
      return std::numeric_limits<To>::min();
    if (truncated >= static_cast<double>(std::numeric_limits<To>::max()))
      return std::numeric_limits<To>::max();
    return static_cast<To>(truncated);
  } else {
    return static_cast<To>(x);
  }
}

} // namespace

Status runCast(const KernelCall &call) {
  if (Status status = expectArity(call, 1, 1); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (Status status = expectShape(call, "result", result, input.shape);
      !status.ok())
    return status;
  bool toBool = result.dtype == ElementType::Bool;
  int64_t count = input.numElements();
  return dispatchType(call, "input", input.dtype, [&](auto fromTag) -> Status {
    using From = typename decltype(fromTag)::type;
    return dispatchType(call, "result", result.dtype,
                        [&](auto toTag) -> Status {
                          using To = typename decltype(toTag)::type;
                          const From *x = input.as<From>();
                          To *y = result.as<To>();
                          for (int64_t i = 0; i < count; ++i)
                            y[i] = convert<To>(x[i], toBool);
                          return Status::success();
                        });
  });
}

} // namespace zplan::cpu::detail
