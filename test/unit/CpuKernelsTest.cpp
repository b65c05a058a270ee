//===- CpuKernelsTest.cpp - the CPU reference kernels against naive loops -===//
//
// Every kernel family of runtime/cpu is run through runKernel, the way the
// executor calls it (an Instruction with the emitter's attributes, tensors
// in caller memory), and compared with a reference written here as plain
// loops in double: matmul against a triple loop, attention against an
// explicit q k^T / softmax / v, the norms and softmax against their
// formulas, broadcasting against index arithmetic. The error paths the
// runtime relies on (ids out of range, an ambiguous layer_norm) are checked
// by their messages.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Gemm.h"
#include "runtime/cpu/KernelSupport.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/support/Bfloat16.h"

#include "test/unit/KernelTestSupport.h"
#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace zplan;
using namespace zplan::cpu;

using namespace zplan::testing;

namespace {

//===----------------------------------------------------------------------===//
// Tensors and comparisons (the rest is in KernelTestSupport.h)
//===----------------------------------------------------------------------===//

Tensor makeBool(std::vector<int64_t> shape,
                const std::vector<uint8_t> &values) {
  return make<uint8_t>(std::move(shape), values, ElementType::Bool);
}

std::mt19937 &rng() {
  static std::mt19937 generator(1234);
  return generator;
}

/// Every element within rtol * |expected| + atol.
template <typename T>
void expectClose(const std::vector<T> &actual,
                 const std::vector<double> &expected, double rtol = 1e-5,
                 double atol = 1e-6) {
  ASSERT_EQ(actual.size(), expected.size());
  int failures = 0;
  for (size_t i = 0; i < actual.size() && failures < 5; ++i) {
    double error = std::abs(static_cast<double>(actual[i]) - expected[i]);
    if (!(error <= rtol * std::abs(expected[i]) + atol)) {
      ADD_FAILURE() << "element " << i << ": got " << actual[i] << ", expected "
                    << expected[i];
      ++failures;
    }
  }
}

//===----------------------------------------------------------------------===//
// Index arithmetic for the references
//===----------------------------------------------------------------------===//

std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

/// The flat element of a tensor of `shape` that broadcasts to `index` (of
/// a larger-or-equal rank).
int64_t broadcastFlat(const std::vector<int64_t> &index,
                      const std::vector<int64_t> &shape) {
  size_t lead = index.size() - shape.size();
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + (shape[d] == 1 ? 0 : index[lead + d]);
  return flat;
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

TEST(CpuKernels, EveryNnComputeOpHasAKernel) {
  // Every op of dialects/nn/NNOps.td that can appear in a plan's compute
  // queue (nn.parameter and nn.constant never do).
  for (const char *op : {"neg",
                         "abs",
                         "sqrt",
                         "reciprocal",
                         "exp",
                         "log",
                         "erf",
                         "tanh",
                         "sigmoid",
                         "relu",
                         "cos",
                         "sin",
                         "silu",
                         "gelu",
                         "add",
                         "sub",
                         "mul",
                         "div",
                         "pow",
                         "max",
                         "min",
                         "equal",
                         "less",
                         "greater",
                         "where",
                         "cast",
                         "matmul",
                         "transpose",
                         "reshape",
                         "expand",
                         "slice",
                         "concat",
                         "gather",
                         "embedding",
                         "reduce_mean",
                         "reduce_sum",
                         "reduce_max",
                         "softmax",
                         "layer_norm",
                         "rms_norm",
                         "attention",
                         "cache_append",
                         "cached_attention"}) {
    std::optional<plan::Opcode> opcode = plan::opcodeFromName(op);
    ASSERT_TRUE(opcode.has_value()) << op;
    EXPECT_TRUE(hasKernel(*opcode)) << op;
  }
  // Every opcode of the table's Kernel kind has a kernel, and no other has.
  for (const plan::OpcodeInfo *info = plan::opcodesBegin();
       info != plan::opcodesEnd(); ++info)
    EXPECT_EQ(hasKernel(info->opcode), info->kind == plan::OpcodeKind::Kernel)
        << info->name;
  EXPECT_FALSE(hasKernel(plan::OPCODE_UNSPECIFIED));
  EXPECT_FALSE(hasKernel(static_cast<plan::Opcode>(999)));
}

TEST(CpuKernels, OpcodeWithoutKernelIsAnError) {
  Tensor x = randomFloats(rng(), {2});
  Tensor y({2}, ElementType::F32);
  EXPECT_TRUE(contains(runError(Op(plan::OPCODE_ALL_GATHER), {&x}, y),
                       "all_gather: no CPU kernel"));
  EXPECT_TRUE(contains(runError(Op(static_cast<plan::Opcode>(999)), {&x}, y),
                       "opcode 999: no CPU kernel"));
}

TEST(CpuKernels, WrongOperandCountIsAnError) {
  Tensor x = randomFloats(rng(), {2});
  Tensor y({2}, ElementType::F32);
  EXPECT_TRUE(
      contains(runError(Op("add"), {&x}, y), "add: takes 2 operands, got 1"));
}

TEST(CpuKernels, NumElementsAndBlasThreads) {
  EXPECT_EQ((TensorRef{nullptr, {2, 3, 4}, ElementType::F32}.numElements()),
            24);
  EXPECT_EQ((TensorRef{nullptr, {}, ElementType::F32}.numElements()), 1);
  EXPECT_EQ((TensorRef{nullptr, {5, 0}, ElementType::F32}.numElements()), 0);
  setKernelThreads(1); // must not disturb the kernels below
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

struct UnaryCase {
  const char *op;
  double (*reference)(double);
  double low, high;
};

TEST(CpuKernels, UnaryFloatOpsMatchTheirFormulas) {
  const UnaryCase cases[] = {
      {"neg", [](double x) { return -x; }, -5, 5},
      {"abs", [](double x) { return std::abs(x); }, -5, 5},
      {"sqrt", [](double x) { return std::sqrt(x); }, 0, 100},
      {"reciprocal", [](double x) { return 1 / x; }, 0.1, 10},
      {"exp", [](double x) { return std::exp(x); }, -20, 20},
      {"log", [](double x) { return std::log(x); }, 1e-3, 1e3},
      {"erf", [](double x) { return std::erf(x); }, -4, 4},
      {"tanh", [](double x) { return std::tanh(x); }, -6, 6},
      {"sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }, -30, 30},
      {"relu", [](double x) { return x > 0 ? x : 0; }, -5, 5},
      {"cos", [](double x) { return std::cos(x); }, -6, 6},
      {"sin", [](double x) { return std::sin(x); }, -6, 6},
      {"silu", [](double x) { return x / (1 + std::exp(-x)); }, -30, 30},
  };
  for (const UnaryCase &unary : cases) {
    SCOPED_TRACE(unary.op);
    Tensor x = randomFloats(rng(), {3, 257}, unary.low, unary.high);
    Tensor y({3, 257}, ElementType::F32);
    runOk(Op(unary.op), {&x}, y);
    std::vector<double> expected;
    for (float value : x.values<float>())
      expected.push_back(unary.reference(value));
    // Transcendental f32 functions: a few ulp, absolute near zero crossings.
    expectClose(y.values<float>(), expected, 1e-6, 1e-6);
  }
}

TEST(CpuKernels, UnaryWorksInPlaceAndInF64) {
  Tensor x = make<double>({3}, {0.5, -1.5, 2.0});
  runOk(Op("exp"), {&x}, x);
  expectClose(x.values<double>(),
              {std::exp(0.5), std::exp(-1.5), std::exp(2.0)}, 1e-15, 0);
}

TEST(CpuKernels, GeluExactAndTanh) {
  Tensor x = randomFloats(rng(), {1000}, -8, 8);
  Tensor exact({1000}, ElementType::F32), tanhForm({1000}, ElementType::F32),
      defaulted({1000}, ElementType::F32);
  runOk(Op("gelu").text("approximate", "none"), {&x}, exact);
  runOk(Op("gelu").text("approximate", "tanh"), {&x}, tanhForm);
  runOk(Op("gelu"), {&x}, defaulted); // the attribute defaults to "none"
  std::vector<double> expectedExact, expectedTanh;
  for (double v : x.values<float>()) {
    expectedExact.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    expectedTanh.push_back(
        0.5 * v *
        (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  expectClose(exact.values<float>(), expectedExact, 1e-6, 1e-7);
  expectClose(defaulted.values<float>(), expectedExact, 1e-6, 1e-7);
  expectClose(tanhForm.values<float>(), expectedTanh, 1e-6, 1e-7);
  Tensor y({1000}, ElementType::F32);
  EXPECT_TRUE(
      contains(runError(Op("gelu").text("approximate", "fast"), {&x}, y),
               "gelu: approximate is \"fast\""));
}

TEST(CpuKernels, IntegerUnaryOps) {
  Tensor x =
      make<int64_t>({4}, {-3, 0, 5, std::numeric_limits<int64_t>::min()});
  Tensor y({4}, ElementType::I64);
  runOk(Op("neg"), {&x}, y);
  EXPECT_EQ(
      y.values<int64_t>(),
      (std::vector<int64_t>{3, 0, -5, std::numeric_limits<int64_t>::min()}));
  runOk(Op("abs"), {&x}, y);
  EXPECT_EQ(y.values<int64_t>()[0], 3);
  runOk(Op("relu"), {&x}, y);
  EXPECT_EQ(y.values<int64_t>(), (std::vector<int64_t>{0, 0, 5, 0}));
  EXPECT_TRUE(
      contains(runError(Op("sqrt"), {&x}, y),
               "sqrt: input has element type i64, expected f32 or f64"));
}

//===----------------------------------------------------------------------===//
// Binary, compare, where, cast
//===----------------------------------------------------------------------===//

/// Reference for a broadcasting binary op in double.
std::vector<double> binaryReference(Tensor &a, Tensor &b,
                                    const std::vector<int64_t> &shape,
                                    double (*fn)(double, double)) {
  std::vector<double> out;
  for (int64_t i = 0; i < count(shape); ++i) {
    std::vector<int64_t> index = unravel(i, shape);
    out.push_back(fn(a.data<float>()[broadcastFlat(index, a.shape)],
                     b.data<float>()[broadcastFlat(index, b.shape)]));
  }
  return out;
}

TEST(CpuKernels, BinaryOpsBroadcastLikeNumpy) {
  struct Case {
    const char *op;
    double (*fn)(double, double);
  } ops[] = {
      {"add", [](double a, double b) { return a + b; }},
      {"sub", [](double a, double b) { return a - b; }},
      {"mul", [](double a, double b) { return a * b; }},
      {"div", [](double a, double b) { return a / b; }},
      {"pow", [](double a, double b) { return std::pow(a, b); }},
      {"max", [](double a, double b) { return std::max(a, b); }},
      {"min", [](double a, double b) { return std::min(a, b); }},
  };
  struct Shapes {
    std::vector<int64_t> a, b, result;
  } shapes[] = {
      {{2, 3, 4}, {2, 3, 4}, {2, 3, 4}}, // same shape
      {{2, 3, 4}, {4}, {2, 3, 4}},       // bias-like row
      {{2, 1, 4}, {3, 1}, {2, 3, 4}},    // both broadcast
      {{}, {2, 5}, {2, 5}},              // scalar lhs
      {{5, 1, 7}, {1, 6, 1}, {5, 6, 7}}, // outer product-like
  };
  for (const Case &binary : ops) {
    for (const Shapes &shape : shapes) {
      SCOPED_TRACE(std::string(binary.op) + " lhs rank " +
                   std::to_string(shape.a.size()) + " rhs rank " +
                   std::to_string(shape.b.size()));
      // pow: positive bases keep the reference real.
      Tensor a = randomFloats(rng(), shape.a, 0.5, 2);
      Tensor b = randomFloats(rng(), shape.b, 0.5, 2);
      Tensor y(shape.result, ElementType::F32);
      runOk(Op(binary.op), {&a, &b}, y);
      expectClose(y.values<float>(),
                  binaryReference(a, b, shape.result, binary.fn));
    }
  }
}

TEST(CpuKernels, BinaryOpInPlace) {
  Tensor a = make<float>({2, 2}, {1, 2, 3, 4});
  Tensor b = make<float>({2}, {10, 20});
  runOk(Op("add"), {&a, &b}, a);
  EXPECT_EQ(a.values<float>(), (std::vector<float>{11, 22, 13, 24}));
}

TEST(CpuKernels, BinaryShapeMismatchIsAnError) {
  Tensor a = randomFloats(rng(), {2, 3});
  Tensor b = randomFloats(rng(), {4});
  Tensor y({2, 3}, ElementType::F32);
  EXPECT_TRUE(contains(runError(Op("mul"), {&a, &b}, y),
                       "mul: rhs of shape [4] does not broadcast to the result "
                       "shape [2, 3]"));
}

TEST(CpuKernels, IntegerDivisionTruncatesAndRefusesZero) {
  Tensor a = make<int64_t>({4}, {7, -7, 7, -7});
  Tensor b = make<int64_t>({4}, {2, 2, -2, -2});
  Tensor y({4}, ElementType::I64);
  runOk(Op("div"), {&a, &b}, y);
  EXPECT_EQ(y.values<int64_t>(), (std::vector<int64_t>{3, -3, -3, 3}));
  Tensor zero = make<int64_t>({}, {0});
  EXPECT_TRUE(contains(runError(Op("div"), {&a, &zero}, y),
                       "div: integer division by zero"));
  Tensor base = make<int32_t>({3}, {2, -3, 5});
  Tensor exponent = make<int32_t>({3}, {10, 3, 0});
  Tensor power({3}, ElementType::I32);
  runOk(Op("pow"), {&base, &exponent}, power);
  EXPECT_EQ(power.values<int32_t>(), (std::vector<int32_t>{1024, -27, 1}));
}

TEST(CpuKernels, ComparisonsGiveBool) {
  Tensor a = make<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = make<float>({3}, {2, 2, 7});
  Tensor y({2, 3}, ElementType::Bool);
  runOk(Op("less"), {&a, &b}, y);
  EXPECT_EQ(y.values<uint8_t>(), (std::vector<uint8_t>{1, 0, 1, 0, 0, 1}));
  runOk(Op("greater"), {&a, &b}, y);
  EXPECT_EQ(y.values<uint8_t>(), (std::vector<uint8_t>{0, 0, 0, 1, 1, 0}));
  runOk(Op("equal"), {&a, &b}, y);
  EXPECT_EQ(y.values<uint8_t>(), (std::vector<uint8_t>{0, 1, 0, 0, 0, 0}));
  Tensor ia = make<int64_t>({2}, {3, 4});
  Tensor ib = make<int64_t>({}, {4});
  Tensor iy({2}, ElementType::Bool);
  runOk(Op("equal"), {&ia, &ib}, iy);
  EXPECT_EQ(iy.values<uint8_t>(), (std::vector<uint8_t>{0, 1}));
  Tensor wrong({2, 3}, ElementType::F32);
  EXPECT_TRUE(contains(runError(Op("less"), {&a, &b}, wrong),
                       "less: result has element type f32, expected i1"));
}

TEST(CpuKernels, WhereBroadcastsAllThree) {
  // A causal mask [1, 3, 3] over scores [2, 3, 3], the fill a scalar.
  Tensor condition = makeBool({1, 3, 3}, {1, 0, 0, 1, 1, 0, 1, 1, 1});
  Tensor scores = randomFloats(rng(), {2, 3, 3});
  Tensor fill = make<float>({}, {-1e9f});
  Tensor y({2, 3, 3}, ElementType::F32);
  runOk(Op("where"), {&condition, &scores, &fill}, y);
  for (int64_t i = 0; i < 18; ++i)
    EXPECT_EQ(y.data<float>()[i], condition.data<uint8_t>()[i % 9]
                                      ? scores.data<float>()[i]
                                      : -1e9f)
        << i;
  // Any element type, by width: i64 values.
  Tensor a = make<int64_t>({2}, {1, 2});
  Tensor b = make<int64_t>({2}, {-1, -2});
  Tensor pick = makeBool({2}, {0, 1});
  Tensor z({2}, ElementType::I64);
  runOk(Op("where"), {&pick, &a, &b}, z);
  EXPECT_EQ(z.values<int64_t>(), (std::vector<int64_t>{-1, 2}));
}

TEST(CpuKernels, CastTruncatesAndTestsNonZero) {
  Tensor x = make<float>({6}, {-2.7f, 2.7f, -0.5f, 0.0f, 1e10f,
                               std::numeric_limits<float>::quiet_NaN()});
  Tensor asInt({6}, ElementType::I32);
  runOk(Op("cast"), {&x}, asInt);
  EXPECT_EQ(asInt.values<int32_t>(),
            (std::vector<int32_t>{-2, 2, 0, 0,
                                  std::numeric_limits<int32_t>::max(), 0}));
  Tensor asBool({6}, ElementType::Bool);
  runOk(Op("cast"), {&x}, asBool);
  EXPECT_EQ(asBool.values<uint8_t>(), (std::vector<uint8_t>{1, 1, 1, 0, 1, 1}));
  Tensor asI64({6}, ElementType::I64);
  runOk(Op("cast"), {&x}, asI64);
  EXPECT_EQ(asI64.values<int64_t>()[1], 2);
  EXPECT_EQ(asI64.values<int64_t>()[4], 10000000000);

  Tensor mask = makeBool({3}, {1, 0, 1});
  Tensor maskFloat({3}, ElementType::F32);
  runOk(Op("cast"), {&mask}, maskFloat);
  EXPECT_EQ(maskFloat.values<float>(), (std::vector<float>{1, 0, 1}));

  Tensor wide = make<int64_t>({3}, {1, -1, (int64_t(1) << 32) + 5});
  Tensor narrow({3}, ElementType::I32);
  runOk(Op("cast"), {&wide}, narrow);
  EXPECT_EQ(narrow.values<int32_t>(), (std::vector<int32_t>{1, -1, 5}));
  Tensor asDouble({3}, ElementType::F64);
  runOk(Op("cast"), {&wide}, asDouble);
  EXPECT_EQ(asDouble.values<double>()[2], 4294967301.0);

  Tensor d = make<double>({3}, {-3.9, 3.9, 127.5});
  Tensor bytes({3}, ElementType::I8);
  runOk(Op("cast"), {&d}, bytes);
  EXPECT_EQ(bytes.values<int8_t>(), (std::vector<int8_t>{-3, 3, 127}));
  Tensor unsignedBytes({3}, ElementType::U8);
  runOk(Op("cast"), {&bytes}, unsignedBytes);
  EXPECT_EQ(unsignedBytes.values<uint8_t>(),
            (std::vector<uint8_t>{253, 3, 127}));
}

TEST(CpuKernels, CastRoundsToBf16AndWidensBack) {
  // Mixed precision's casts: to nearest even (1 + 2^-8 is a tie, down to 1;
  // 1 + 3 2^-8 a tie, up to 1 + 2^-6), overflow to infinity; back exactly.
  Tensor x = make<float>({4}, {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -3.0f,
                               std::numeric_limits<float>::max()});
  Tensor half({4}, ElementType::BF16);
  runOk(Op("cast"), {&x}, half);
  EXPECT_EQ(half.values<uint16_t>(),
            (std::vector<uint16_t>{0x3F80, 0x3F82, 0xC040, 0x7F80}));
  Tensor back({4}, ElementType::F32);
  runOk(Op("cast"), {&half}, back);
  EXPECT_EQ(back.values<float>(),
            (std::vector<float>{1.0f, 1.0f + 1.0f / 64, -3.0f,
                                std::numeric_limits<float>::infinity()}));
  Tensor asInt({4}, ElementType::I32);
  EXPECT_TRUE(contains(runError(Op("cast"), {&half}, asInt),
                       "a cast from bf16 to i32: bf16 converts to and from "
                       "f32 only"));
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

/// numpy matmul in double, with transpose_rhs and bias, by index arithmetic.
std::vector<double> matmulReference(Tensor &lhs, Tensor &rhs, Tensor *bias,
                                    bool transposeRhs,
                                    const std::vector<int64_t> &resultShape) {
  std::vector<int64_t> l = lhs.shape, r = rhs.shape;
  bool lhsVector = l.size() == 1, rhsVector = r.size() == 1;
  if (lhsVector)
    l.insert(l.begin(), 1);
  if (rhsVector)
    r.push_back(1);
  if (transposeRhs)
    std::swap(r[r.size() - 1], r[r.size() - 2]);
  int64_t m = l[l.size() - 2], k = l.back(), n = r.back();
  std::vector<int64_t> lhsBatch(l.begin(), l.end() - 2),
      rhsBatch(r.begin(), r.end() - 2);
  // The full (promoted) result shape: batch, m, n.
  size_t batchRank = std::max(lhsBatch.size(), rhsBatch.size());
  std::vector<int64_t> batch(batchRank, 1);
  for (size_t d = 0; d < batchRank; ++d) {
    int64_t a = d + lhsBatch.size() >= batchRank
                    ? lhsBatch[d + lhsBatch.size() - batchRank]
                    : 1;
    int64_t b = d + rhsBatch.size() >= batchRank
                    ? rhsBatch[d + rhsBatch.size() - batchRank]
                    : 1;
    batch[d] = std::max(a, b);
  }
  std::vector<double> out;
  for (int64_t bIndex = 0; bIndex < count(batch); ++bIndex) {
    std::vector<int64_t> bi = unravel(bIndex, batch);
    int64_t lb = broadcastFlat(bi, lhsBatch), rb = broadcastFlat(bi, rhsBatch);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          double a = lhs.data<float>()[lb * m * k + i * k + p];
          double b = transposeRhs ? rhs.data<float>()[rb * n * k + j * k + p]
                                  : rhs.data<float>()[rb * k * n + p * n + j];
          sum += a * b;
        }
        out.push_back(sum);
      }
  }
  if (bias)
    for (size_t i = 0; i < out.size(); ++i)
      out[i] += bias->data<float>()[broadcastFlat(
          unravel(static_cast<int64_t>(i), resultShape), bias->shape)];
  return out;
}

struct MatmulCase {
  std::vector<int64_t> lhs, rhs, bias, result;
  bool transposeRhs;
  bool withBias;
};

TEST(CpuKernels, MatmulMatchesTripleLoop) {
  const MatmulCase cases[] = {
      {{5, 7}, {7, 4}, {}, {5, 4}, false, false},
      {{2, 3, 5, 7}, {7, 4}, {}, {2, 3, 5, 4}, false, false}, // one GEMM
      {{2, 3, 5, 7}, {1, 7, 4}, {}, {2, 3, 5, 4}, false, false},
      {{2, 1, 5, 7}, {1, 3, 7, 4}, {}, {2, 3, 5, 4}, false, false},
      {{5, 7}, {3, 7, 4}, {}, {3, 5, 4}, false, false}, // shared lhs
      {{4, 5, 7}, {4, 6, 7}, {}, {4, 5, 6}, true, false},
      {{2, 5, 7}, {6, 7}, {6}, {2, 5, 6}, true, true}, // Linear layer
      {{2, 5, 7}, {7, 6}, {5, 1}, {2, 5, 6}, false, true},
      {{3, 2, 5, 7}, {2, 7, 6}, {2, 1, 6}, {3, 2, 5, 6}, false, true},
      {{7}, {3, 7, 4}, {}, {3, 4}, false, false}, // rank-1 lhs
      {{3, 5, 7}, {7}, {}, {3, 5}, false, false}, // rank-1 rhs
      {{7}, {7}, {}, {}, false, false},           // dot product
      {{7}, {4, 7}, {4}, {4}, true, true},        // vector through Linear
      // One row against a shared weight (a decoded token): the GEMV path.
      {{1, 1, 7}, {4, 7}, {4}, {1, 1, 4}, true, true},
      {{1, 7}, {7, 4}, {}, {1, 4}, false, false},
      {{1, 1, 7}, {7, 4}, {1, 4}, {1, 1, 4}, false, true},
  };
  for (const MatmulCase &c : cases) {
    SCOPED_TRACE("lhs rank " + std::to_string(c.lhs.size()) + " rhs rank " +
                 std::to_string(c.rhs.size()) + " result elements " +
                 std::to_string(count(c.result)));
    Tensor lhs = randomFloats(rng(), c.lhs), rhs = randomFloats(rng(), c.rhs);
    Tensor bias =
        randomFloats(rng(), c.withBias ? c.bias : std::vector<int64_t>{1});
    Tensor result(c.result, ElementType::F32);
    Op op("matmul");
    if (c.transposeRhs)
      op.ints("transpose_rhs", {1});
    std::vector<Tensor *> operands = {&lhs, &rhs};
    if (c.withBias)
      operands.push_back(&bias);
    runOk(op, operands, result);
    expectClose(result.values<float>(),
                matmulReference(lhs, rhs, c.withBias ? &bias : nullptr,
                                c.transposeRhs, c.result));
  }
}

TEST(CpuKernels, MatmulTransformerSizedLinear) {
  // A GPT-2-like MLP projection: [2, 64, 256] x [1024, 256]^T + [1024].
  Tensor x = randomFloats(rng(), {2, 64, 256}),
         w = randomFloats(rng(), {1024, 256}, -0.1, 0.1),
         b = randomFloats(rng(), {1024});
  Tensor y({2, 64, 1024}, ElementType::F32);
  runOk(Op("matmul").ints("transpose_rhs", {1}), {&x, &w, &b}, y);
  // Relative to each element's magnitude, plus an absolute floor scaled by
  // the typical size of a term sum (fp32 accumulation over K = 256).
  expectClose(y.values<float>(), matmulReference(x, w, &b, true, y.shape), 1e-5,
              1e-5);
}

/// `tensor` (f32) rounded to bf16, as its bits.
Tensor toBf16(Tensor &tensor) {
  std::vector<uint16_t> bits(static_cast<size_t>(tensor.size()));
  for (int64_t i = 0; i < tensor.size(); ++i)
    bits[i] = zplan::floatToBf16(tensor.floats()[i]);
  return make<uint16_t>(tensor.shape, bits, ElementType::BF16);
}

/// `half` (bf16) widened to f32.
Tensor toF32(Tensor &half) {
  std::vector<float> values;
  for (uint16_t bits : half.values<uint16_t>())
    values.push_back(zplan::bf16ToFloat(bits));
  return make<float>(half.shape, values);
}

TEST(CpuKernels, MatmulBf16OperandsAccumulateInF32) {
  // Mixed precision's Linear: bf16 x and w, f32 bias and result. The
  // products of bf16 values are exact in f32, so the result is the f32
  // product of the widened operands, bit for bit (the same SGEMM), and the
  // double product of those values to f32's accumulation error.
  Tensor x32 = randomFloats(rng(), {2, 24, 96}),
         w32 = randomFloats(rng(), {40, 96}, -0.1, 0.1),
         b = randomFloats(rng(), {40});
  Tensor x = toBf16(x32), w = toBf16(w32);
  Tensor xWide = toF32(x), wWide = toF32(w);
  Tensor y({2, 24, 40}, ElementType::F32), expected({2, 24, 40});
  Op linear = Op("matmul").ints("transpose_rhs", {1});
  runOk(linear, {&x, &w, &b}, y);
  runOk(linear, {&xWide, &wWide, &b}, expected);
  EXPECT_EQ(y.values<float>(), expected.values<float>());
  expectClose(y.values<float>(),
              matmulReference(xWide, wWide, &b, true, y.shape), 1e-5, 1e-5);
  // The GEMV path (one decoded token).
  Tensor rowY({1, 40}, ElementType::F32);
  Tensor row32 = randomFloats(rng(), {1, 96});
  Tensor rowHalf = toBf16(row32), rowWide = toF32(rowHalf);
  Tensor rowExpected({1, 40});
  runOk(linear, {&rowHalf, &w}, rowY);
  runOk(linear, {&rowWide, &wWide}, rowExpected);
  EXPECT_EQ(rowY.values<float>(), rowExpected.values<float>());

  // Operands of two types, and a bf16 bias under an f32 result, are errors.
  EXPECT_TRUE(contains(runError(linear, {&x, &w32}, y),
                       "matmul: rhs has element type f32, expected bf16"));
  Tensor halfBias = toBf16(b);
  EXPECT_TRUE(contains(runError(linear, {&x, &w, &halfBias}, y),
                       "matmul: bias has element type bf16, expected f32"));
}

TEST(CpuKernels, MatmulBf16ResultIsTheF32SumRoundedOnce) {
  // A bf16 result (and bias): the f32 product of the widened operands onto
  // the widened bias, rounded to bf16 once, to nearest even.
  Tensor x32 = randomFloats(rng(), {2, 24, 96}),
         w32 = randomFloats(rng(), {40, 96}, -0.1, 0.1),
         b32 = randomFloats(rng(), {40});
  Tensor x = toBf16(x32), w = toBf16(w32), b = toBf16(b32);
  Tensor xWide = toF32(x), wWide = toF32(w), bWide = toF32(b);
  Op linear = Op("matmul").ints("transpose_rhs", {1});
  Tensor y({2, 24, 40}, ElementType::BF16), sums({2, 24, 40});
  runOk(linear, {&x, &w, &b}, y);
  runOk(linear, {&xWide, &wWide, &bWide}, sums);
  std::vector<uint16_t> expected;
  for (float sum : sums.values<float>())
    expected.push_back(zplan::floatToBf16(sum));
  EXPECT_EQ(y.values<uint16_t>(), expected);
  // Without a bias, and the GEMV path.
  Tensor row32 = randomFloats(rng(), {1, 96});
  Tensor row = toBf16(row32);
  Tensor rowWide = toF32(row);
  Tensor rowY({1, 40}, ElementType::BF16), rowSums({1, 40});
  runOk(linear, {&row, &w}, rowY);
  runOk(linear, {&rowWide, &wWide}, rowSums);
  expected.clear();
  for (float sum : rowSums.values<float>())
    expected.push_back(zplan::floatToBf16(sum));
  EXPECT_EQ(rowY.values<uint16_t>(), expected);
  // An f32 bias under a bf16 result is an error.
  EXPECT_TRUE(contains(runError(linear, {&x, &w, &b32}, y),
                       "matmul: bias has element type f32, expected bf16"));
}

TEST(CpuKernels, ElementwiseBf16IsTheF32ResultRoundedOnce) {
  // Mixed precision's elementwise ops on bf16 operands: each operand
  // widened, the f32 kernel's function, the result rounded to nearest even
  // once (torch's bf16 elementwise ops), broadcasting as in f32.
  Tensor gate32 = randomFloats(rng(), {2, 5, 33}, -6, 6),
         up32 = randomFloats(rng(), {2, 5, 33}),
         row32 = randomFloats(rng(), {33});
  Tensor gate = toBf16(gate32), up = toBf16(up32), row = toBf16(row32);
  Tensor gateWide = toF32(gate), upWide = toF32(up), rowWide = toF32(row);
  auto roundedOnce = [](Tensor &wide) {
    std::vector<uint16_t> rounded;
    for (float value : wide.values<float>())
      rounded.push_back(zplan::floatToBf16(value));
    return rounded;
  };
  for (const char *op : {"silu", "gelu", "exp", "neg", "relu"}) {
    Tensor y({2, 5, 33}, ElementType::BF16), wide({2, 5, 33});
    runOk(Op(op), {&gate}, y);
    runOk(Op(op), {&gateWide}, wide);
    EXPECT_EQ(y.values<uint16_t>(), roundedOnce(wide)) << op;
  }
  for (const char *op : {"mul", "add", "sub", "div"}) {
    Tensor y({2, 5, 33}, ElementType::BF16), wide({2, 5, 33});
    runOk(Op(op), {&gate, &up}, y);
    runOk(Op(op), {&gateWide, &upWide}, wide);
    EXPECT_EQ(y.values<uint16_t>(), roundedOnce(wide)) << op;
    runOk(Op(op), {&gate, &row}, y);
    runOk(Op(op), {&gateWide, &rowWide}, wide);
    EXPECT_EQ(y.values<uint16_t>(), roundedOnce(wide)) << op << " broadcast";
  }
  // The product of two bf16 values is exact in f32, so mul rounds it once:
  // 1 + 2^-7 (one bf16 ulp above 1) squared is 1 + 2^-6 + 2^-14, which
  // rounds to 1 + 2^-6.
  Tensor a32 = make<float>({1}, {1.0078125f});
  Tensor a = toBf16(a32);
  Tensor square({1}, ElementType::BF16);
  runOk(Op("mul"), {&a, &a}, square);
  EXPECT_EQ(square.values<uint16_t>(),
            std::vector<uint16_t>{zplan::floatToBf16(1.015625f)});
  // Operands of two types are refused, naming the one that differs.
  Tensor y({2, 5, 33}, ElementType::BF16);
  EXPECT_TRUE(contains(runError(Op("mul"), {&gate, &upWide}, y), "rhs"));
}

TEST(CpuKernels, MatmulF64AndErrors) {
  Tensor a = make<double>({2, 2}, {1, 2, 3, 4});
  Tensor b = make<double>({2, 2}, {5, 6, 7, 8});
  Tensor c({2, 2}, ElementType::F64);
  runOk(Op("matmul"), {&a, &b}, c);
  EXPECT_EQ(c.values<double>(), (std::vector<double>{19, 22, 43, 50}));
  Tensor row = make<double>({1, 2}, {1, 2});
  Tensor rowResult({1, 2}, ElementType::F64);
  runOk(Op("matmul"), {&row, &b}, rowResult); // the GEMV path
  EXPECT_EQ(rowResult.values<double>(), (std::vector<double>{19, 22}));
  runOk(Op("matmul").ints("transpose_rhs", {1}), {&row, &b}, rowResult);
  EXPECT_EQ(rowResult.values<double>(), (std::vector<double>{17, 23}));

  Tensor lhs = randomFloats(rng(), {3, 5}), rhs = randomFloats(rng(), {4, 2});
  Tensor y({3, 2}, ElementType::F32);
  EXPECT_TRUE(contains(runError(Op("matmul"), {&lhs, &rhs}, y),
                       "matmul: contraction dimensions differ: lhs [3, 5] has "
                       "5, rhs [4, 2] has 4"));
  Tensor rhsOk = randomFloats(rng(), {5, 2});
  Tensor wrong({3, 3}, ElementType::F32);
  EXPECT_TRUE(contains(runError(Op("matmul"), {&lhs, &rhsOk}, wrong),
                       "matmul: result has shape [3, 3], expected [3, 2]"));
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

enum class Mask { None, Additive, Select };

/// softmax(mask(q k^T * scale)) v in double, by explicit loops.
std::vector<double> attentionReference(Tensor &q, Tensor &k, Tensor &v,
                                       Tensor *mask, Mask kind, double scale,
                                       double maskedValue) {
  size_t rank = q.shape.size();
  int64_t s = q.shape[rank - 2], d = q.shape[rank - 1], t = k.shape[rank - 2],
          dv = v.shape[rank - 1];
  int64_t batch = q.size() / (s * d);
  std::vector<int64_t> scoresShape(q.shape.begin(), q.shape.end() - 1);
  scoresShape.push_back(t);
  std::vector<double> out;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < s; ++i) {
      std::vector<double> row(t);
      for (int64_t j = 0; j < t; ++j) {
        double dot = 0;
        for (int64_t p = 0; p < d; ++p)
          dot += double(q.data<float>()[(b * s + i) * d + p]) *
                 k.data<float>()[(b * t + j) * d + p];
        row[j] = dot * scale;
        if (kind != Mask::None) {
          int64_t flat = broadcastFlat(
              unravel((b * s + i) * t + j, scoresShape), mask->shape);
          if (kind == Mask::Additive)
            row[j] += mask->data<float>()[flat];
          else if (!mask->data<uint8_t>()[flat])
            row[j] = maskedValue;
        }
      }
      double maximum = -std::numeric_limits<double>::infinity(), sum = 0;
      for (double value : row)
        maximum = std::max(maximum, value);
      for (double &value : row) {
        value = std::exp(value - maximum);
        sum += value;
      }
      for (int64_t c = 0; c < dv; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < t; ++j)
          acc += row[j] / sum * v.data<float>()[(b * t + j) * dv + c];
        out.push_back(acc);
      }
    }
  }
  return out;
}

TEST(CpuKernels, AttentionWithoutMask) {
  Tensor q = randomFloats(rng(), {2, 3, 5, 8}),
         k = randomFloats(rng(), {2, 3, 7, 8}),
         v = randomFloats(rng(), {2, 3, 7, 6});
  Tensor y({2, 3, 5, 6}, ElementType::F32);
  runOk(Op("attention").real("scale", 0.35), {&q, &k, &v}, y);
  expectClose(y.values<float>(),
              attentionReference(q, k, v, nullptr, Mask::None, 0.35, 0));
}

TEST(CpuKernels, AttentionAdditiveMask) {
  // Llama-style: a [1, 1, S, T] float mask with -inf-like entries above the
  // diagonal and small real values elsewhere.
  Tensor q = randomFloats(rng(), {2, 4, 6, 8}),
         k = randomFloats(rng(), {2, 4, 6, 8}),
         v = randomFloats(rng(), {2, 4, 6, 8});
  Tensor mask = randomFloats(rng(), {1, 1, 6, 6}, -0.5, 0.5);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = i + 1; j < 6; ++j)
      mask.data<float>()[i * 6 + j] = -1e9f;
  Tensor y({2, 4, 6, 8}, ElementType::F32);
  runOk(Op("attention")
            .real("scale", 1 / std::sqrt(8.0))
            .text("mask_kind", "additive"),
        {&q, &k, &v, &mask}, y);
  expectClose(y.values<float>(),
              attentionReference(q, k, v, &mask, Mask::Additive,
                                 1 / std::sqrt(8.0), 0));
}

TEST(CpuKernels, AttentionSelectMask) {
  // GPT-2-style: a bool mask per batch entry [2, 1, S, T] (causal plus a
  // padded key), false entries becoming the lowest float.
  Tensor q = randomFloats(rng(), {2, 2, 5, 4}),
         k = randomFloats(rng(), {2, 2, 5, 4}),
         v = randomFloats(rng(), {2, 2, 5, 3});
  std::vector<uint8_t> bits;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 5; ++i)
      for (int64_t j = 0; j < 5; ++j)
        bits.push_back(j <= i && !(b == 1 && j == 0 && i > 0));
  Tensor mask = makeBool({2, 1, 5, 5}, bits);
  double lowest = std::numeric_limits<float>::lowest();
  Tensor y({2, 2, 5, 3}, ElementType::F32);
  runOk(Op("attention")
            .real("scale", 0.5)
            .text("mask_kind", "select")
            .real("masked_value", lowest),
        {&q, &k, &v, &mask}, y);
  expectClose(y.values<float>(),
              attentionReference(q, k, v, &mask, Mask::Select, 0.5, lowest));
}

TEST(CpuKernels, AttentionTransformerSized) {
  // 12 heads, 128 positions, head size 64, causal additive mask.
  Tensor q = randomFloats(rng(), {1, 12, 128, 64}),
         k = randomFloats(rng(), {1, 12, 128, 64}),
         v = randomFloats(rng(), {1, 12, 128, 64});
  Tensor mask({128, 128}, ElementType::F32);
  for (int64_t i = 0; i < 128; ++i)
    for (int64_t j = 0; j < 128; ++j)
      mask.data<float>()[i * 128 + j] =
          j <= i ? 0.0f : -std::numeric_limits<float>::infinity();
  Tensor y({1, 12, 128, 64}, ElementType::F32);
  runOk(Op("attention").real("scale", 0.125), {&q, &k, &v, &mask}, y);
  expectClose(y.values<float>(),
              attentionReference(q, k, v, &mask, Mask::Additive, 0.125, 0),
              1e-5, 1e-6);
}

TEST(CpuKernels, AttentionSkipsWhatTheMaskRulesOut) {
  // A causal mask of the lowest float (transformers' exports) with padded
  // keys in batch entry 1 and a row of entry 0 masked throughout: attention
  // computes no score past each block of rows' last unmasked key, and no
  // exp past each row's (AttentionSupport.h). The same mask with -1e30
  // rules nothing out (every score computed, each masked exp 0 all the
  // same): the results must be the same bits. 40 rows: three blocks of 16,
  // the last partial, on zplan's GEMM where the CPU has it.
  const float lowest = std::numeric_limits<float>::lowest();
  Tensor q = randomFloats(rng(), {2, 3, 40, 16}),
         k = randomFloats(rng(), {2, 3, 40, 16}),
         v = randomFloats(rng(), {2, 3, 40, 8});
  Tensor ruledOut({2, 1, 40, 40}, ElementType::F32);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t i = 0; i < 40; ++i)
      for (int64_t j = 0; j < 40; ++j) {
        bool masked = j > i || (b == 1 && j >= 33) || (b == 0 && i == 21);
        ruledOut.data<float>()[(b * 40 + i) * 40 + j] =
            masked ? lowest : 0.01f * static_cast<float>(j % 7);
      }
  Tensor computed = ruledOut;
  for (int64_t i = 0; i < 2 * 40 * 40; ++i)
    if (computed.data<float>()[i] == lowest)
      computed.data<float>()[i] = -1e30f;
  Tensor skipped({2, 3, 40, 8}, ElementType::F32), whole = skipped;
  Op attention =
      Op("attention").real("scale", 0.25).text("mask_kind", "additive");
  runOk(attention, {&q, &k, &v, &ruledOut}, skipped);
  runOk(attention, {&q, &k, &v, &computed}, whole);
  expectClose(skipped.values<float>(),
              attentionReference(q, k, v, &ruledOut, Mask::Additive, 0.25, 0));
  EXPECT_EQ(std::memcmp(skipped.data<float>(), whole.data<float>(),
                        sizeof(float) * 2 * 3 * 40 * 8),
            0);
  // The row masked throughout is computed whole: the mean of v's rows.
  for (int64_t c = 0; c < 8; ++c) {
    double mean = 0;
    for (int64_t j = 0; j < 40; ++j)
      mean += v.data<float>()[j * 8 + c] / 40.0;
    EXPECT_NEAR(skipped.data<float>()[21 * 8 + c], mean, 1e-6);
  }
  // attention_grad recomputes the same probabilities: its gradients too
  // are the same bits with either mask.
  Tensor dout = randomFloats(rng(), {2, 3, 40, 8});
  Tensor dq({2, 3, 40, 16}, ElementType::F32), dk = dq, dv = skipped;
  Tensor dq2 = dq, dk2 = dk, dv2 = dv;
  Op grad =
      Op("attention_grad").real("scale", 0.25).text("mask_kind", "additive");
  runOk(grad, {&dout, &q, &k, &v, &ruledOut}, {&dq, &dk, &dv});
  runOk(grad, {&dout, &q, &k, &v, &computed}, {&dq2, &dk2, &dv2});
  for (auto [one, two] : {std::pair{&dq, &dq2}, {&dk, &dk2}, {&dv, &dv2}})
    EXPECT_EQ(std::memcmp(one->data<float>(), two->data<float>(),
                          sizeof(float) * one->size()),
              0);
  // Nothing past a block's reach is read (by zplan's GEMM; OpenBLAS's
  // computes every score): NaN keys and values at the padded positions of
  // entry 1 (which no row of it reaches) leave every result as it was.
  // Computing them would make entry 1's rows NaN.
  if (!cpu::detail::useAvx512Gemm())
    return;
  Tensor nanK = k, nanV = v;
  for (int64_t head = 0; head < 3; ++head)
    for (int64_t j = 33; j < 40; ++j) {
      for (int64_t p = 0; p < 16; ++p)
        nanK.data<float>()[((3 + head) * 40 + j) * 16 + p] =
            std::numeric_limits<float>::quiet_NaN();
      for (int64_t p = 0; p < 8; ++p)
        nanV.data<float>()[((3 + head) * 40 + j) * 8 + p] =
            std::numeric_limits<float>::quiet_NaN();
    }
  Tensor unread({2, 3, 40, 8}, ElementType::F32);
  runOk(attention, {&q, &nanK, &nanV, &ruledOut}, unread);
  EXPECT_EQ(std::memcmp(skipped.data<float>(), unread.data<float>(),
                        sizeof(float) * 2 * 3 * 40 * 8),
            0);
}

TEST(CpuKernels, AttentionErrors) {
  Tensor q = randomFloats(rng(), {1, 2, 4}), k = randomFloats(rng(), {1, 3, 4}),
         v = randomFloats(rng(), {1, 3, 4});
  Tensor floatMask = randomFloats(rng(), {2, 3});
  Tensor y({1, 2, 4}, ElementType::F32);
  EXPECT_TRUE(contains(runError(Op("attention")
                                    .real("scale", 1)
                                    .text("mask_kind", "select")
                                    .real("masked_value", -1e9),
                                {&q, &k, &v, &floatMask}, y),
                       "attention: select mask has element type f32, "
                       "expected i1"));
  Tensor badMask = randomFloats(rng(), {3, 3});
  EXPECT_TRUE(contains(
      runError(Op("attention").real("scale", 1), {&q, &k, &v, &badMask}, y),
      "attention: mask of shape [3, 3] does not broadcast to the scores "
      "[1, 2, 3]"));
  EXPECT_TRUE(contains(runError(Op("attention"), {&q, &k, &v}, y),
                       "attention: missing attribute 'scale'"));
}

//===----------------------------------------------------------------------===//
// Normalisation, softmax, reductions
//===----------------------------------------------------------------------===//

std::vector<double> layerNormReference(Tensor &x, int64_t width, Tensor *w,
                                       Tensor *b, double epsilon) {
  std::vector<double> out;
  for (int64_t row = 0; row < x.size() / width; ++row) {
    const float *values = x.data<float>() + row * width;
    double mean = 0, variance = 0;
    for (int64_t i = 0; i < width; ++i)
      mean += values[i];
    mean /= width;
    for (int64_t i = 0; i < width; ++i)
      variance += (values[i] - mean) * (values[i] - mean);
    variance /= width;
    for (int64_t i = 0; i < width; ++i)
      out.push_back((values[i] - mean) / std::sqrt(variance + epsilon) *
                        (w ? w->data<float>()[i] : 1.0) +
                    (b ? b->data<float>()[i] : 0.0));
  }
  return out;
}

TEST(CpuKernels, LayerNormWeightAndBiasBySegments) {
  // axis 1 of [3, 4, 5]: rows of 20 elements; weight and bias [4, 5].
  Tensor x = randomFloats(rng(), {3, 4, 5}, -3, 3);
  Tensor w = randomFloats(rng(), {4, 5}), b = randomFloats(rng(), {4, 5});
  Tensor y({3, 4, 5}, ElementType::F32);
  auto op = [](std::vector<int64_t> segments) {
    return Op("layer_norm")
        .ints("axis", {1})
        .real("epsilon", 1e-5)
        .ints("operandSegmentSizes", std::move(segments));
  };
  runOk(op({1, 1, 1}), {&x, &w, &b}, y);
  expectClose(y.values<float>(), layerNormReference(x, 20, &w, &b, 1e-5));
  runOk(op({1, 1, 0}), {&x, &w}, y);
  expectClose(y.values<float>(), layerNormReference(x, 20, &w, nullptr, 1e-5));
  runOk(op({1, 0, 1}), {&x, &b}, y);
  expectClose(y.values<float>(), layerNormReference(x, 20, nullptr, &b, 1e-5));
  runOk(op({1, 0, 0}), {&x}, y);
  expectClose(y.values<float>(),
              layerNormReference(x, 20, nullptr, nullptr, 1e-5));
  // Without operandSegmentSizes, one and three operands are unambiguous.
  runOk(Op("layer_norm").ints("axis", {1}).real("epsilon", 1e-5), {&x, &w, &b},
        y);
  expectClose(y.values<float>(), layerNormReference(x, 20, &w, &b, 1e-5));
}

TEST(CpuKernels, LayerNormRefusesAmbiguousOperands) {
  Tensor x = randomFloats(rng(), {2, 4}), w = randomFloats(rng(), {4});
  Tensor y({2, 4}, ElementType::F32);
  EXPECT_TRUE(contains(
      runError(Op("layer_norm").ints("axis", {1}).real("epsilon", 1e-5),
               {&x, &w}, y),
      "layer_norm: 2 operands but no operandSegmentSizes"));
  EXPECT_TRUE(contains(runError(Op("layer_norm")
                                    .ints("axis", {1})
                                    .real("epsilon", 1e-5)
                                    .ints("operandSegmentSizes", {1, 1, 1}),
                                {&x, &w}, y),
                       "does not describe 2 operands"));
  Tensor wrongWeight = randomFloats(rng(), {3});
  EXPECT_TRUE(contains(runError(Op("layer_norm")
                                    .ints("axis", {1})
                                    .real("epsilon", 1e-5)
                                    .ints("operandSegmentSizes", {1, 1, 0}),
                                {&x, &wrongWeight}, y),
                       "layer_norm: weight has shape [3], expected [4]"));
}

TEST(CpuKernels, LayerNormKeepsPrecisionOnOffsetRows) {
  // GPT-2-sized rows far from zero: E[x^2] - mean^2 would cancel in fp32.
  Tensor x = randomFloats(rng(), {8, 768}, 999, 1001);
  Tensor w = randomFloats(rng(), {768}), b = randomFloats(rng(), {768});
  Tensor y({8, 768}, ElementType::F32);
  runOk(Op("layer_norm")
            .ints("axis", {1})
            .real("epsilon", 1e-5)
            .ints("operandSegmentSizes", {1, 1, 1}),
        {&x, &w, &b}, y);
  expectClose(y.values<float>(), layerNormReference(x, 768, &w, &b, 1e-5), 1e-5,
              1e-6);
}

TEST(CpuKernels, RmsNormWithAndWithoutWeight) {
  Tensor x = randomFloats(rng(), {3, 2, 64}, -2, 2),
         w = randomFloats(rng(), {64});
  Tensor y({3, 2, 64}, ElementType::F32);
  auto reference = [&](bool weighted) {
    std::vector<double> out;
    for (int64_t row = 0; row < 6; ++row) {
      double squares = 0;
      for (int64_t i = 0; i < 64; ++i)
        squares += std::pow(x.data<float>()[row * 64 + i], 2);
      double inverse = 1 / std::sqrt(squares / 64 + 1e-6);
      for (int64_t i = 0; i < 64; ++i)
        out.push_back(x.data<float>()[row * 64 + i] * inverse *
                      (weighted ? w.data<float>()[i] : 1.0));
    }
    return out;
  };
  runOk(Op("rms_norm").real("epsilon", 1e-6), {&x, &w}, y);
  expectClose(y.values<float>(), reference(true));
  runOk(Op("rms_norm").real("epsilon", 1e-6), {&x}, y);
  expectClose(y.values<float>(), reference(false));
}

TEST(CpuKernels, SoftmaxAlongAnyAxis) {
  for (int64_t axis : {2, 1, 0}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    std::vector<int64_t> shape = {3, 5, 7};
    // Large logits: the max must be subtracted.
    Tensor x = randomFloats(rng(), shape, -50, 1000);
    Tensor y(shape, ElementType::F32);
    runOk(Op("softmax").ints("axis", {axis}), {&x}, y);
    std::vector<double> expected(x.size());
    for (int64_t i = 0; i < x.size(); ++i) {
      std::vector<int64_t> index = unravel(i, shape);
      double maximum = -INFINITY, sum = 0;
      for (int64_t j = 0; j < shape[axis]; ++j) {
        index[axis] = j;
        maximum = std::max<double>(
            maximum, x.data<float>()[broadcastFlat(index, shape)]);
      }
      for (int64_t j = 0; j < shape[axis]; ++j) {
        index[axis] = j;
        sum += std::exp(x.data<float>()[broadcastFlat(index, shape)] - maximum);
      }
      expected[i] = std::exp(x.data<float>()[i] - maximum) / sum;
    }
    expectClose(y.values<float>(), expected, 1e-5, 1e-7);
  }
}

/// Reduces `axes` of x in double: sum, mean or max over the elements whose
/// kept coordinates match; result in row-major order of the kept dims.
std::vector<double> reduceReference(Tensor &x, const std::vector<int64_t> &axes,
                                    const std::string &kind) {
  std::vector<int64_t> kept;
  for (int64_t d = 0; d < static_cast<int64_t>(x.shape.size()); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end())
      kept.push_back(x.shape[d]);
  std::vector<double> sums(count(kept), 0), maxima(count(kept), -INFINITY);
  std::vector<int64_t> counts(count(kept), 0);
  for (int64_t i = 0; i < x.size(); ++i) {
    std::vector<int64_t> index = unravel(i, x.shape), keptIndex;
    for (int64_t d = 0; d < static_cast<int64_t>(x.shape.size()); ++d)
      if (std::find(axes.begin(), axes.end(), d) == axes.end())
        keptIndex.push_back(index[d]);
    int64_t out = broadcastFlat(keptIndex, kept);
    double value = x.data<float>()[i];
    sums[out] += value;
    maxima[out] = std::max(maxima[out], value);
    ++counts[out];
  }
  if (kind == "reduce_max")
    return maxima;
  if (kind == "reduce_mean")
    for (size_t i = 0; i < sums.size(); ++i)
      sums[i] /= counts[i];
  return sums;
}

TEST(CpuKernels, ReductionsOverAxes) {
  Tensor x = randomFloats(rng(), {3, 4, 5, 6});
  struct Case {
    std::vector<int64_t> axes;
    bool keepdims;
    std::vector<int64_t> result;
  } cases[] = {
      {{3}, true, {3, 4, 5, 1}},    {{1}, false, {3, 5, 6}},
      {{0, 2}, true, {1, 4, 1, 6}}, {{1, 2}, false, {3, 6}},
      {{0, 1, 2, 3}, false, {}},
  };
  for (const char *kind : {"reduce_sum", "reduce_mean", "reduce_max"}) {
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(kind) + " over " +
                   std::to_string(c.axes.size()) + " axes");
      Tensor y(c.result, ElementType::F32);
      runOk(Op(kind).ints("axes", c.axes).ints("keepdims", {c.keepdims}), {&x},
            y);
      expectClose(y.values<float>(), reduceReference(x, c.axes, kind), 1e-6,
                  1e-6);
    }
  }
  Tensor wrong({3, 4}, ElementType::F32);
  EXPECT_TRUE(contains(
      runError(Op("reduce_sum").ints("axes", {3}).ints("keepdims", {0}), {&x},
               wrong),
      "reduce_sum: result has shape [3, 4], expected [3, 4, 5]"));
}

TEST(CpuKernels, ReductionSumsInDoubleAndIntegers) {
  // A million values of 0.1: an fp32 running sum drifts by ~1e-3 relative.
  Tensor x({1000000}, ElementType::F32);
  for (int64_t i = 0; i < x.size(); ++i)
    x.data<float>()[i] = 0.1f;
  Tensor sum({}, ElementType::F32);
  runOk(Op("reduce_sum").ints("axes", {0}).ints("keepdims", {0}), {&x}, sum);
  expectClose(sum.values<float>(), {1000000 * double(0.1f)}, 1e-7, 0);

  Tensor ints = make<int64_t>({2, 3}, {1, 2, 3, -4, -5, -7});
  Tensor intSum({2}, ElementType::I64), intMean({2}, ElementType::I64),
      intMax({2}, ElementType::I64);
  runOk(Op("reduce_sum").ints("axes", {1}).ints("keepdims", {0}), {&ints},
        intSum);
  runOk(Op("reduce_mean").ints("axes", {1}).ints("keepdims", {0}), {&ints},
        intMean);
  runOk(Op("reduce_max").ints("axes", {1}).ints("keepdims", {0}), {&ints},
        intMax);
  EXPECT_EQ(intSum.values<int64_t>(), (std::vector<int64_t>{6, -16}));
  EXPECT_EQ(intMean.values<int64_t>(), (std::vector<int64_t>{2, -5}));
  EXPECT_EQ(intMax.values<int64_t>(), (std::vector<int64_t>{3, -4}));
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Transposes random floats of `shape` by each of `perms` and checks every
/// element against the definition: result[out] = input[in], in[perm[d]] =
/// out[d].
void expectTransposes(const std::vector<int64_t> &shape,
                      const std::vector<std::vector<int64_t>> &perms) {
  Tensor x = randomFloats(rng(), shape);
  size_t rank = shape.size();
  for (const std::vector<int64_t> &perm : perms) {
    std::vector<int64_t> resultShape;
    for (int64_t axis : perm)
      resultShape.push_back(shape[axis]);
    Tensor y(resultShape, ElementType::F32);
    runOk(Op("transpose").ints("perm", perm), {&x}, y);
    for (int64_t i = 0; i < y.size(); ++i) {
      std::vector<int64_t> out = unravel(i, resultShape), in(rank);
      for (size_t d = 0; d < rank; ++d)
        in[perm[d]] = out[d];
      ASSERT_EQ(y.data<float>()[i], x.data<float>()[broadcastFlat(in, shape)])
          << i;
    }
  }
}

TEST(CpuKernels, TransposeAnyPermutation) {
  expectTransposes({2, 3, 4, 5}, {{0, 2, 1, 3}, {3, 1, 0, 2}, {0, 1, 3, 2}});
  Tensor i64 = make<int64_t>({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor t({3, 2}, ElementType::I64);
  runOk(Op("transpose").ints("perm", {1, 0}), {&i64}, t);
  EXPECT_EQ(t.values<int64_t>(), (std::vector<int64_t>{1, 4, 2, 5, 3, 6}));
}

// Large enough for the tiled copy (KernelSupport.h, tiledTransposeCopy):
// partial tiles at both edges, outer dimensions, a slice's negative step and
// an expand's zero stride, each against the definition element by element.
TEST(CpuKernels, TransposeTiledMatchesTheDefinition) {
  expectTransposes({2, 3, 70, 45}, {{0, 1, 3, 2}, {1, 0, 3, 2}, {3, 0, 2, 1}});
  // The tiled copy with other strides: tiledTransposeCopy directly, reading
  // columns backwards (a negative stride) and one row for every column (a
  // zero stride, as expand).
  std::vector<float> source(70 * 45);
  for (size_t i = 0; i < source.size(); ++i)
    source[i] = static_cast<float>(i);
  std::vector<float> backwards(45 * 70);
  ASSERT_TRUE(cpu::detail::tiledTransposeCopy<float>(
      source.data(), 44 * 70, {1, -70}, {70, 45}, backwards.data()));
  for (int64_t i = 0; i < 70; ++i)
    for (int64_t j = 0; j < 45; ++j)
      ASSERT_EQ(backwards[i * 45 + j], source[(44 - j) * 70 + i]) << i << j;
  std::vector<float> repeated(70 * 45);
  ASSERT_TRUE(cpu::detail::tiledTransposeCopy<float>(
      source.data(), 0, {1, 0}, {70, 45}, repeated.data()));
  for (int64_t i = 0; i < 70; ++i)
    for (int64_t j = 0; j < 45; ++j)
      ASSERT_EQ(repeated[i * 45 + j], source[i]) << i << j;
}

TEST(CpuKernels, SliceWithNegativeSteps) {
  // [5, 6]: rows 4, 2, 0 (step -2) and columns 1, 3, 5 (step 2).
  std::vector<float> values(30);
  for (int i = 0; i < 30; ++i)
    values[i] = static_cast<float>(i);
  Tensor x = make<float>({5, 6}, values);
  Tensor y({3, 3}, ElementType::F32);
  runOk(Op("slice").ints("starts", {4, 1}).ints("steps", {-2, 2}), {&x}, y);
  EXPECT_EQ(y.values<float>(),
            (std::vector<float>{25, 27, 29, 13, 15, 17, 1, 3, 5}));
  // Reversing the last dimension.
  Tensor reversed({5, 6}, ElementType::F32);
  runOk(Op("slice").ints("starts", {0, 5}).ints("steps", {1, -1}), {&x},
        reversed);
  EXPECT_EQ(reversed.values<float>()[0], 5);
  EXPECT_EQ(reversed.values<float>()[6], 11);
  // Reading past the end is an error.
  Tensor tooMany({3, 4}, ElementType::F32);
  EXPECT_TRUE(contains(
      runError(Op("slice").ints("starts", {0, 0}).ints("steps", {2, 2}), {&x},
               tooMany),
      "slice: dimension 1 reads [0, 6] with step 2, outside the input extent "
      "6"));
}

TEST(CpuKernels, ConcatAlongAnAxis) {
  Tensor a = make<float>({2, 1, 2}, {1, 2, 3, 4});
  Tensor b = make<float>({2, 2, 2}, {5, 6, 7, 8, 9, 10, 11, 12});
  Tensor c = make<float>({2, 1, 2}, {13, 14, 15, 16});
  Tensor y({2, 4, 2}, ElementType::F32);
  runOk(Op("concat").ints("axis", {1}), {&a, &b, &c}, y);
  EXPECT_EQ(y.values<float>(), (std::vector<float>{1, 2, 5, 6, 7, 8, 13, 14, 3,
                                                   4, 9, 10, 11, 12, 15, 16}));
  Tensor z({4, 1, 2}, ElementType::F32);
  runOk(Op("concat").ints("axis", {0}), {&a, &c}, z);
  EXPECT_EQ(z.values<float>(),
            (std::vector<float>{1, 2, 3, 4, 13, 14, 15, 16}));
  Tensor wrong({2, 4, 2}, ElementType::F32);
  EXPECT_TRUE(
      contains(runError(Op("concat").ints("axis", {1}), {&a, &b}, wrong),
               "concat: result has shape [2, 4, 2], expected [2, 3, 2]"));
  Tensor other = randomFloats(rng(), {3, 1, 2});
  EXPECT_TRUE(
      contains(runError(Op("concat").ints("axis", {1}), {&a, &other}, y),
               "concat: input 1 of shape [3, 1, 2] differs from input 0 "
               "of shape [2, 1, 2] outside axis 1"));
}

TEST(CpuKernels, GatherNegativeIndicesAndRange) {
  // data [2, 4, 3] along axis 1 with indices [[-1, 0], [2, -4]] (i32 and i64).
  Tensor data = randomFloats(rng(), {2, 4, 3});
  for (ElementType type : {ElementType::I64, ElementType::I32}) {
    Tensor indices = type == ElementType::I64
                         ? make<int64_t>({2, 2}, {-1, 0, 2, -4})
                         : make<int32_t>({2, 2}, {-1, 0, 2, -4});
    Tensor y({2, 2, 2, 3}, ElementType::F32);
    runOk(Op("gather").ints("axis", {1}), {&data, &indices}, y);
    const int64_t rows[] = {3, 0, 2, 0};
    for (int64_t o = 0; o < 2; ++o)
      for (int64_t j = 0; j < 4; ++j)
        for (int64_t c = 0; c < 3; ++c)
          EXPECT_EQ(y.data<float>()[(o * 4 + j) * 3 + c],
                    data.data<float>()[(o * 4 + rows[j]) * 3 + c]);
  }
  Tensor bad = make<int64_t>({1}, {4});
  Tensor y({2, 1, 3}, ElementType::F32);
  EXPECT_TRUE(
      contains(runError(Op("gather").ints("axis", {1}), {&data, &bad}, y),
               "gather: index 4 (element 0 of the indices) is out of "
               "range for axis 1 of extent 4"));
  Tensor tooNegative = make<int64_t>({1}, {-5});
  EXPECT_TRUE(contains(
      runError(Op("gather").ints("axis", {1}), {&data, &tooNegative}, y),
      "index -5"));
}

TEST(CpuKernels, EmbeddingLooksUpRowsAndRefusesBadIds) {
  Tensor table = randomFloats(rng(), {8, 4});
  Tensor ids = make<int64_t>({2, 3}, {0, 7, 3, 3, 1, 6});
  Tensor y({2, 3, 4}, ElementType::F32);
  runOk(Op("embedding"), {&table, &ids}, y);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t c = 0; c < 4; ++c)
      EXPECT_EQ(y.data<float>()[i * 4 + c],
                table.data<float>()[ids.data<int64_t>()[i] * 4 + c]);
  Tensor bad = make<int32_t>({2, 3}, {0, 1, 2, 10, 1, 1});
  EXPECT_TRUE(
      contains(runError(Op("embedding"), {&table, &bad}, y),
               "embedding: id 10 (element 3 of the ids) is out of range "
               "for a table of 8 rows"));
}

TEST(CpuKernels, ExpandAndReshape) {
  Tensor x = make<float>({3, 1}, {1, 2, 3});
  Tensor y({2, 3, 4}, ElementType::F32);
  runOk(Op("expand"), {&x}, y);
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(y.data<float>()[i], 1 + (i / 4) % 3) << i;
  Tensor bad({2, 4}, ElementType::F32);
  EXPECT_TRUE(contains(runError(Op("expand"), {&x}, bad),
                       "expand: cannot expand [3, 1] to [2, 4]"));
  Tensor r({4, 6}, ElementType::F32);
  runOk(Op("reshape"), {&y}, r);
  EXPECT_EQ(r.values<float>(), y.values<float>());
}

} // namespace
