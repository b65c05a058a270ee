//===- ElementwiseOps.h - elementwise checks and element functions --------===//
//
// Shared validation for every backend to call, and the formulas every
// backend compiles: an elementwise op is two things, the checks on its
// operands (types, shapes, broadcasting) and the function of one element.
// Every backend runs exactly these, so that a CUDA result can only differ
// from the CPU's by the last ulps of a libm function: the checks are
// defined in ElementwiseOps.cpp, and the element functions are here as
// functors callable from host and device code (ZPLAN_HOST_DEVICE,
// HostDevice.h). Composite float functions (sigmoid, silu, gelu) are
// evaluated in double and rounded once; integer arithmetic wraps (computed
// unsigned) instead of invoking undefined behaviour.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_ELEMENTWISEOPS_H
#define ZPLAN_RUNTIME_OPS_ELEMENTWISEOPS_H

#include "runtime/ops/ActivationOps.h"
#include "runtime/ops/HostDevice.h"
#include "runtime/ops/KernelCall.h"
#include "runtime/support/Bfloat16.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <type_traits>
#include <vector>

namespace zplan::ops {

//===----------------------------------------------------------------------===//
// Checks
//===----------------------------------------------------------------------===//

/// Which element types a unary op takes.
enum class Domain { FloatOnly, Numeric };

/// A unary op: one operand, a result of its type and shape; bool refused
/// by Numeric ops (FloatOnly ones refuse non-floats when they dispatch).
Status checkUnary(const KernelCall &call, Domain domain);

/// A binary op: two operands of one element type that broadcast to the
/// result (their strides returned); the result has `resultType` (the
/// operands' type if none).
Status checkBinary(const KernelCall &call,
                   std::optional<ElementType> resultType,
                   std::vector<int64_t> &lhsStrides,
                   std::vector<int64_t> &rhsStrides);

/// An arithmetic binary op: checkBinary, and numbers only (bool refused).
Status checkArithmetic(const KernelCall &call, std::vector<int64_t> &lhsStrides,
                       std::vector<int64_t> &rhsStrides);

/// where(condition bool, on_true, on_false): the three operands' broadcast
/// strides, in that order.
Status checkWhere(const KernelCall &call,
                  std::array<std::vector<int64_t>, 3> &strides);

/// cast: one operand, a result of its shape (any element type the backend
/// has, checked when dispatching).
Status checkCast(const KernelCall &call);

/// The casts with a bf16 side (mixed precision): f32 -> bf16 rounds to
/// nearest even, bf16 -> f32 widens exactly (ops/Bfloat16.h). Whether
/// `call`'s cast is one of them; `status` is an error naming the types for
/// a bf16 cast to or from anything but f32.
bool isBf16Cast(const KernelCall &call, Status &status);

//===----------------------------------------------------------------------===//
// Element functions
//===----------------------------------------------------------------------===//

/// Wrapping integer arithmetic: computed in the unsigned type of the same
/// width, so that overflow wraps (two's complement) and is never undefined.
template <typename T, typename Fn>
ZPLAN_HOST_DEVICE T wrapping(T a, T b, Fn fn) {
  using Unsigned = std::make_unsigned_t<T>;
  return static_cast<T>(fn(static_cast<Unsigned>(a), static_cast<Unsigned>(b)));
}

struct WrappingAdd {
  template <typename U> ZPLAN_HOST_DEVICE U operator()(U a, U b) const {
    return a + b;
  }
};
struct WrappingSub {
  template <typename U> ZPLAN_HOST_DEVICE U operator()(U a, U b) const {
    return a - b;
  }
};
struct WrappingMul {
  template <typename U> ZPLAN_HOST_DEVICE U operator()(U a, U b) const {
    return a * b;
  }
};

struct NegFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return -x;
    else
      return wrapping<T>(0, x, WrappingSub{});
  }
};

struct AbsFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    if constexpr (std::is_floating_point_v<T>)
      return std::abs(x);
    else if constexpr (std::is_unsigned_v<T>)
      return x;
    else
      return x < 0 ? wrapping<T>(0, x, WrappingSub{}) : x;
  }
};

struct ReluFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    // NaN stays NaN, as in ONNX Relu (max(x, 0) with x NaN).
    if constexpr (std::is_unsigned_v<T>)
      return x;
    else
      return x < T(0) ? T(0) : x;
  }
};

struct SqrtFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    return std::sqrt(x);
  }
};

struct ReciprocalFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    return T(1) / x;
  }
};

struct ExpFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    return std::exp(x);
  }
};

struct LogFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    return std::log(x);
  }
};

struct ErfFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    return std::erf(x);
  }
};

struct TanhFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    return std::tanh(x);
  }
};

struct CosFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    return std::cos(x);
  }
};

struct SinFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    return std::sin(x);
  }
};

struct SigmoidFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    double wide = x;
    return static_cast<T>(1.0 / (1.0 + std::exp(-wide)));
  }
};

struct SiluFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    double wide = x;
    return static_cast<T>(wide / (1.0 + std::exp(-wide)));
  }
};

/// gelu with approximate = "none": x/2 (1 + erf(x/sqrt 2)), written with
/// erfc so that the tail for large negative x keeps its digits instead of
/// cancelling to 0.
struct GeluErfFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    double wide = x;
    return static_cast<T>(0.5 * wide * std::erfc(-wide * kSqrtHalf));
  }
};

/// gelu with approximate = "tanh": x/2 (1 + tanh(u)).
struct GeluTanhFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T x) const {
    double wide = x;
    return static_cast<T>(0.5 * wide *
                          (1.0 + std::tanh(geluTanhArgument(wide))));
  }
};

struct AddFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return a + b;
    else
      return wrapping<T>(a, b, WrappingAdd{});
  }
};

struct SubFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return a - b;
    else
      return wrapping<T>(a, b, WrappingSub{});
  }
};

struct MulFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return a * b;
    else
      return wrapping<T>(a, b, WrappingMul{});
  }
};

/// a / b; an integer b is never 0 here (each backend refuses a zero
/// divisor its own way).
struct DivFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) {
      return a / b;
    } else if constexpr (std::is_signed_v<T>) {
      // The one overflowing quotient, min / -1, wraps to min.
      if (b == -1)
        return wrapping<T>(0, a, WrappingSub{});
      return static_cast<T>(a / b); // C++ truncates toward zero
    } else {
      return static_cast<T>(a / b);
    }
  }
};

/// Integer power by squaring (wrapping); a negative exponent truncates
/// 1/base^n toward zero as integer division would.
template <typename T> ZPLAN_HOST_DEVICE T integerPower(T base, T exponent) {
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

struct PowFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      return std::pow(a, b);
    else
      return integerPower<T>(a, b);
  }
};

/// max and min propagate NaN (numpy's maximum/minimum).
struct MaxFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(a) || std::isnan(b))
        return std::numeric_limits<T>::quiet_NaN();
    return a < b ? b : a;
  }
};

struct MinFn {
  template <typename T> ZPLAN_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>)
      if (std::isnan(a) || std::isnan(b))
        return std::numeric_limits<T>::quiet_NaN();
    return b < a ? b : a;
  }
};

/// An element function of floats run on bf16 storage (mixed precision: an
/// elementwise op whose operands are all bf16, docs/mixed-precision.md):
/// each operand widened exactly, `fn` computed as the f32 kernel computes
/// it, the result rounded to nearest even once. This is how torch runs an
/// elementwise op on bf16 tensors (in float, one rounding per result), and
/// it is one functor for every backend, so a CPU and a CUDA result differ
/// only where the f32 results (a libm ulp) straddle a rounding boundary.
template <typename Fn> struct InBf16 {
  Fn fn;
  ZPLAN_HOST_DEVICE uint16_t operator()(uint16_t x) const {
    return floatToBf16(fn(bf16ToFloat(x)));
  }
  ZPLAN_HOST_DEVICE uint16_t operator()(uint16_t a, uint16_t b) const {
    return floatToBf16(fn(bf16ToFloat(a), bf16ToFloat(b)));
  }
};

/// Comparisons: 1 or 0, the bool result's storage.
struct EqualFn {
  template <typename T> ZPLAN_HOST_DEVICE uint8_t operator()(T a, T b) const {
    return a == b ? 1 : 0;
  }
};

struct LessFn {
  template <typename T> ZPLAN_HOST_DEVICE uint8_t operator()(T a, T b) const {
    return a < b ? 1 : 0;
  }
};

struct GreaterFn {
  template <typename T> ZPLAN_HOST_DEVICE uint8_t operator()(T a, T b) const {
    return a > b ? 1 : 0;
  }
};

/// One element from From to To: float to integer truncates toward zero
/// (saturating, NaN to 0, where C++ would be undefined); to bool is x != 0.
template <typename To, typename From>
ZPLAN_HOST_DEVICE To convert(From x, bool toBool) {
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

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_ELEMENTWISEOPS_H
