//===- Elementwise.cpp - unary, binary, compare, where and cast kernels ---===//
//
// The nn dialect's elementwise ops. Binary ops, comparisons and `where`
// broadcast their operands to the result shape with numpy rules, through
// forEachRun, whose innermost run is as long as the operands allow (a whole
// row for a bias add). Transcendental functions of f32 use the f32 libm
// functions (within an ulp or two). Unary and arithmetic ops also take bf16
// operands (mixed precision): computed in f32 and rounded once (InBf16).
// SiLU and sigmoid of f32 and bf16 run sixteen lanes at a time in f32
// (VectorMath.h). The function of one element is a functor of
// runtime/ops/ElementwiseOps.h, shared with the CUDA kernels, as are the
// checks; integer division by zero is an error, found before anything is
// written. Every op here treats each element on its own: the elements are
// split across the kernel threads (Parallel.h, KernelSupport.h's
// parallelForEachRun).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/ops/ElementwiseOps.h"
#include "runtime/support/Bfloat16.h"

#include <algorithm>

namespace zplan::cpu::detail {

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

namespace {

template <Domain domain, typename Fn>
Status unary(const KernelCall &call, Fn fn) {
  if (Status status = checkUnary(call, domain); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  int64_t count = input.numElements();
  if (input.dtype == ElementType::BF16) {
    const uint16_t *x = input.as<uint16_t>();
    uint16_t *y = result.as<uint16_t>();
    InBf16<Fn> inBf16{fn};
    parallelFor(count, grainFor(1), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        y[i] = inBf16(x[i]);
    });
    return Status::success();
  }
  auto body = [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (domain == Domain::FloatOnly && !std::is_floating_point_v<T>) {
      return Status::success(); // unreachable: dispatchFloatType
    } else {
      const T *x = input.as<T>();
      T *y = result.as<T>();
      parallelFor(count, grainFor(1), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i)
          y[i] = fn(x[i]);
      });
      return Status::success();
    }
  };
  if constexpr (domain == Domain::FloatOnly)
    return dispatchFloatType(call, "input", input.dtype, body);
  else
    return dispatchType(call, "input", input.dtype, body);
}

} // namespace

Status runNeg(const KernelCall &call) {
  return unary<Domain::Numeric>(call, NegFn{});
}

Status runAbs(const KernelCall &call) {
  return unary<Domain::Numeric>(call, AbsFn{});
}

Status runRelu(const KernelCall &call) {
  return unary<Domain::Numeric>(call, ReluFn{});
}

Status runSqrt(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, SqrtFn{});
}

Status runReciprocal(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ReciprocalFn{});
}

Status runExp(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ExpFn{});
}

Status runLog(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, LogFn{});
}

Status runErf(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ErfFn{});
}

Status runTanh(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, TanhFn{});
}

Status runCos(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, CosFn{});
}

Status runSin(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, SinFn{});
}

namespace {

/// sigmoid and SiLU: f32 tensors through VectorMath's loops (f32
/// arithmetic, sixteen lanes at a time), bf16 ones widened to f32 in
/// blocks, through the same loops and rounded once (so a bf16 result is
/// the f32 result rounded, as for every other unary op), f64 ones through
/// the functor.
template <typename Fn>
Status logistic(const KernelCall &call, Fn fn,
                void (*f32Loop)(const float *, int64_t, float *)) {
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (input.dtype != ElementType::F32 && input.dtype != ElementType::BF16)
    return unary<Domain::FloatOnly>(call, fn);
  if (Status status = checkUnary(call, Domain::FloatOnly); !status.ok())
    return status;
  if (input.dtype == ElementType::F32) {
    const float *x = input.as<float>();
    float *y = result.as<float>();
    parallelFor(input.numElements(), grainFor(1),
                [&](int64_t begin, int64_t end) {
                  f32Loop(x + begin, end - begin, y + begin);
                });
    return Status::success();
  }
  const uint16_t *x = input.as<uint16_t>();
  uint16_t *y = result.as<uint16_t>();
  parallelFor(input.numElements(), grainFor(1),
              [&](int64_t begin, int64_t end) {
                constexpr int64_t kBlock = 256;
                float wide[kBlock];
                for (int64_t i = begin; i < end; i += kBlock) {
                  int64_t n = std::min(kBlock, end - i);
                  widenBf16(x + i, n, wide);
                  f32Loop(wide, n, wide);
                  narrowBf16(wide, n, y + i);
                }
              });
  return Status::success();
}

} // namespace

Status runSigmoid(const KernelCall &call) {
  return logistic(call, SigmoidFn{}, sigmoidF32);
}

Status runSilu(const KernelCall &call) {
  return logistic(call, SiluFn{}, siluF32);
}

Status runGelu(const KernelCall &call) {
  bool tanhForm;
  if (Status status = readGeluApproximation(call, tanhForm); !status.ok())
    return status;
  if (!tanhForm)
    return unary<Domain::FloatOnly>(call, GeluErfFn{});
  return unary<Domain::FloatOnly>(call, GeluTanhFn{});
}

//===----------------------------------------------------------------------===//
// Binary, compare, where
//===----------------------------------------------------------------------===//

namespace {

/// out = fn(a, b) over the result shape; `a`, `b` read with broadcast
/// strides. Inner runs are specialised for the contiguous and the
/// scalar-broadcast cases so that they vectorise.
template <typename In, typename Out, typename Fn>
void broadcastBinary(const In *a, const std::vector<int64_t> &aStrides,
                     const In *b, const std::vector<int64_t> &bStrides,
                     const std::vector<int64_t> &shape, Out *out, Fn fn) {
  parallelForEachRun<2>(shape, {aStrides, bStrides}, {0, 0},
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

} // namespace

namespace {

/// An arithmetic binary op: `fn(a, b)` for every numeric type (bool is
/// refused). `check(tag)` may refuse the operands before any work.
template <typename Fn, typename Check>
Status arithmetic(const KernelCall &call, Fn fn, Check check) {
  std::vector<int64_t> lhsStrides, rhsStrides;
  if (Status status = checkArithmetic(call, lhsStrides, rhsStrides);
      !status.ok())
    return status;
  const TensorRef &lhs = call.operands[0], &rhs = call.operands[1],
                  &result = call.results[0];
  if (lhs.dtype == ElementType::BF16) {
    broadcastBinary(lhs.as<uint16_t>(), lhsStrides, rhs.as<uint16_t>(),
                    rhsStrides, result.shape, result.as<uint16_t>(),
                    InBf16<Fn>{fn});
    return Status::success();
  }
  return dispatchType(call, "lhs", lhs.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if (Status status = check(tag); !status.ok())
      return status;
    broadcastBinary(lhs.as<T>(), lhsStrides, rhs.as<T>(), rhsStrides,
                    result.shape, result.as<T>(), fn);
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
                    result.shape, result.as<uint8_t>(), fn);
    return Status::success();
  });
}

} // namespace

Status runAdd(const KernelCall &call) { return arithmetic(call, AddFn{}); }

Status runSub(const KernelCall &call) { return arithmetic(call, SubFn{}); }

Status runMul(const KernelCall &call) { return arithmetic(call, MulFn{}); }

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
  return arithmetic(call, DivFn{}, noZeroDivisor);
}

Status runPow(const KernelCall &call) { return arithmetic(call, PowFn{}); }

Status runMax(const KernelCall &call) { return arithmetic(call, MaxFn{}); }

Status runMin(const KernelCall &call) { return arithmetic(call, MinFn{}); }

Status runEqual(const KernelCall &call) { return compare(call, EqualFn{}); }

Status runLess(const KernelCall &call) { return compare(call, LessFn{}); }

Status runGreater(const KernelCall &call) { return compare(call, GreaterFn{}); }

Status runWhere(const KernelCall &call) {
  std::array<std::vector<int64_t>, 3> strides;
  if (Status status = checkWhere(call, strides); !status.ok())
    return status;
  const TensorRef &condition = call.operands[0], &onTrue = call.operands[1],
                  &onFalse = call.operands[2], &result = call.results[0];
  // A select moves elements: only their width matters.
  return dispatchBySize(call, "on_true", onTrue.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const uint8_t *c = condition.as<uint8_t>();
    const T *a = onTrue.as<T>();
    const T *b = onFalse.as<T>();
    T *out = result.as<T>();
    parallelForEachRun<3>(
        result.shape, strides, {0, 0, 0},
        [&](int64_t o, const std::array<int64_t, 3> &in,
            const std::array<int64_t, 3> &step, int64_t count) {
          for (int64_t j = 0; j < count; ++j)
            out[o + j] = c[in[0] + j * step[0]] ? a[in[1] + j * step[1]]
                                                : b[in[2] + j * step[2]];
        });
    return Status::success();
  });
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

Status runCast(const KernelCall &call) {
  if (Status status = checkCast(call); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  bool toBool = result.dtype == ElementType::Bool;
  int64_t count = input.numElements();
  if (Status status = Status::success(); isBf16Cast(call, status)) {
    if (!status.ok())
      return status;
    parallelFor(count, grainFor(1), [&](int64_t begin, int64_t end) {
      if (input.dtype == ElementType::BF16)
        widenBf16(input.as<uint16_t>() + begin, end - begin,
                  result.as<float>() + begin);
      else
        narrowBf16(input.as<float>() + begin, end - begin,
                   result.as<uint16_t>() + begin);
    });
    return Status::success();
  }
  return dispatchType(call, "input", input.dtype, [&](auto fromTag) -> Status {
    using From = typename decltype(fromTag)::type;
    return dispatchType(
        call, "result", result.dtype, [&](auto toTag) -> Status {
          using To = typename decltype(toTag)::type;
          const From *x = input.as<From>();
          To *y = result.as<To>();
          parallelFor(count, grainFor(1), [&](int64_t begin, int64_t end) {
            for (int64_t i = begin; i < end; ++i)
              y[i] = convert<To>(x[i], toBool);
          });
          return Status::success();
        });
  });
}

} // namespace zplan::cpu::detail
