//===- Elementwise.cu - unary, binary, compare, where and cast on CUDA ----===//
//
// The CUDA twin of runtime/cpu/Elementwise.cpp. The checks and the function
// of one element are the ops layer's (runtime/ops/ElementwiseOps.h), the
// CPU's too, so only the walk is new: one thread per output element
// (Strided.cuh), operands read with the broadcast strides the checks
// return, merged as the CPU merges them.
// Same-shape operands take the walk's contiguous path (no index
// arithmetic beyond i), and a broadcast one costs one division per merged
// dimension. The one data check, integer division by zero, cannot happen
// before the writes as on the CPU: the element is skipped and reported
// (KernelError::DivisionByZero), and the run fails at synchronize.
// bf16 operands of the unary and arithmetic ops run the f32 function and
// round once, as on the CPU (ops::InBf16).
//
//===----------------------------------------------------------------------===//

#include "runtime/cuda/Strided.cuh"
#include "runtime/ops/ElementwiseOps.h"
#include "runtime/support/Bfloat16.h"

namespace zplan::cuda {

using ops::Domain;

namespace {

template <typename T, typename Fn> struct UnaryBody {
  const T *input;
  T *output;
  Fn fn;
  template <typename Index>
  __device__ void operator()(Index i, const Index (&)[1]) const {
    output[i] = fn(input[i]);
  }
};

template <Domain domain, typename Fn>
Status unary(const KernelCall &call, Fn fn) {
  if (Status status = ops::checkUnary(call.host, domain); !status.ok())
    return status;
  const TensorRef &input = call.host.operands[0],
                  &result = call.host.results[0];
  auto layout = contiguousLayout<1>(input.numElements());
  if (input.dtype == ElementType::BF16)
    return launchStrided(
        call, layout,
        UnaryBody<uint16_t, ops::InBf16<Fn>>{
            input.as<uint16_t>(), result.as<uint16_t>(), ops::InBf16<Fn>{fn}});
  auto body = [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    if constexpr (domain == Domain::FloatOnly && !std::is_floating_point_v<T>)
      return Status::success(); // unreachable: dispatchFloatType
    else
      return launchStrided(call, layout,
                           UnaryBody<T, Fn>{input.as<T>(), result.as<T>(), fn});
  };
  if constexpr (domain == Domain::FloatOnly)
    return ops::dispatchFloatType(call.host, "input", input.dtype, body);
  else
    return ops::dispatchType(call.host, "input", input.dtype, body);
}

} // namespace

Status runNeg(const KernelCall &call) {
  return unary<Domain::Numeric>(call, ops::NegFn{});
}

Status runAbs(const KernelCall &call) {
  return unary<Domain::Numeric>(call, ops::AbsFn{});
}

Status runRelu(const KernelCall &call) {
  return unary<Domain::Numeric>(call, ops::ReluFn{});
}

Status runSqrt(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ops::SqrtFn{});
}

Status runReciprocal(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ops::ReciprocalFn{});
}

Status runExp(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ops::ExpFn{});
}

Status runLog(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ops::LogFn{});
}

Status runErf(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ops::ErfFn{});
}

Status runTanh(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ops::TanhFn{});
}

Status runCos(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ops::CosFn{});
}

Status runSin(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ops::SinFn{});
}

Status runSigmoid(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ops::SigmoidFn{});
}

Status runSilu(const KernelCall &call) {
  return unary<Domain::FloatOnly>(call, ops::SiluFn{});
}

Status runGelu(const KernelCall &call) {
  bool tanhForm;
  if (Status status = ops::readGeluApproximation(call.host, tanhForm);
      !status.ok())
    return status;
  if (!tanhForm)
    return unary<Domain::FloatOnly>(call, ops::GeluErfFn{});
  return unary<Domain::FloatOnly>(call, ops::GeluTanhFn{});
}

//===----------------------------------------------------------------------===//
// Binary, compare, where
//===----------------------------------------------------------------------===//

namespace {

template <typename In, typename Out, typename Fn> struct BinaryBody {
  const In *lhs, *rhs;
  Out *output;
  Fn fn;
  template <typename Index>
  __device__ void operator()(Index i, const Index (&at)[2]) const {
    output[i] = fn(lhs[at[0]], rhs[at[1]]);
  }
};

/// Integer division: a zero divisor is reported and its element skipped.
template <typename T> struct IntegerDivBody {
  const T *lhs, *rhs;
  T *output;
  uint32_t *errorWord;
  uint32_t errorTag;
  template <typename Index>
  __device__ void operator()(Index i, const Index (&at)[2]) const {
    T divisor = rhs[at[1]];
    if (divisor == 0) {
      reportKernelError(errorWord, errorTag, KernelError::DivisionByZero);
      return;
    }
    output[i] = ops::DivFn{}(lhs[at[0]], divisor);
  }
};

/// A binary op whose operands passed its check, which gave their broadcast
/// strides: walks the result reading lhs and rhs at those strides, with
/// `makeBody(tag, lhs, rhs, result)` the body for lhs's element type.
template <typename MakeBody>
Status binary(const KernelCall &call, const std::vector<int64_t> &lhsStrides,
              const std::vector<int64_t> &rhsStrides, MakeBody makeBody) {
  const TensorRef &lhs = call.host.operands[0], &rhs = call.host.operands[1],
                  &result = call.host.results[0];
  StridedLayout<2> layout;
  if (Status status = makeStridedLayout<2>(
          call, result.shape, {lhsStrides, rhsStrides}, {0, 0}, layout);
      !status.ok())
    return status;
  return ops::dispatchType(
      call.host, "lhs", lhs.dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        return launchStrided(call, layout,
                             makeBody(tag, lhs.as<T>(), rhs.as<T>(), result));
      });
}

/// An arithmetic op whose float element function is `Fn`:
/// `makeBody(tag, lhs, rhs, output)` is its body for the element type of
/// `tag` (the result's too); bf16 operands run `Fn` in f32 (ops::InBf16).
template <typename Fn, typename MakeBody>
Status arithmetic(const KernelCall &call, MakeBody makeBody) {
  std::vector<int64_t> lhsStrides, rhsStrides;
  if (Status status = ops::checkArithmetic(call.host, lhsStrides, rhsStrides);
      !status.ok())
    return status;
  const TensorRef &lhs = call.host.operands[0], &rhs = call.host.operands[1],
                  &result = call.host.results[0];
  if (lhs.dtype == ElementType::BF16) {
    StridedLayout<2> layout;
    if (Status status = makeStridedLayout<2>(
            call, result.shape, {lhsStrides, rhsStrides}, {0, 0}, layout);
        !status.ok())
      return status;
    using Body = BinaryBody<uint16_t, uint16_t, ops::InBf16<Fn>>;
    return launchStrided(call, layout,
                         Body{lhs.as<uint16_t>(), rhs.as<uint16_t>(),
                              result.as<uint16_t>(), ops::InBf16<Fn>{Fn{}}});
  }
  return binary(call, lhsStrides, rhsStrides,
                [&](auto tag, auto lhs, auto rhs, const TensorRef &result) {
                  using T = typename decltype(tag)::type;
                  return makeBody(tag, lhs, rhs, result.as<T>());
                });
}

/// An arithmetic op whose element function is `Fn` for every type.
template <typename Fn> Status arithmetic(const KernelCall &call) {
  return arithmetic<Fn>(call, [](auto tag, auto lhs, auto rhs, auto output) {
    using T = typename decltype(tag)::type;
    return BinaryBody<T, T, Fn>{lhs, rhs, output, Fn{}};
  });
}

/// A comparison: bool result (0 or 1), operands of any type (bool too).
template <typename Fn> Status compare(const KernelCall &call) {
  std::vector<int64_t> lhsStrides, rhsStrides;
  if (Status status = ops::checkBinary(call.host, ElementType::Bool, lhsStrides,
                                       rhsStrides);
      !status.ok())
    return status;
  return binary(call, lhsStrides, rhsStrides,
                [](auto tag, auto lhs, auto rhs, const TensorRef &result) {
                  using T = typename decltype(tag)::type;
                  return BinaryBody<T, uint8_t, Fn>{lhs, rhs,
                                                    result.as<uint8_t>(), Fn{}};
                });
}

} // namespace

Status runAdd(const KernelCall &call) { return arithmetic<ops::AddFn>(call); }

Status runSub(const KernelCall &call) { return arithmetic<ops::SubFn>(call); }

Status runMul(const KernelCall &call) { return arithmetic<ops::MulFn>(call); }

Status runDiv(const KernelCall &call) {
  // Two body types, one per kind of T: a generic lambda returning either
  // is fine, each instantiation returns one.
  return arithmetic<ops::DivFn>(
      call, [&](auto tag, auto lhs, auto rhs, auto output) {
        using T = typename decltype(tag)::type;
        if constexpr (std::is_integral_v<T>)
          return IntegerDivBody<T>{lhs, rhs, output, call.device.errorWord,
                                   call.errorTag()};
        else
          return BinaryBody<T, T, ops::DivFn>{lhs, rhs, output, ops::DivFn{}};
      });
}

Status runPow(const KernelCall &call) { return arithmetic<ops::PowFn>(call); }

Status runMax(const KernelCall &call) { return arithmetic<ops::MaxFn>(call); }

Status runMin(const KernelCall &call) { return arithmetic<ops::MinFn>(call); }

Status runEqual(const KernelCall &call) { return compare<ops::EqualFn>(call); }

Status runLess(const KernelCall &call) { return compare<ops::LessFn>(call); }

Status runGreater(const KernelCall &call) {
  return compare<ops::GreaterFn>(call);
}

namespace {

template <typename T> struct WhereBody {
  const uint8_t *condition;
  const T *onTrue, *onFalse;
  T *output;
  template <typename Index>
  __device__ void operator()(Index i, const Index (&at)[3]) const {
    output[i] = condition[at[0]] ? onTrue[at[1]] : onFalse[at[2]];
  }
};

} // namespace

Status runWhere(const KernelCall &call) {
  std::array<std::vector<int64_t>, 3> strides;
  if (Status status = ops::checkWhere(call.host, strides); !status.ok())
    return status;
  const TensorRef &condition = call.host.operands[0],
                  &onTrue = call.host.operands[1],
                  &onFalse = call.host.operands[2],
                  &result = call.host.results[0];
  StridedLayout<3> layout;
  if (Status status =
          makeStridedLayout<3>(call, result.shape, strides, {0, 0, 0}, layout);
      !status.ok())
    return status;
  // A select moves elements: only their width matters.
  return ops::dispatchBySize(
      call.host, "on_true", onTrue.dtype, [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        return launchStrided(call, layout,
                             WhereBody<T>{condition.as<uint8_t>(),
                                          onTrue.as<T>(), onFalse.as<T>(),
                                          result.as<T>()});
      });
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

namespace {

template <typename From, typename To> struct CastBody {
  const From *input;
  To *output;
  bool toBool;
  template <typename Index>
  __device__ void operator()(Index i, const Index (&)[1]) const {
    output[i] = ops::convert<To>(input[i], toBool);
  }
};

struct Bf16ToF32Body {
  const uint16_t *input;
  float *output;
  template <typename Index>
  __device__ void operator()(Index i, const Index (&)[1]) const {
    output[i] = bf16ToFloat(input[i]);
  }
};

struct F32ToBf16Body {
  const float *input;
  uint16_t *output;
  template <typename Index>
  __device__ void operator()(Index i, const Index (&)[1]) const {
    output[i] = floatToBf16(input[i]);
  }
};

} // namespace

Status runCast(const KernelCall &call) {
  if (Status status = ops::checkCast(call.host); !status.ok())
    return status;
  const TensorRef &input = call.host.operands[0],
                  &result = call.host.results[0];
  bool toBool = result.dtype == ElementType::Bool;
  auto layout = contiguousLayout<1>(input.numElements());
  if (Status status = Status::success(); ops::isBf16Cast(call.host, status)) {
    if (!status.ok())
      return status;
    if (input.dtype == ElementType::BF16)
      return launchStrided(
          call, layout,
          Bf16ToF32Body{input.as<uint16_t>(), result.as<float>()});
    return launchStrided(
        call, layout, F32ToBf16Body{input.as<float>(), result.as<uint16_t>()});
  }
  return ops::dispatchType(
      call.host, "input", input.dtype, [&](auto fromTag) -> Status {
        using From = typename decltype(fromTag)::type;
        return ops::dispatchType(
            call.host, "result", result.dtype, [&](auto toTag) -> Status {
              using To = typename decltype(toTag)::type;
              return launchStrided(call, layout,
                                   CastBody<From, To>{input.as<From>(),
                                                      result.as<To>(), toBool});
            });
      });
}

} // namespace zplan::cuda
