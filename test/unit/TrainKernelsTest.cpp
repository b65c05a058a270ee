//===- TrainKernelsTest.cpp - training kernels vs finite differences ------===//
//
// Every gradient kernel of runtime/cpu (the backward opcodes of
// runtime/plan/plan.proto) is checked against central finite differences of its
// FORWARD kernel: with random inputs and a random cotangent R (fixed seed),
// L(x) = sum(forward(x) * R) is computed in double from the forward kernel's
// f32 outputs, and (L(x + h e_i) - L(x - h e_i)) / 2h must match the grad
// kernel's element i to a stated fraction of the largest gradient element. The
// step h is chosen per op: large enough that the forward's f32 rounding (about
// 6e-8 of each output, summed over the outputs) divided by 2h stays far below
// the tolerance, small enough that the truncation error (h^2 f''' / 6) does
// too. cross_entropy's value is checked against a double log-sum-exp, and the
// optimizers against a double reference of torch.optim's AdamW and SGD.
// Error paths are checked by their messages, which name the instruction.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/support/Bfloat16.h"

#include "test/unit/KernelTestSupport.h"
#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <utility>

using namespace zplan;
using namespace zplan::cpu;

using namespace zplan::testing;

namespace {

//===----------------------------------------------------------------------===//
// Tensors and finite differences (the rest is in KernelTestSupport.h)
//===----------------------------------------------------------------------===//

Tensor makeIds(std::vector<int64_t> shape, const std::vector<int64_t> &values,
               ElementType dtype = ElementType::I64) {
  if (dtype == ElementType::I64)
    return make<int64_t>(std::move(shape), values, dtype);
  std::vector<int32_t> narrow(values.begin(), values.end());
  return make<int32_t>(std::move(shape), narrow, dtype);
}

std::mt19937 &rng() {
  static std::mt19937 generator(20261201);
  return generator;
}

/// sum(output * cotangent) in double.
double weightedSum(Tensor &output, Tensor &cotangent) {
  double sum = 0;
  for (int64_t i = 0; i < output.size(); ++i)
    sum += static_cast<double>(output.floats()[i]) * cotangent.floats()[i];
  return sum;
}

/// Central differences of `loss` with respect to every element of `x`,
/// step `step`; the denominator is the f32 distance actually stepped.
std::vector<double> numericGradient(Tensor &x, double step,
                                    const std::function<double()> &loss) {
  std::vector<double> gradient(x.size());
  float *data = x.floats();
  for (int64_t i = 0; i < x.size(); ++i) {
    float saved = data[i];
    float up = static_cast<float>(saved + step),
          down = static_cast<float>(saved - step);
    data[i] = up;
    double plus = loss();
    data[i] = down;
    double minus = loss();
    data[i] = saved;
    gradient[i] = (plus - minus) / (static_cast<double>(up) - down);
  }
  return gradient;
}

/// Every element of `actual` within `tolerance` * max|expected| of
/// `expected`; max|expected| must not be ~0 (a check of zeros against zeros
/// could not fail). ZPLAN_PRINT_GRADIENT_ERRORS=1 prints the worst error
/// found, to see how much room a tolerance leaves.
void expectGradient(const char *what, const std::vector<float> &actual,
                    const std::vector<double> &expected, double tolerance) {
  SCOPED_TRACE(what);
  ASSERT_EQ(actual.size(), expected.size());
  double scale = 0;
  for (double value : expected)
    scale = std::max(scale, std::abs(value));
  ASSERT_GT(scale, 1e-3) << "the finite-difference gradient is ~0";
  int failures = 0;
  double worst = 0;
  for (size_t i = 0; i < actual.size(); ++i)
    worst = std::max(worst, std::abs(actual[i] - expected[i]) / scale);
  if (std::getenv("ZPLAN_PRINT_GRADIENT_ERRORS"))
    std::printf("%s: worst error %.3g of max %.3g\n", what, worst, scale);
  for (size_t i = 0; i < actual.size() && failures < 5; ++i) {
    double error = std::abs(static_cast<double>(actual[i]) - expected[i]);
    if (!(error <= tolerance * scale)) {
      ADD_FAILURE() << "element " << i << ": kernel " << actual[i]
                    << ", finite difference " << expected[i] << " (max "
                    << scale << ")";
      ++failures;
    }
  }
}

bool allZero(const std::vector<float> &values) {
  return std::all_of(values.begin(), values.end(),
                     [](float value) { return value == 0.0f; });
}

//===----------------------------------------------------------------------===//
// Dispatch
//===----------------------------------------------------------------------===//

TEST(TrainKernels, EveryTrainingOpcodeHasAKernel) {
  const std::pair<const char *, int> opcodes[] = {{"cross_entropy", 56},
                                                  {"cross_entropy_grad", 57},
                                                  {"token_logprobs", 58},
                                                  {"token_logprobs_grad", 59},
                                                  {"token_entropy", 68},
                                                  {"embedding_grad", 70},
                                                  {"gather_grad", 71},
                                                  {"slice_grad", 72},
                                                  {"layer_norm_grad", 73},
                                                  {"rms_norm_grad", 74},
                                                  {"softmax_grad", 75},
                                                  {"attention_grad", 76},
                                                  {"gelu_grad", 77},
                                                  {"adamw", 90},
                                                  {"sgd", 91}};
  for (const auto &[name, number] : opcodes) {
    std::optional<plan::Opcode> opcode = plan::opcodeFromName(name);
    ASSERT_TRUE(opcode.has_value()) << name;
    EXPECT_EQ(static_cast<int>(*opcode), number) << name;
    EXPECT_EQ(plan::findOpcode(*opcode)->queue, plan::COMPUTE) << name;
    EXPECT_EQ(plan::findOpcode(*opcode)->kind, plan::OpcodeKind::Kernel)
        << name;
    EXPECT_TRUE(hasKernel(*opcode)) << name;
  }
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

// layer_norm and rms_norm of inputs in [-1, 1]: outputs O(1), so with h =
// 1e-2 the f32 noise is ~1e-7 * sqrt(n) / 2e-2 ~ 1e-5 and the truncation
// ~1e-4 of the gradient; tolerance 2e-3 of the largest element.
constexpr double kNormStep = 1e-2, kNormTolerance = 2e-3;

void checkLayerNormGrad(const std::vector<int64_t> &shape, int64_t axis) {
  SCOPED_TRACE("layer_norm over axis " + std::to_string(axis));
  std::vector<int64_t> normalized(shape.begin() + axis, shape.end());
  Tensor x = randomFloats(rng(), shape),
         weight = randomFloats(rng(), normalized, 0.5, 1.5),
         bias = randomFloats(rng(), normalized),
         cotangent = randomFloats(rng(), shape);
  Tensor y(shape);
  double epsilon = 1e-5;
  Op forward = Op("layer_norm").ints("axis", {axis}).real("epsilon", epsilon);
  auto loss = [&] {
    runOk(forward, {&x, &weight, &bias}, {&y});
    return weightedSum(y, cotangent);
  };
  Tensor dx(shape), dweight(normalized), dbias(normalized);
  runOk(Op("layer_norm_grad").ints("axis", {axis}).real("epsilon", epsilon),
        {&cotangent, &x, &weight}, {&dx, &dweight, &dbias});
  expectGradient("dinput", dx.values(), numericGradient(x, kNormStep, loss),
                 kNormTolerance);
  expectGradient("dweight", dweight.values(),
                 numericGradient(weight, kNormStep, loss), kNormTolerance);
  expectGradient("dbias", dbias.values(),
                 numericGradient(bias, kNormStep, loss), kNormTolerance);
}

TEST(TrainKernels, LayerNormGradOverOneAndTwoTrailingAxes) {
  checkLayerNormGrad({3, 4, 8}, 2);
  checkLayerNormGrad({2, 3, 4, 5}, 2);
}

TEST(TrainKernels, RmsNormGrad) {
  std::vector<int64_t> shape = {3, 5, 8};
  Tensor x = randomFloats(rng(), shape),
         weight = randomFloats(rng(), {8}, 0.5, 1.5),
         cotangent = randomFloats(rng(), shape);
  Tensor y(shape);
  Op forward = Op("rms_norm").real("epsilon", 1e-6);
  auto loss = [&] {
    runOk(forward, {&x, &weight}, {&y});
    return weightedSum(y, cotangent);
  };
  Tensor dx(shape), dweight({8});
  runOk(Op("rms_norm_grad").real("epsilon", 1e-6), {&cotangent, &x, &weight},
        {&dx, &dweight});
  expectGradient("dinput", dx.values(), numericGradient(x, kNormStep, loss),
                 kNormTolerance);
  expectGradient("dweight", dweight.values(),
                 numericGradient(weight, kNormStep, loss), kNormTolerance);
}

// softmax of inputs in [-2, 2]: probabilities, h = 1e-2 as for the norms.
void checkSoftmaxGrad(const std::vector<int64_t> &shape, int64_t axis) {
  SCOPED_TRACE("softmax over axis " + std::to_string(axis));
  Tensor x = randomFloats(rng(), shape, -2, 2),
         cotangent = randomFloats(rng(), shape);
  Tensor y(shape), dx(shape);
  Op forward = Op("softmax").ints("axis", {axis});
  auto loss = [&] {
    runOk(forward, {&x}, {&y});
    return weightedSum(y, cotangent);
  };
  loss(); // y = softmax(x): softmax_grad takes the forward's output
  runOk(Op("softmax_grad").ints("axis", {axis}), {&cotangent, &y}, {&dx});
  expectGradient("dinput", dx.values(), numericGradient(x, 1e-2, loss), 2e-3);
}

TEST(TrainKernels, SoftmaxGradOnTheLastAndAMiddleAxis) {
  checkSoftmaxGrad({3, 7}, 1);
  checkSoftmaxGrad({2, 5, 3}, 1);
  checkSoftmaxGrad({2, 5, 3}, -2);
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

struct AttentionCase {
  const char *name;
  std::vector<int64_t> batch; // leading dimensions
  int64_t s, t, d, dv;
  std::vector<int64_t> maskShape; // empty: no mask
  std::string maskKind;
  /// Fills the mask (f32 for additive, bool for select).
  std::function<void(Tensor &)> fillMask;
};

// Attention of q, k, v in [-1, 1] with scale 1/sqrt(D): scores O(1),
// outputs O(1); h = 1e-2, tolerance 2e-3 of the largest element.
void checkAttentionGrad(const AttentionCase &c) {
  SCOPED_TRACE(c.name);
  auto shapeOf = [&](int64_t rows, int64_t columns) {
    std::vector<int64_t> shape = c.batch;
    shape.insert(shape.end(), {rows, columns});
    return shape;
  };
  Tensor q = randomFloats(rng(), shapeOf(c.s, c.d)),
         k = randomFloats(rng(), shapeOf(c.t, c.d)),
         v = randomFloats(rng(), shapeOf(c.t, c.dv)),
         cotangent = randomFloats(rng(), shapeOf(c.s, c.dv));
  bool hasMask = !c.maskShape.empty();
  Tensor mask(c.maskShape,
              c.maskKind == "select" ? ElementType::Bool : ElementType::F32);
  if (hasMask)
    c.fillMask(mask);
  double scale = 1 / std::sqrt(static_cast<double>(c.d));
  double maskedValue = -std::numeric_limits<float>::max(); // finfo.min
  auto withAttributes = [&](Op op) {
    op.real("scale", scale);
    if (hasMask) {
      op.text("mask_kind", c.maskKind);
      if (c.maskKind == "select")
        op.real("masked_value", maskedValue);
    }
    return op;
  };
  Op forward = withAttributes(Op("attention"));
  Tensor out(shapeOf(c.s, c.dv));
  auto loss = [&] {
    std::vector<Tensor *> operands = {&q, &k, &v};
    if (hasMask)
      operands.push_back(&mask);
    runOk(forward, operands, {&out});
    return weightedSum(out, cotangent);
  };
  Tensor dq(q.shape), dk(k.shape), dv(v.shape);
  std::vector<Tensor *> operands = {&cotangent, &q, &k, &v};
  if (hasMask)
    operands.push_back(&mask);
  runOk(withAttributes(Op("attention_grad")), operands, {&dq, &dk, &dv});
  expectGradient("dquery", dq.values(), numericGradient(q, 1e-2, loss), 2e-3);
  expectGradient("dkey", dk.values(), numericGradient(k, 1e-2, loss), 2e-3);
  expectGradient("dvalue", dv.values(), numericGradient(v, 1e-2, loss), 2e-3);
}

TEST(TrainKernels, AttentionGradWithoutMaskAndSDifferentFromT) {
  // S != T and Dv != D.
  checkAttentionGrad({"no mask", {2, 2}, 3, 5, 4, 6, {}, "", nullptr});
}

TEST(TrainKernels, AttentionGradWithAdditiveMask) {
  checkAttentionGrad(
      {"additive", {2, 2}, 3, 5, 4, 3, {3, 5}, "additive", [](Tensor &mask) {
         std::uniform_real_distribution<float> dist(-3, 0);
         for (int64_t i = 0; i < mask.size(); ++i)
           mask.floats()[i] = dist(rng());
         // A score the mask removes entirely.
         mask.floats()[2] = -std::numeric_limits<float>::infinity();
       }});
}

TEST(TrainKernels, AttentionGradWithSelectMaskAndAFullyMaskedRow) {
  // [B, 1, S, T] broadcast over the heads; row 1 of batch 0 is masked
  // throughout: the forward gives it uniform probabilities, so its dq is
  // zero and it still reaches dv.
  checkAttentionGrad(
      {"select", {2, 2}, 4, 5, 3, 4, {2, 1, 4, 5}, "select", [](Tensor &mask) {
         std::bernoulli_distribution keep(0.7);
         uint8_t *bits = mask.data<uint8_t>();
         for (int64_t i = 0; i < mask.size(); ++i)
           bits[i] = keep(rng());
         for (int64_t col = 0; col < 5; ++col)
           bits[1 * 5 + col] = 0;
         bits[0] = 1; // row 0 of batch 0 keeps one score
       }});
}

TEST(TrainKernels, AttentionGradWithCausalSelectMask) {
  checkAttentionGrad(
      {"causal", {1, 2}, 5, 5, 4, 3, {5, 5}, "select", [](Tensor &mask) {
         for (int64_t row = 0; row < 5; ++row)
           for (int64_t col = 0; col < 5; ++col)
             mask.data<uint8_t>()[row * 5 + col] = col <= row;
       }});
}

TEST(TrainKernels, AttentionGradOfAFullyMaskedRowHasNoQueryGradient) {
  Tensor q = randomFloats(rng(), {1, 2, 3}), k = randomFloats(rng(), {1, 4, 3}),
         v = randomFloats(rng(), {1, 4, 2}),
         dout = randomFloats(rng(), {1, 2, 2});
  Tensor mask =
      make<uint8_t>({2, 4}, {1, 0, 1, 1, 0, 0, 0, 0}, ElementType::Bool);
  Tensor dq(q.shape), dk(k.shape), dv(v.shape);
  runOk(Op("attention_grad")
            .real("scale", 0.5)
            .text("mask_kind", "select")
            .real("masked_value", -1e30),
        {&dout, &q, &k, &v, &mask}, {&dq, &dk, &dv});
  for (int64_t col = 0; col < 3; ++col) {
    EXPECT_EQ(dq.floats()[3 + col], 0.0f) << col; // row 1: all masked
    EXPECT_NE(dq.floats()[col], 0.0f) << col;     // row 0: not
  }
  // Row 1's uniform probabilities send dout[1] / 4 to every value row: key
  // 1 is masked for row 0 too, so dv[1] is exactly that share.
  for (int64_t col = 0; col < 2; ++col)
    EXPECT_FLOAT_EQ(dv.floats()[2 + col], dout.floats()[2 + col] / 4) << col;
}

//===----------------------------------------------------------------------===//
// Activations
//===----------------------------------------------------------------------===//

TEST(TrainKernels, GeluGradExactAndTanh) {
  // Elementwise: the other elements' outputs do not move, so only the
  // perturbed element's rounding enters (~2e-7 / 2h); h = 1e-2 keeps the
  // truncation (h^2 gelu''' / 6, gelu''' < 1) below 2e-5. Tolerance 1e-3 of
  // the largest element.
  for (const char *approximate : {"none", "tanh"}) {
    SCOPED_TRACE(approximate);
    Tensor x = randomFloats(rng(), {64}, -4, 4),
           cotangent = randomFloats(rng(), {64});
    Tensor y({64}), dx({64});
    Op forward = Op("gelu").text("approximate", approximate);
    auto loss = [&] {
      runOk(forward, {&x}, {&y});
      return weightedSum(y, cotangent);
    };
    runOk(Op("gelu_grad").text("approximate", approximate), {&cotangent, &x},
          {&dx});
    expectGradient("dinput", dx.values(), numericGradient(x, 1e-2, loss), 1e-3);
  }
}

//===----------------------------------------------------------------------===//
// Scatter gradients (linear ops: the finite difference is exact up to
// rounding; h = 1e-1, tolerance 1e-4)
//===----------------------------------------------------------------------===//

void checkSliceGrad(const std::vector<int64_t> &starts,
                    const std::vector<int64_t> &steps,
                    const std::vector<int64_t> &inputShape,
                    const std::vector<int64_t> &sliceShape) {
  SCOPED_TRACE("steps " + std::to_string(steps[0]) + ", " +
               std::to_string(steps[1]) + ", " + std::to_string(steps[2]));
  Tensor x = randomFloats(rng(), inputShape),
         cotangent = randomFloats(rng(), sliceShape);
  Tensor y(sliceShape), dx(inputShape);
  Op forward = Op("slice").ints("starts", starts).ints("steps", steps);
  auto loss = [&] {
    runOk(forward, {&x}, {&y});
    return weightedSum(y, cotangent);
  };
  std::fill(dx.floats(), dx.floats() + dx.size(), 7.0f); // must be zeroed
  runOk(Op("slice_grad").ints("starts", starts).ints("steps", steps),
        {&cotangent}, {&dx});
  expectGradient("dinput", dx.values(), numericGradient(x, 1e-1, loss), 1e-4);
  // The slice's first element is at the starts; [0, 0, 0] is outside it.
  int64_t first =
      (starts[0] * inputShape[1] + starts[1]) * inputShape[2] + starts[2];
  EXPECT_EQ(dx.floats()[first], cotangent.floats()[0]);
  EXPECT_EQ(dx.floats()[0], 0.0f);
}

TEST(TrainKernels, SliceGradWithStepsAndOffsetStarts) {
  // Contiguous rows of the last dimension, then steps > 1 in every one.
  checkSliceGrad({1, 2, 0}, {2, 3, 1}, {4, 7, 5}, {2, 2, 5});
  checkSliceGrad({1, 1, 1}, {2, 2, 2}, {4, 7, 5}, {2, 3, 2});
}

TEST(TrainKernels, EmbeddingGradAddsRepeatedIdsWithInt32AndInt64) {
  for (ElementType idType : {ElementType::I64, ElementType::I32}) {
    SCOPED_TRACE(idType == ElementType::I64 ? "i64 ids" : "i32 ids");
    // Id 2 three times (once as -4, wrapping as in embedding), row 5 never.
    Tensor ids = makeIds({2, 3}, {2, 0, 2, -4, 1, 3}, idType);
    Tensor table = randomFloats(rng(), {6, 4}),
           cotangent = randomFloats(rng(), {2, 3, 4});
    Tensor y({2, 3, 4}), dtable({6, 4});
    auto loss = [&] {
      runOk(Op("embedding"), {&table, &ids}, {&y});
      return weightedSum(y, cotangent);
    };
    std::fill(dtable.floats(), dtable.floats() + dtable.size(), 7.0f);
    runOk(Op("embedding_grad"), {&cotangent, &ids}, {&dtable});
    expectGradient("dtable", dtable.values(),
                   numericGradient(table, 1e-1, loss), 1e-4);
    for (int64_t col = 0; col < 4; ++col) {
      float *dy = cotangent.floats();
      EXPECT_EQ(dtable.floats()[2 * 4 + col],
                (dy[0 * 4 + col] + dy[2 * 4 + col]) + dy[3 * 4 + col]);
      EXPECT_EQ(dtable.floats()[5 * 4 + col], 0.0f);
    }
  }
}

TEST(TrainKernels, GatherGradAlongAxisOne) {
  Tensor indices = makeIds({2, 3}, {4, 0, 4, 1, -1, 2});
  Tensor data = randomFloats(rng(), {3, 5, 4}),
         cotangent = randomFloats(rng(), {3, 2, 3, 4});
  Tensor y({3, 2, 3, 4}), ddata({3, 5, 4});
  Op forward = Op("gather").ints("axis", {1});
  auto loss = [&] {
    runOk(forward, {&data, &indices}, {&y});
    return weightedSum(y, cotangent);
  };
  runOk(Op("gather_grad").ints("axis", {1}), {&cotangent, &indices}, {&ddata});
  expectGradient("ddata", ddata.values(), numericGradient(data, 1e-1, loss),
                 1e-4);
}

//===----------------------------------------------------------------------===//
// cross_entropy
//===----------------------------------------------------------------------===//

/// The loss in double: mean over counted rows of logsumexp - logit[target].
double crossEntropyReference(Tensor &logits,
                             const std::vector<int64_t> &targets,
                             int64_t ignoreIndex) {
  int64_t classes = logits.shape.back();
  double total = 0;
  int64_t counted = 0;
  for (size_t row = 0; row < targets.size(); ++row) {
    if (targets[row] == ignoreIndex)
      continue;
    const float *x = logits.floats() + row * classes;
    double maximum = *std::max_element(x, x + classes), sum = 0;
    for (int64_t i = 0; i < classes; ++i)
      sum += std::exp(static_cast<double>(x[i]) - maximum);
    total += maximum + std::log(sum) - x[targets[row]];
    ++counted;
  }
  return counted ? total / counted : 0;
}

TEST(TrainKernels, CrossEntropyValueAndGradWithIgnoredRows) {
  struct Case {
    const char *name;
    ElementType targetType;
    std::vector<int64_t> targets;
    std::optional<int64_t> ignoreIndex; // absent: the default, -100
  };
  const Case cases[] = {
      {"i64, default ignore_index",
       ElementType::I64,
       {3, -100, 0, 6, -100, 2},
       std::nullopt},
      {"i32, ignore_index 1", ElementType::I32, {1, 4, 1, 0, 5, 6}, 1},
  };
  for (const Case &c : cases) {
    SCOPED_TRACE(c.name);
    Tensor logits = randomFloats(rng(), {2, 3, 7}, -3, 3);
    Tensor targets = makeIds({2, 3}, c.targets, c.targetType);
    Tensor dloss = make<float>({}, {0.75f}, ElementType::F32);
    Op forward("cross_entropy"), backward("cross_entropy_grad");
    if (c.ignoreIndex) {
      forward.ints("ignore_index", {*c.ignoreIndex});
      backward.ints("ignore_index", {*c.ignoreIndex});
    }
    Tensor value({});
    runOk(forward, {&logits, &targets}, {&value});
    double expected =
        crossEntropyReference(logits, c.targets, c.ignoreIndex.value_or(-100));
    EXPECT_NEAR(value.floats()[0], expected, 1e-6 * std::abs(expected));
    // L = loss * dloss; logits in [-3, 3], h = 1e-2, tolerance 2e-3.
    auto loss = [&] {
      runOk(forward, {&logits, &targets}, {&value});
      return weightedSum(value, dloss);
    };
    Tensor dlogits({2, 3, 7});
    runOk(backward, {&logits, &targets, &dloss}, {&dlogits});
    expectGradient("dlogits", dlogits.values(),
                   numericGradient(logits, 1e-2, loss), 2e-3);
    // Ignored rows get exactly zero.
    int64_t ignore = c.ignoreIndex.value_or(-100);
    for (size_t row = 0; row < c.targets.size(); ++row) {
      if (c.targets[row] != ignore)
        continue;
      for (int64_t i = 0; i < 7; ++i)
        EXPECT_EQ(dlogits.floats()[row * 7 + i], 0.0f) << row;
    }
  }
}

TEST(TrainKernels, LossOpsReadBf16LogitsAsTheirF32Widening) {
  // Mixed precision's LM head returns bf16 logits: every loss op reads them
  // widened (exact) and computes and returns f32, bit for bit what it does
  // on an f32 copy of them.
  Tensor wide = randomFloats(rng(), {2, 3, 300}, -6, 6);
  std::vector<uint16_t> bits;
  for (int64_t i = 0; i < wide.size(); ++i)
    bits.push_back(zplan::floatToBf16(wide.floats()[i]));
  Tensor logits = make<uint16_t>({2, 3, 300}, bits, ElementType::BF16);
  std::vector<float> widened;
  for (uint16_t b : bits)
    widened.push_back(zplan::bf16ToFloat(b));
  Tensor logits32 = make<float>({2, 3, 300}, widened, ElementType::F32);
  Tensor targets = makeIds({2, 3}, {3, -100, 299, 0, 7, 150}, ElementType::I64);
  Tensor dloss = make<float>({}, {0.75f}, ElementType::F32);
  Tensor dlogp = randomFloats(rng(), {2, 3}, -1, 1);
  struct Run {
    const char *op;
    std::vector<Tensor *> rest;
    std::vector<int64_t> shape;
  };
  const Run runs[] = {{"cross_entropy", {&targets}, {}},
                      {"cross_entropy_grad", {&targets, &dloss}, {2, 3, 300}},
                      {"token_logprobs", {&targets}, {2, 3}},
                      {"token_logprobs_grad", {&targets, &dlogp}, {2, 3, 300}},
                      {"token_entropy", {}, {2, 3}}};
  for (const Run &run : runs) {
    SCOPED_TRACE(run.op);
    std::vector<Tensor *> half{&logits}, full{&logits32};
    half.insert(half.end(), run.rest.begin(), run.rest.end());
    full.insert(full.end(), run.rest.begin(), run.rest.end());
    Tensor got(run.shape), expected(run.shape);
    runOk(Op(run.op), half, {&got});
    runOk(Op(run.op), full, {&expected});
    EXPECT_EQ(got.values(), expected.values());
  }
  // A bf16 result under bf16 logits is refused: the loss ops return f32.
  Tensor halfLoss({}, ElementType::BF16);
  EXPECT_TRUE(
      contains(runError(Op("cross_entropy"), {&logits, &targets}, {&halfLoss}),
               "loss has element type bf16, expected f32"));
}

TEST(TrainKernels, AttentionReadsBf16InputsAsTheirF32Widening) {
  // Mixed precision's q, k and v may be bf16: attention and its gradient
  // read them widened (exact) and compute and return f32, bit for bit what
  // they do on f32 copies. GPT-2's case (all three bf16) and Llama's (the
  // value alone), with a causal mask.
  auto rounded = [](Tensor &wide, Tensor &half) {
    std::vector<uint16_t> bits;
    std::vector<float> widened;
    for (int64_t i = 0; i < wide.size(); ++i) {
      bits.push_back(zplan::floatToBf16(wide.floats()[i]));
      widened.push_back(zplan::bf16ToFloat(bits.back()));
    }
    half = make<uint16_t>(wide.shape, bits, ElementType::BF16);
    wide = make<float>(wide.shape, widened, ElementType::F32);
  };
  Tensor q = randomFloats(rng(), {2, 3, 9, 16}, -2, 2),
         k = randomFloats(rng(), {2, 3, 9, 16}, -2, 2),
         v = randomFloats(rng(), {2, 3, 9, 8}, -2, 2);
  Tensor qHalf({1}), kHalf({1}), vHalf({1});
  rounded(q, qHalf);
  rounded(k, kHalf);
  rounded(v, vHalf);
  std::vector<float> causal(81);
  for (int64_t row = 0; row < 9; ++row)
    for (int64_t col = 0; col < 9; ++col)
      causal[row * 9 + col] = col <= row ? 0.0f : -1e9f;
  Tensor mask = make<float>({9, 9}, causal, ElementType::F32);
  Tensor dout = randomFloats(rng(), {2, 3, 9, 8}, -1, 1);
  Op forward = Op("attention").real("scale", 0.25);
  Op backward = Op("attention_grad").real("scale", 0.25);
  for (bool all : {true, false}) {
    SCOPED_TRACE(all ? "q, k, v bf16" : "v bf16");
    Tensor *qIn = all ? &qHalf : &q, *kIn = all ? &kHalf : &k;
    Tensor out({2, 3, 9, 8}), expected({2, 3, 9, 8});
    runOk(forward, {qIn, kIn, &vHalf, &mask}, {&out});
    runOk(forward, {&q, &k, &v, &mask}, {&expected});
    EXPECT_EQ(out.values(), expected.values());
    Tensor dq({2, 3, 9, 16}), dk({2, 3, 9, 16}), dv({2, 3, 9, 8});
    Tensor dqF({2, 3, 9, 16}), dkF({2, 3, 9, 16}), dvF({2, 3, 9, 8});
    runOk(backward, {&dout, qIn, kIn, &vHalf, &mask}, {&dq, &dk, &dv});
    runOk(backward, {&dout, &q, &k, &v, &mask}, {&dqF, &dkF, &dvF});
    EXPECT_EQ(dq.values(), dqF.values());
    EXPECT_EQ(dk.values(), dkF.values());
    EXPECT_EQ(dv.values(), dvF.values());
  }
}

TEST(TrainKernels, CrossEntropyOverAWideVocabularyMatchesDouble) {
  // GPT-2's vocabulary: the f32 exp and the double sums must keep the loss
  // and every probability to f32 precision over 50257 terms. Row 0's
  // target dominates (p ~ 1), where p - 1 must not cancel to 0.
  const int64_t classes = 50257;
  Tensor logits = randomFloats(rng(), {2, classes}, -10, 10);
  logits.floats()[17] = 40;
  std::vector<int64_t> targetValues = {17, 4242};
  Tensor targets = makeIds({2}, targetValues);
  Tensor value({}), dlogits({2, classes});
  Tensor dloss = make<float>({}, {1.0f}, ElementType::F32);
  runOk(Op("cross_entropy"), {&logits, &targets}, {&value});
  double expected = crossEntropyReference(logits, targetValues, -100);
  EXPECT_NEAR(value.floats()[0], expected, 1e-6 * std::abs(expected));
  runOk(Op("cross_entropy_grad"), {&logits, &targets, &dloss}, {&dlogits});
  for (int64_t row = 0; row < 2; ++row) {
    const float *x = logits.floats() + row * classes;
    double maximum = *std::max_element(x, x + classes), sum = 0;
    for (int64_t i = 0; i < classes; ++i)
      sum += std::exp(static_cast<double>(x[i]) - maximum);
    for (int64_t i = 0; i < classes; ++i) {
      double probability = std::exp(x[i] - maximum) / sum;
      double reference = 0.5 * (probability - (i == targetValues[row] ? 1 : 0));
      ASSERT_NEAR(dlogits.floats()[row * classes + i], reference,
                  1e-5 * std::abs(reference) + 1e-12)
          << row << ", " << i;
    }
  }
}

TEST(TrainKernels, CrossEntropyOfAnAllIgnoredBatchIsZero) {
  Tensor logits = randomFloats(rng(), {2, 5});
  Tensor targets = makeIds({2}, {-100, -100});
  Tensor dloss = make<float>({}, {1.0f}, ElementType::F32);
  Tensor value = make<float>({}, {7.0f}, ElementType::F32);
  Tensor dlogits({2, 5});
  std::fill(dlogits.floats(), dlogits.floats() + dlogits.size(), 7.0f);
  runOk(Op("cross_entropy"), {&logits, &targets}, {&value});
  runOk(Op("cross_entropy_grad"), {&logits, &targets, &dloss}, {&dlogits});
  EXPECT_EQ(value.floats()[0], 0.0f);
  EXPECT_TRUE(allZero(dlogits.values()));
}

// token_logprobs (log_softmax at the target, 0 where ignored) against a
// double reference; its gradient against finite differences of
// sum(logp * dlogp); token_entropy against -sum p log p in double.
TEST(TrainKernels, TokenLogprobsAndEntropyMatchDoubleAndTheirGradient) {
  Tensor logits = randomFloats(rng(), {2, 3, 7}, -3, 3);
  std::vector<int64_t> targetValues = {3, -100, 0, 6, 5, -100};
  Tensor targets = makeIds({2, 3}, targetValues);
  Tensor logp({2, 3}), entropy({2, 3});
  runOk(Op("token_logprobs"), {&logits, &targets}, {&logp});
  runOk(Op("token_entropy"), {&logits}, {&entropy});
  for (int64_t row = 0; row < 6; ++row) {
    const float *x = logits.floats() + row * 7;
    double maximum = *std::max_element(x, x + 7), sum = 0;
    for (int64_t i = 0; i < 7; ++i)
      sum += std::exp(static_cast<double>(x[i]) - maximum);
    double logSum = maximum + std::log(sum), expectedEntropy = 0;
    for (int64_t i = 0; i < 7; ++i) {
      double logP = x[i] - logSum;
      expectedEntropy -= std::exp(logP) * logP;
    }
    EXPECT_NEAR(entropy.floats()[row], expectedEntropy, 1e-6) << row;
    if (targetValues[row] == -100)
      EXPECT_EQ(logp.floats()[row], 0.0f) << row;
    else
      EXPECT_NEAR(logp.floats()[row], x[targetValues[row]] - logSum, 1e-6)
          << row;
  }
  Tensor dlogp = make<float>({2, 3}, {0.5f, 2.0f, -1.0f, 0.25f, 0.0f, 1.0f},
                             ElementType::F32);
  auto loss = [&] {
    runOk(Op("token_logprobs"), {&logits, &targets}, {&logp});
    return weightedSum(logp, dlogp);
  };
  Tensor dlogits({2, 3, 7});
  runOk(Op("token_logprobs_grad"), {&logits, &targets, &dlogp}, {&dlogits});
  expectGradient("dlogits", dlogits.values(),
                 numericGradient(logits, 1e-2, loss), 2e-3);
  // Ignored rows, and rows with dlogp 0, get exactly zero.
  for (int64_t row : {1, 4, 5})
    for (int64_t i = 0; i < 7; ++i)
      EXPECT_EQ(dlogits.floats()[row * 7 + i], 0.0f) << row;
}

TEST(TrainKernels, TokenLogprobsRefusesATargetOutOfRange) {
  Tensor logits = randomFloats(rng(), {2, 5});
  Tensor targets = makeIds({2}, {1, 5});
  Tensor logp({2});
  EXPECT_TRUE(
      contains(runError(Op("token_logprobs"), {&logits, &targets}, {&logp}),
               "token_logprobs: target 5"));
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

/// The hyper tensor of step t (1-based).
Tensor hyperOf(int t, double lr, double beta1, double beta2, double epsilon,
               double weightDecay, double gradScale) {
  return make<float>({8},
                     {static_cast<float>(lr), static_cast<float>(beta1),
                      static_cast<float>(beta2), static_cast<float>(epsilon),
                      static_cast<float>(weightDecay),
                      static_cast<float>(gradScale),
                      static_cast<float>(1 - std::pow(beta1, t)),
                      static_cast<float>(1 - std::pow(beta2, t))},
                     ElementType::F32);
}

void expectNear(const char *what, const std::vector<float> &actual,
                const std::vector<double> &expected, double tolerance) {
  SCOPED_TRACE(what);
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i)
    EXPECT_NEAR(actual[i], expected[i],
                tolerance * std::max(1.0, std::abs(expected[i])))
        << i;
}

TEST(TrainKernels, AdamWThreeStepsMatchTorch) {
  const double lr = 1e-2, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8,
               weightDecay = 0.1, gradScale = 0.5;
  const int64_t n = 37;
  Tensor param = randomFloats(rng(), {n}), m({n}), v({n}), grad({n});
  std::vector<double> p(param.floats(), param.floats() + n), mRef(n, 0),
      vRef(n, 0);
  for (int t = 1; t <= 3; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    Tensor fresh = randomFloats(rng(), {n}, -2, 2);
    std::memcpy(grad.floats(), fresh.floats(), n * sizeof(float));
    Tensor hyper =
        hyperOf(t, lr, beta1, beta2, epsilon, weightDecay, gradScale);
    // torch.optim.AdamW (foreach=False), in double.
    const float *h = hyper.floats();
    for (int64_t i = 0; i < n; ++i) {
      double g = static_cast<double>(grad.floats()[i]) * h[5];
      p[i] *= 1 - static_cast<double>(h[0]) * h[4];
      mRef[i] = h[1] * mRef[i] + (1 - static_cast<double>(h[1])) * g;
      vRef[i] = h[2] * vRef[i] + (1 - static_cast<double>(h[2])) * g * g;
      p[i] -=
          (static_cast<double>(h[0]) / h[6]) * mRef[i] /
          (std::sqrt(vRef[i]) / std::sqrt(static_cast<double>(h[7])) + h[3]);
    }
    runOk(Op("adamw"), {&param, &grad, &m, &v, &hyper}, {});
    // The update is ~lr per step: 1e-6 of the parameter is ~1e-4 of it.
    expectNear("param", param.values(), p, 1e-6);
    expectNear("m", m.values(), mRef, 1e-6);
    expectNear("v", v.values(), vRef, 1e-6);
    EXPECT_TRUE(allZero(grad.values()));
  }
}

TEST(TrainKernels, SgdThreeStepsMatchTorch) {
  struct Case {
    const char *name;
    double momentum, weightDecay;
  };
  for (const Case &c : {Case{"plain", 0, 0}, Case{"momentum", 0.9, 0},
                        Case{"momentum and weight decay", 0.9, 0.01},
                        Case{"weight decay", 0, 0.05}}) {
    SCOPED_TRACE(c.name);
    const double lr = 0.1, gradScale = 0.25;
    const int64_t n = 29;
    Tensor param = randomFloats(rng(), {n}), buffer({n}), grad({n});
    std::vector<double> p(param.floats(), param.floats() + n), bufRef(n, 0);
    for (int t = 1; t <= 3; ++t) {
      SCOPED_TRACE("step " + std::to_string(t));
      Tensor fresh = randomFloats(rng(), {n}, -2, 2);
      std::memcpy(grad.floats(), fresh.floats(), n * sizeof(float));
      Tensor hyper = hyperOf(t, lr, c.momentum, 0, 0, c.weightDecay, gradScale);
      const float *h = hyper.floats();
      // torch.optim.SGD (dampening 0, nesterov off), in double.
      for (int64_t i = 0; i < n; ++i) {
        double g = static_cast<double>(grad.floats()[i]) * h[5] + h[4] * p[i];
        if (h[1] != 0) {
          bufRef[i] = t == 1 ? g : h[1] * bufRef[i] + g;
          g = bufRef[i];
        }
        p[i] -= static_cast<double>(h[0]) * g;
      }
      runOk(Op("sgd"), {&param, &grad, &buffer, &hyper}, {});
      expectNear("param", param.values(), p, 1e-6);
      expectNear("momentum_buffer", buffer.values(), bufRef, 1e-6);
      EXPECT_TRUE(allZero(grad.values()));
    }
  }
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(TrainKernels, TargetOutOfRangeNamesTheInstruction) {
  Tensor logits = randomFloats(rng(), {3, 5}), value({}), dlogits({3, 5});
  Tensor targets = makeIds({3}, {1, 5, -100});
  Tensor dloss = make<float>({}, {1.0f}, ElementType::F32);
  EXPECT_TRUE(
      contains(runError(Op("cross_entropy"), {&logits, &targets}, {&value}),
               "cross_entropy: target 5 (element 1 of the targets) "
               "is out of range for 5 classes"));
  EXPECT_TRUE(contains(runError(Op("cross_entropy_grad"),
                                {&logits, &targets, &dloss}, {&dlogits}),
                       "cross_entropy_grad: target 5"));
  // -100 is a target like any other once ignore_index is something else.
  Tensor negative = makeIds({3}, {1, 2, -100});
  EXPECT_TRUE(contains(runError(Op("cross_entropy").ints("ignore_index", {0}),
                                {&logits, &negative}, {&value}),
                       "cross_entropy: target -100"));
  Tensor ids = makeIds({2}, {0, 6});
  Tensor dy = randomFloats(rng(), {2, 4}), table({6, 4});
  EXPECT_TRUE(contains(runError(Op("embedding_grad"), {&dy, &ids}, {&table}),
                       "embedding_grad: id 6 (element 1 of the ids) is out "
                       "of range for a table of 6 rows"));
}

TEST(TrainKernels, F64RunsAndOtherTypesAreRefusedByName) {
  // softmax_grad of y = [0.25, 0.75], dy = [1, 0]: sum(dy * y) = 0.25, so
  // dinput = [0.25 * 0.75, 0.75 * -0.25], exactly.
  Tensor y = make<double>({1, 2}, {0.25, 0.75}, ElementType::F64);
  Tensor dy = make<double>({1, 2}, {1, 0}, ElementType::F64);
  Tensor dx({1, 2}, ElementType::F64);
  runOk(Op("softmax_grad").ints("axis", {1}), {&dy, &y}, {&dx});
  EXPECT_EQ(dx.data<double>()[0], 0.1875);
  EXPECT_EQ(dx.data<double>()[1], -0.1875);

  Tensor half({4}, ElementType::F16), halfResult({4}, ElementType::F16);
  EXPECT_TRUE(contains(runError(Op("gelu_grad"), {&half, &half}, {&halfResult}),
                       "gelu_grad: dy has element type f16, expected f32 or "
                       "f64"));
  Tensor q({2, 3}, ElementType::F64), dq({2, 3}, ElementType::F64);
  EXPECT_TRUE(contains(runError(Op("attention_grad").real("scale", 1),
                                {&q, &q, &q, &q}, {&dq, &dq, &dq}),
                       "attention_grad: dout has element type f64, expected "
                       "f32"));
  Tensor hyper = hyperOf(1, 1e-3, 0.9, 0.999, 1e-8, 0, 1);
  EXPECT_TRUE(contains(runError(Op("sgd"), {&q, &q, &q, &hyper}, {}),
                       "sgd: param has element type f64, expected f32"));
}

TEST(TrainKernels, WrongShapesAreRefused) {
  Tensor x = randomFloats(rng(), {2, 4}), dy = randomFloats(rng(), {2, 4});
  Tensor weight3 = randomFloats(rng(), {3}), dx({2, 4}), dw({3}), db({3});
  EXPECT_TRUE(contains(
      runError(Op("layer_norm_grad").ints("axis", {1}).real("epsilon", 1e-5),
               {&dy, &x, &weight3}, {&dx, &dw, &db}),
      "layer_norm_grad: weight has shape [3], expected [4]"));
  Tensor weight4 = randomFloats(rng(), {4}), dw4({4});
  EXPECT_TRUE(contains(runError(Op("rms_norm_grad").real("epsilon", 1e-5),
                                {&dy, &x, &weight4}, {&dx}),
                       "rms_norm_grad: has 2 results, got 1"));
  Tensor y3 = randomFloats(rng(), {2, 3}), d3({2, 3});
  EXPECT_TRUE(contains(
      runError(Op("softmax_grad").ints("axis", {1}), {&dy, &y3}, {&d3}),
      "softmax_grad: y has shape [2, 3], expected [2, 4]"));
  EXPECT_TRUE(contains(runError(Op("gelu_grad"), {&dy, &y3}, {&dx}),
                       "gelu_grad: input has shape [2, 3], expected [2, 4]"));
  Tensor q = randomFloats(rng(), {2, 3}), k = randomFloats(rng(), {4, 3}),
         v = randomFloats(rng(), {4, 5}), dout = randomFloats(rng(), {3, 5});
  Tensor dq({2, 3}), dk({4, 3}), dv({4, 5});
  EXPECT_TRUE(contains(runError(Op("attention_grad").real("scale", 1),
                                {&dout, &q, &k, &v}, {&dq, &dk, &dv}),
                       "attention_grad: dout has shape [3, 5], expected "
                       "[2, 5]"));
  Tensor small({2, 4});
  EXPECT_TRUE(contains(
      runError(Op("slice_grad").ints("starts", {1, 0}).ints("steps", {1, 1}),
               {&dy}, {&small}),
      "slice_grad: dimension 0 writes [1, 2]"));
  Tensor indices = makeIds({3}, {0, 1, 1});
  Tensor data({2, 4});
  EXPECT_TRUE(contains(
      runError(Op("gather_grad").ints("axis", {1}), {&dy, &indices}, {&data}),
      "gather_grad: dy has shape [2, 4], expected [2, 3]"));
  Tensor param = randomFloats(rng(), {4}), grad = randomFloats(rng(), {4}),
         m({4}), v3({3});
  Tensor hyper = hyperOf(1, 1e-3, 0.9, 0.999, 1e-8, 0, 1);
  EXPECT_TRUE(
      contains(runError(Op("adamw"), {&param, &grad, &m, &v3, &hyper}, {}),
               "adamw: v has shape [3], expected [4]"));
  EXPECT_TRUE(contains(runError(Op("sgd"), {&param, &grad, &m, &hyper}, {&m}),
                       "sgd: has 0 results, got 1"));
  Tensor shortHyper = randomFloats(rng(), {7});
  EXPECT_TRUE(
      contains(runError(Op("sgd"), {&param, &grad, &m, &shortHyper}, {}),
               "sgd: hyper has shape [7], expected [8]"));
  // t = 0 would divide by a zero bias correction.
  Tensor stepZero = hyperOf(0, 1e-3, 0.9, 0.999, 1e-8, 0, 1);
  EXPECT_TRUE(
      contains(runError(Op("adamw"), {&param, &grad, &m, &m, &stepZero}, {}),
               "adamw: hyper bias corrections"));
  // Nothing was updated by the refused calls.
  EXPECT_FALSE(allZero(grad.values()));
}

} // namespace
