//===- KernelDiffTest.cpp - every compute kernel against the CPU reference ===//
//
// Every compute opcode of the CPU kernel table (runtime/cpu/Kernels.cpp)
// has cases here: random operands from a fixed seed over several shapes
// (broadcasting, odd sizes, rows longer than one block of threads, rank 4,
// masks, causal attention, ignore_index, repeated indices, in-place
// updates, misaligned views) and a few invalid-data cases that must fail
// on both backends. Each case runs on the CPU reference and on the tested
// backend through the Backend interface (KernelDiff.h) and the two are
// compared element by element.
//
// One source, two binaries:
//  - ZPLAN_KERNEL_DIFF_CUDA=0: the tested backend is a second CpuBackend.
//    Runs everywhere; it proves the harness and that every case is valid
//    input for the reference (a case the CPU refuses fails here).
//  - ZPLAN_KERNEL_DIFF_CUDA=1: the tested backend is CUDA (device 0); every
//    test skips when there is no device.
//
// Tolerances are stated per case, as |tested - reference| <= atol + rtol *
// |reference|: exact for data movement, integers, comparisons and casts;
// 1e-5 relative for elementwise math and for row reductions (norms,
// softmax, losses), which the CPU sums in double and a device may sum in
// float with a tree; 1e-4 relative for GEMM-shaped work (matmul, attention
// and their gradients, weight gradients summed over many rows), whose
// float accumulation order differs by design. f64 cases allow 1e-12.
//
// Grouped-query attention has no kernel of its own: nn.attention takes keys
// and values with the query's leading dimensions, and the importer expands
// them first, so GQA is covered by expand's grouped_keys case and
// attention's rank-5 grouped case.
//
//===----------------------------------------------------------------------===//

#include "test/gpu/KernelDiff.h"

#include "runtime/cpu/CpuBackend.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/plan/Opcodes.h"

#if ZPLAN_KERNEL_DIFF_CUDA
#include "runtime/cuda/CudaBackend.h"
#endif

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>

using namespace zplan;
using namespace zplan::testing;

namespace {

using Shape = std::vector<int64_t>;

constexpr ElementType F32 = ElementType::F32, F64 = ElementType::F64,
                      I64 = ElementType::I64, I32 = ElementType::I32,
                      I8 = ElementType::I8, U8 = ElementType::U8,
                      Bool = ElementType::Bool;

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

//===----------------------------------------------------------------------===//
// The case registry
//===----------------------------------------------------------------------===//

/// One case: its op and variant are known without building it (the
/// coverage test counts them), its tensors are drawn only when it runs.
struct CaseEntry {
  std::string op, variant;
  std::function<void(CaseBuilder &)> fill;

  std::string name() const { return op + "/" + variant; }
  DiffCase make() const {
    CaseBuilder builder(op, variant);
    fill(builder);
    return builder.build();
  }
};

std::vector<CaseEntry> &registry() {
  static std::vector<CaseEntry> entries;
  return entries;
}

void add(std::string op, std::string variant,
         std::function<void(CaseBuilder &)> fill) {
  registry().push_back({std::move(op), std::move(variant), std::move(fill)});
}

std::string typeName(ElementType type) {
  return std::string(elementTypeInfo(type).name);
}

bool isFloat(ElementType type) {
  return type == F32 || type == F64 || type == ElementType::BF16;
}

/// The tolerance of a float case: `rtol`/`atol` for f32, 1e-12 for f64
/// (computed in double on both backends, in different orders); for bf16
/// (computed in f32 and rounded once) one bf16 ulp, 2^-8 relative, where
/// f32 is allowed any difference (a libm ulp can straddle a rounding
/// boundary), else exact.
void floatTolerance(CaseBuilder &c, ElementType type, double rtol,
                    double atol) {
  if (type == F64)
    c.tolerance(1e-12, 1e-13);
  else if (type == F32)
    c.tolerance(rtol, atol);
  else if (type == ElementType::BF16 && rtol > 0)
    c.tolerance(1.0 / 256, atol);
}

/// Random values of `type` across its range: [-3, 3) for floats, every
/// value for the narrow integers, wide ones for i32/i64, with the extremes
/// at the front where there is room (wrapping arithmetic is part of the
/// semantics).
void fullRange(CaseBuilder &c, Shape shape, ElementType type) {
  std::vector<int64_t> extremes;
  switch (type) {
  case ElementType::I64:
    c.uniform(shape, type, -4e18, 4e18);
    extremes = {std::numeric_limits<int64_t>::min(),
                std::numeric_limits<int64_t>::max()};
    break;
  case ElementType::I32:
    c.uniform(shape, type, -2147483648.0, 2147483647.0);
    extremes = {std::numeric_limits<int32_t>::min(),
                std::numeric_limits<int32_t>::max()};
    break;
  case ElementType::I8:
    c.uniform(shape, type, -128, 127);
    extremes = {-128, 127};
    break;
  case ElementType::U8:
    c.uniform(shape, type, 0, 255);
    extremes = {255, 0};
    break;
  default:
    c.uniform(shape, type, -3, 3);
  }
  HostTensor &drawn = c.lastOperand();
  for (size_t i = 0; i < extremes.size() && int64_t(i) < drawn.numElements();
       ++i)
    drawn.setInt(static_cast<int64_t>(i), extremes[i]);
}

/// Indices in [-extent, extent) (negative ones count from the end).
void indices(CaseBuilder &c, Shape shape, ElementType type, int64_t extent) {
  c.uniform(std::move(shape), type, -extent, extent - 1);
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

/// Float specials every unary float op meets: signed zeros, infinities,
/// NaN, tiny and huge magnitudes, exp's overflow edge.
const std::vector<double> kFloatSpecials = {
    0.0,   -0.0, 1.0,   -1.0,  kInf,   -kInf, kNaN, 1e-30, -1e-30, 1e30,
    -1e30, 88.0, -88.0, 100.0, -100.0, 0.5,   -0.5, 1e-8,  3.0,    -3.0};

void addUnaryFloatCases() {
  struct Unary {
    const char *op;
    double low, high;
    const char *approximate; // gelu's attribute, null for none
  };
  const Unary ops[] = {
      {"sqrt", 0.001, 10, nullptr},  {"reciprocal", -4, 4, nullptr},
      {"exp", -8, 8, nullptr},       {"log", 0.001, 10, nullptr},
      {"erf", -4, 4, nullptr},       {"tanh", -6, 6, nullptr},
      {"sigmoid", -10, 10, nullptr}, {"cos", -10, 10, nullptr},
      {"sin", -10, 10, nullptr},     {"silu", -10, 10, nullptr},
      {"gelu", -6, 6, nullptr},      {"gelu", -6, 6, "none"},
      {"gelu", -6, 6, "tanh"},
  };
  for (const Unary &u : ops) {
    std::string prefix = u.approximate ? std::string(u.approximate) + "_" : "";
    auto attributes = [u](CaseBuilder &c) {
      if (u.approximate)
        c.text("approximate", u.approximate);
    };
    // bf16: mixed precision's elementwise ops, computed in f32 and rounded.
    for (ElementType type : {F32, F64, ElementType::BF16}) {
      for (const auto &[label, shape] : {std::pair{"rows", Shape{3, 1500}},
                                         std::pair{"rank4", Shape{2, 3, 5, 7}},
                                         std::pair{"odd", Shape{1031}}}) {
        add(u.op, prefix + label + "_" + typeName(type), [=](CaseBuilder &c) {
          attributes(c);
          c.uniform(shape, type, u.low, u.high).result(shape, type);
          floatTolerance(c, type, 1e-5, 1e-6);
        });
      }
      add(u.op, prefix + "specials_" + typeName(type), [=](CaseBuilder &c) {
        attributes(c);
        Shape shape{static_cast<int64_t>(kFloatSpecials.size())};
        c.values(shape, type, kFloatSpecials).result(shape, type);
        floatTolerance(c, type, 1e-5, 1e-6);
      });
    }
    add(u.op, prefix + "misaligned", [=](CaseBuilder &c) {
      attributes(c);
      c.uniform({1029}, F32, u.low, u.high).result({1029}).misaligned();
      c.tolerance(1e-5, 1e-6);
    });
  }
  // gelu's erfc tail: large negative inputs keep their digits.
  for (ElementType type : {F32, F64})
    add("gelu", "tail_" + typeName(type), [=](CaseBuilder &c) {
      c.uniform({1000}, type, -40, 40).result({1000}, type);
      floatTolerance(c, type, 1e-5, 1e-30);
    });
  for (const char *op : {"exp", "gelu", "neg"}) {
    add(op, "empty", [](CaseBuilder &c) { c.uniform({0, 5}).result({0, 5}); });
    add(op, "scalar", [](CaseBuilder &c) { c.uniform({}).result({}); });
  }
  // More elements than one grid covers: the grid-stride loop's second lap.
  add("exp", "beyond_one_grid", [](CaseBuilder &c) {
    Shape shape{(1 << 22) + 7};
    c.uniform(shape, F32, -8, 8).result(shape).tolerance(1e-5, 1e-6);
  });
}

void addUnaryNumericCases() {
  for (const char *op : {"neg", "abs", "relu"}) {
    for (ElementType type : {F32, F64, ElementType::BF16, I64, I32, I8, U8})
      add(op, "odd_" + typeName(type), [=](CaseBuilder &c) {
        fullRange(c, {1029}, type);
        c.result({1029}, type);
        floatTolerance(c, type, 0, 0);
      });
    add(op, "rank4",
        [=](CaseBuilder &c) { c.uniform({2, 3, 4, 5}).result({2, 3, 4, 5}); });
    add(op, "specials", [=](CaseBuilder &c) {
      Shape shape{static_cast<int64_t>(kFloatSpecials.size())};
      c.values(shape, F32, kFloatSpecials).result(shape);
    });
    add(op, "misaligned_i32", [=](CaseBuilder &c) {
      fullRange(c, {1027}, I32);
      c.result({1027}, I32).misaligned();
    });
  }
}

/// The broadcasting shapes every binary op runs over: (lhs, rhs, result).
struct BroadcastShapes {
  const char *label;
  Shape lhs, rhs, result;
};

const std::vector<BroadcastShapes> &broadcastShapes() {
  static const std::vector<BroadcastShapes> shapes = {
      {"same", {5, 37}, {5, 37}, {5, 37}},
      {"rows", {4, 1100}, {1100}, {4, 1100}},
      {"columns", {6, 1}, {6, 9}, {6, 9}},
      {"outer", {3, 1, 5}, {1, 4, 1}, {3, 4, 5}},
      {"scalar_rhs", {2, 3}, {}, {2, 3}},
      {"scalar_lhs", {}, {7}, {7}},
      {"rank4", {2, 3, 4, 5}, {3, 1, 5}, {2, 3, 4, 5}},
      {"rank4_both", {2, 1, 4, 1}, {1, 3, 1, 5}, {2, 3, 4, 5}},
      {"hidden_both_sides", {2, 1, 64}, {1, 5, 1}, {2, 5, 64}},
  };
  return shapes;
}

/// How a binary op's operands are drawn for one element type.
using BinaryOperands = std::function<void(CaseBuilder &, const Shape &,
                                          const Shape &, ElementType)>;

void addBinaryCases(const char *op, const BinaryOperands &operands,
                    std::vector<ElementType> types) {
  for (const BroadcastShapes &shapes : broadcastShapes())
    add(op, std::string(shapes.label), [=](CaseBuilder &c) {
      operands(c, shapes.lhs, shapes.rhs, F32);
      c.result(shapes.result).tolerance(1e-6, 1e-7);
    });
  for (ElementType type : types)
    add(op, "outer_" + typeName(type), [=](CaseBuilder &c) {
      operands(c, {3, 1, 5}, {1, 4, 1}, type);
      c.result({3, 4, 5}, type);
      floatTolerance(c, type, 1e-6, 1e-7);
    });
  add(op, "empty", [=](CaseBuilder &c) {
    operands(c, {0, 5}, {5}, F32);
    c.result({0, 5});
  });
  add(op, "misaligned", [=](CaseBuilder &c) {
    operands(c, {3, 333}, {3, 333}, F32);
    c.result({3, 333}).misaligned().tolerance(1e-6, 1e-7);
  });
}

void addBinaryCases() {
  const std::vector<ElementType> numbers = {
      F64, ElementType::BF16, I64, I32, I8, U8};
  BinaryOperands fullRanges = [](CaseBuilder &c, const Shape &lhs,
                                 const Shape &rhs, ElementType type) {
    fullRange(c, lhs, type);
    fullRange(c, rhs, type);
  };
  for (const char *op : {"add", "sub", "mul"})
    addBinaryCases(op, fullRanges, numbers);
  add("add", "beyond_one_grid_rows", [](CaseBuilder &c) {
    c.uniform({1100, 1024}).uniform({1024}).result({1100, 1024});
  });
  add("add", "i8_wraps", [](CaseBuilder &c) {
    c.values({4}, I8, {127, -128, 100, -100})
        .values({4}, I8, {1, -1, 100, -100});
    c.result({4}, I8);
  });
  // Arithmetic refuses bool (comparisons take it): the same check on both.
  add("add", "bool_refused", [](CaseBuilder &c) {
    c.uniform({5}, Bool).uniform({5}, Bool).result({5}, Bool).expectError();
  });

  // Divisors: never 0, some -1 against the type's minimum (the one
  // overflowing quotient, which wraps).
  addBinaryCases(
      "div",
      [](CaseBuilder &c, const Shape &lhs, const Shape &rhs, ElementType type) {
        fullRange(c, lhs, type);
        if (isFloat(type)) {
          c.uniform(rhs, type, -3, 3);
          return;
        }
        c.uniform(rhs, type, type == U8 ? 1 : -20, 20);
        HostTensor &divisor = c.lastOperand();
        for (int64_t i = 0; i < divisor.numElements(); ++i)
          if (divisor.getInt(i) == 0)
            divisor.setInt(i, 7);
        if (type != U8)
          divisor.setInt(0, -1);
      },
      numbers);
  add("div", "float_by_zero", [](CaseBuilder &c) {
    c.values({4}, F32, {1, -1, 0, kNaN}).values({4}, F32, {0, 0, 0, 0});
    c.result({4});
  });
  add("div", "int_by_zero", [](CaseBuilder &c) {
    c.uniform({64}, I32, -100, 100).values({64}, I32, {3, -2, 5, 0, 9});
    c.result({64}, I32).expectError();
  });

  addBinaryCases(
      "pow",
      [](CaseBuilder &c, const Shape &lhs, const Shape &rhs, ElementType type) {
        if (isFloat(type)) {
          c.uniform(lhs, type, 0.1, 3).uniform(rhs, type, -3, 3);
        } else if (type == U8) {
          c.uniform(lhs, type, 0, 5).uniform(rhs, type, 0, 9);
        } else {
          c.uniform(lhs, type, -5, 5).uniform(rhs, type, -2, 9);
        }
      },
      numbers);
  add("pow", "specials", [](CaseBuilder &c) {
    c.values({8}, F32, {-2, -2, 0, kNaN, 1, -8, kInf, 0.5})
        .values({8}, F32, {3, 0.5, -1, 0, kNaN, 1.0 / 3, -1, kInf});
    c.result({8}).tolerance(1e-6, 1e-7);
  });

  // max and min propagate NaN.
  BinaryOperands withNaNs = [](CaseBuilder &c, const Shape &lhs,
                               const Shape &rhs, ElementType type) {
    fullRange(c, lhs, type);
    if (isFloat(type) && c.lastOperand().numElements() > 2)
      c.lastOperand().set(1, kNaN);
    fullRange(c, rhs, type);
    if (isFloat(type) && c.lastOperand().numElements() > 3)
      c.lastOperand().set(3, kNaN);
  };
  for (const char *op : {"max", "min"})
    addBinaryCases(op, withNaNs, numbers);
}

void addCompareCases() {
  // Few distinct values, so that equal pairs are common.
  auto operand = [](CaseBuilder &c, const Shape &shape, ElementType type) {
    if (type == Bool) {
      c.uniform(shape, Bool);
      return;
    }
    c.uniform(shape, type, type == U8 ? 0 : -2, 2);
    if (!isFloat(type))
      return;
    HostTensor &drawn = c.lastOperand();
    for (int64_t i = 0; i < drawn.numElements(); ++i)
      drawn.set(i, std::round(drawn.get(i)));
    if (drawn.numElements() > 4) {
      drawn.set(2, kNaN);
      drawn.set(4, kInf);
    }
  };
  for (const char *op : {"equal", "less", "greater"}) {
    for (const BroadcastShapes &shapes : broadcastShapes())
      add(op, shapes.label, [=](CaseBuilder &c) {
        operand(c, shapes.lhs, F32);
        operand(c, shapes.rhs, F32);
        c.result(shapes.result, Bool);
      });
    for (ElementType type : {F64, I64, I32, I8, U8, Bool})
      add(op, "outer_" + typeName(type), [=](CaseBuilder &c) {
        operand(c, {3, 1, 5}, type);
        operand(c, {1, 4, 1}, type);
        c.result({3, 4, 5}, Bool);
      });
  }
}

void addWhereCases() {
  add("where", "rows", [](CaseBuilder &c) {
    c.uniform({4, 1100}, Bool).uniform({4, 1100}).uniform({1100});
    c.result({4, 1100});
  });
  add("where", "scalar_branches", [](CaseBuilder &c) {
    c.uniform({6, 7}, Bool).values({}, F32, {-1e9}).uniform({6, 7});
    c.result({6, 7});
  });
  for (ElementType type : {F64, I64, I32, I8, Bool})
    add("where", "outer_" + typeName(type), [=](CaseBuilder &c) {
      c.uniform({3, 1, 5}, Bool);
      fullRange(c, {1, 4, 1}, type);
      fullRange(c, {}, type);
      c.result({3, 4, 5}, type);
    });
  add("where", "rank4_condition_broadcast", [](CaseBuilder &c) {
    c.uniform({1, 1, 5, 9}, Bool).uniform({2, 3, 5, 9}).uniform({2, 3, 5, 9});
    c.result({2, 3, 5, 9});
  });
  add("where", "misaligned", [](CaseBuilder &c) {
    c.uniform({2, 517}, Bool).uniform({2, 517}).uniform({2, 517});
    c.result({2, 517}).misaligned();
  });
}

void addCastCases() {
  // Float sources meet every saturation edge, NaN (to 0) and truncation.
  const std::vector<double> floatValues = {
      0.0,  -0.0, 0.7,  -0.7, 2.5,   -2.5, 127.9, -128.9, 255.5, 300,
      -300, 3e9,  -3e9, 1e19, -1e19, kInf, -kInf, kNaN,   1e-40, 65504.5};
  const ElementType types[] = {F32, F64, I64, I32, I8, U8, Bool};
  for (ElementType from : types)
    for (ElementType to : types)
      add("cast", typeName(from) + "_to_" + typeName(to), [=](CaseBuilder &c) {
        Shape shape{257};
        if (isFloat(from)) {
          c.uniform(shape, from, -400, 400);
          for (size_t i = 0; i < floatValues.size(); ++i)
            c.lastOperand().set(static_cast<int64_t>(i), floatValues[i]);
        } else if (from == Bool) {
          c.uniform(shape, Bool);
        } else {
          fullRange(c, shape, from);
        }
        c.result(shape, to);
      });
  // Mixed precision (zplan-mixed-precision): f32 <-> bf16 only, rounding to
  // nearest even (ties, overflow, NaN among the values) and widening.
  add("cast", "f32_to_bf16", [=](CaseBuilder &c) {
    c.uniform({257}, F32, -400, 400);
    for (size_t i = 0; i < floatValues.size(); ++i)
      c.lastOperand().set(static_cast<int64_t>(i), floatValues[i]);
    c.lastOperand().set(floatValues.size(), 1.0 + 1.0 / 256);
    c.lastOperand().set(floatValues.size() + 1, 1.0 + 3.0 / 256);
    c.result({257}, ElementType::BF16);
  });
  add("cast", "bf16_to_f32", [](CaseBuilder &c) {
    c.uniform({257}, ElementType::BF16, -400, 400)
        .result({257}, ElementType::F32);
  });
  add("cast", "rank4_f32_to_i32", [](CaseBuilder &c) {
    c.uniform({2, 3, 4, 5}, F32, -100, 100).result({2, 3, 4, 5}, I32);
  });
}

//===----------------------------------------------------------------------===//
// matmul
//===----------------------------------------------------------------------===//

void addMatmulCases() {
  struct Matmul {
    const char *label;
    Shape lhs, rhs, result;
    bool transposeRhs = false;
    std::optional<Shape> bias;
  };
  const Matmul cases[] = {
      {"square", {64, 64}, {64, 64}, {64, 64}},
      {"odd", {33, 70}, {70, 45}, {33, 45}},
      {"transpose_rhs", {17, 96}, {50, 96}, {17, 50}, true},
      {"shared_weight_batch", {2, 5, 64}, {64, 48}, {2, 5, 48}},
      {"linear_bias", {3, 7, 128}, {200, 128}, {3, 7, 200}, true, Shape{200}},
      {"batched_broadcast", {2, 1, 7, 16}, {3, 16, 9}, {2, 3, 7, 9}},
      {"batched", {4, 12, 32}, {4, 32, 20}, {4, 12, 20}},
      {"batched_transposed",
       {2, 3, 9, 32},
       {2, 3, 11, 32},
       {2, 3, 9, 11},
       true},
      {"vector_lhs", {70}, {70, 33}, {33}},
      {"vector_rhs", {5, 3, 70}, {70}, {5, 3}},
      {"vectors", {129}, {129}, {}},
      {"decode_gemv",
       {1, 1, 512},
       {1000, 512},
       {1, 1, 1000},
       true,
       Shape{1000}},
      {"gemv_untransposed", {1, 300}, {300, 257}, {1, 257}},
      {"bias_column", {6, 40}, {40, 8}, {6, 8}, false, Shape{6, 1}},
      {"bias_batched",
       {2, 6, 40},
       {2, 40, 8},
       {2, 6, 8},
       false,
       Shape{2, 6, 8}},
      {"empty_k_bias", {3, 0}, {0, 4}, {3, 4}, false, Shape{4}},
      {"empty_k", {3, 0}, {0, 4}, {3, 4}},
      {"long_k", {4, 4096}, {4096, 3}, {4, 3}},
      {"batches_both_sides", {2, 1, 7, 16}, {1, 3, 16, 9}, {2, 3, 7, 9}},
      {"batches_nonuniform", {2, 1, 3, 5, 8}, {3, 1, 8, 6}, {2, 3, 3, 5, 6}},
      {"empty_m", {0, 5}, {5, 4}, {0, 4}},
      {"empty_n", {3, 5}, {5, 0}, {3, 0}},
      {"vectors_batched_rhs", {16}, {3, 16, 4}, {3, 4}},
      {"tall", {1100, 24}, {24, 70}, {1100, 70}},
  };
  for (const Matmul &m : cases)
    add("matmul", m.label, [m](CaseBuilder &c) {
      if (m.transposeRhs)
        c.ints("transpose_rhs", {1});
      c.uniform(m.lhs).uniform(m.rhs);
      if (m.bias)
        c.uniform(*m.bias);
      c.result(m.result).tolerance(1e-4, 1e-4);
    });
  add("matmul", "f64_bias", [](CaseBuilder &c) {
    c.uniform({20, 30}, F64).uniform({30, 10}, F64).uniform({10}, F64);
    c.result({20, 10}, F64).tolerance(1e-12, 1e-12);
  });
  // Mixed precision: bf16 operands, f32 accumulation, result and bias
  // (cuBLAS's CUDA_R_16BF GemmEx against the CPU's widened SGEMM: the same
  // exact products summed in another order).
  add("matmul", "bf16_linear", [](CaseBuilder &c) {
    c.ints("transpose_rhs", {1}).uniform({2, 16, 64}, ElementType::BF16);
    c.uniform({48, 64}, ElementType::BF16, -0.2, 0.2).uniform({48});
    c.result({2, 16, 48}).tolerance(1e-5, 1e-5);
  });
  add("matmul", "bf16_batched", [](CaseBuilder &c) {
    c.uniform({3, 12, 32}, ElementType::BF16)
        .uniform({3, 32, 20}, ElementType::BF16);
    c.result({3, 12, 20}).tolerance(1e-5, 1e-5);
  });
  add("matmul", "bf16_decode_gemv", [](CaseBuilder &c) {
    c.ints("transpose_rhs", {1}).uniform({1, 1, 512}, ElementType::BF16);
    c.uniform({300, 512}, ElementType::BF16, -0.1, 0.1);
    c.result({1, 1, 300}).tolerance(1e-5, 1e-5);
  });
  // The same with a bf16 result and bias (cuBLAS's 16BF C against the CPU's
  // SGEMM rounded after it): a sum the two orders put on either side of a
  // rounding boundary differs by one bf16 ulp, 2^-8 relative.
  add("matmul", "bf16_rounded_linear", [](CaseBuilder &c) {
    c.ints("transpose_rhs", {1}).uniform({2, 16, 64}, ElementType::BF16);
    c.uniform({48, 64}, ElementType::BF16, -0.2, 0.2)
        .uniform({48}, ElementType::BF16);
    c.result({2, 16, 48}, ElementType::BF16).tolerance(4e-3, 1e-5);
  });
  add("matmul", "bf16_rounded_batched", [](CaseBuilder &c) {
    c.uniform({3, 12, 32}, ElementType::BF16)
        .uniform({3, 32, 20}, ElementType::BF16);
    c.result({3, 12, 20}, ElementType::BF16).tolerance(4e-3, 1e-5);
  });
  add("matmul", "bf16_rounded_decode_gemv", [](CaseBuilder &c) {
    c.ints("transpose_rhs", {1}).uniform({1, 1, 512}, ElementType::BF16);
    c.uniform({300, 512}, ElementType::BF16, -0.1, 0.1);
    c.result({1, 1, 300}, ElementType::BF16).tolerance(4e-3, 1e-5);
  });
  add("matmul", "misaligned", [](CaseBuilder &c) {
    c.ints("transpose_rhs", {1}).uniform({9, 33}).uniform({17, 33});
    c.uniform({17}).result({9, 17}).misaligned().tolerance(1e-4, 1e-4);
  });
}

//===----------------------------------------------------------------------===//
// Attention (nn.attention, attention_grad)
//===----------------------------------------------------------------------===//

/// An additive causal mask [S, T] (a query at row s sees keys up to
/// s + T - S): 0 where visible, -inf elsewhere.
HostTensor causalAdditive(int64_t s, int64_t t) {
  HostTensor mask({s, t}, F32);
  for (int64_t row = 0; row < s; ++row)
    for (int64_t col = 0; col < t; ++col)
      mask.set(row * t + col, col <= row + t - s ? 0.0 : -kInf);
  return mask;
}

/// A select (bool) causal mask [S, T]: true where visible.
HostTensor causalSelect(int64_t s, int64_t t) {
  HostTensor mask({s, t}, Bool);
  for (int64_t row = 0; row < s; ++row)
    for (int64_t col = 0; col < t; ++col)
      mask.setInt(row * t + col, col <= row + t - s);
  return mask;
}

/// One attention configuration, used by both attention and
/// attention_grad.
struct AttentionCase {
  const char *label;
  Shape batch;
  int64_t s, t, d, dv;
  /// Adds the mask operand and its attributes (nothing when null).
  std::function<void(CaseBuilder &, const AttentionCase &)> mask;
  double range = 1; // q and k uniform in [-range, range)
  double scale = 0; // 0: 1/sqrt(D)
};

const std::vector<AttentionCase> &attentionCases() {
  auto additiveCausal = [](CaseBuilder &c, const AttentionCase &a) {
    c.operand(causalAdditive(a.s, a.t));
  };
  auto selectCausalLowest = [](CaseBuilder &c, const AttentionCase &a) {
    c.text("mask_kind", "select")
        .real("masked_value", -std::numeric_limits<float>::max());
    c.operand(causalSelect(a.s, a.t));
  };
  // [B, 1, 1, T] padding: broadcast over heads and rows; the first batch
  // entry's row masks everything (finite masked_value: uniform weights).
  auto selectPadding = [](CaseBuilder &c, const AttentionCase &a) {
    c.text("mask_kind", "select").real("masked_value", -10000.0);
    HostTensor mask({a.batch[0], 1, 1, a.t}, Bool);
    for (int64_t b = 0; b < a.batch[0]; ++b)
      for (int64_t col = 0; col < a.t; ++col)
        mask.setInt(b * a.t + col, b == 0 ? 0 : col < a.t - 3 * b);
    c.operand(std::move(mask));
  };
  // A row masked throughout with -inf: NaN, as the CPU defines it.
  auto selectFullyMaskedInf = [](CaseBuilder &c, const AttentionCase &a) {
    c.text("mask_kind", "select").real("masked_value", -kInf);
    HostTensor mask = causalSelect(a.s, a.t);
    for (int64_t col = 0; col < a.t; ++col)
      mask.setInt(2 * a.t + col, 0);
    c.operand(std::move(mask));
  };
  // An additive mask [T] over the keys, broadcast to every row and head.
  auto additiveKeys = [](CaseBuilder &c, const AttentionCase &a) {
    c.uniform({a.t}, F32, -3, 0);
  };
  // Additive -inf over a whole row: NaN, as the CPU defines it.
  auto additiveRowMasked = [](CaseBuilder &c, const AttentionCase &a) {
    HostTensor mask = causalAdditive(a.s, a.t);
    for (int64_t col = 0; col < a.t; ++col)
      mask.set(a.t + col, -kInf);
    c.operand(std::move(mask));
  };
  // Row s sees only keys >= 64 + s: an online softmax starts from a tile
  // that is masked throughout.
  auto selectFirstTile = [](CaseBuilder &c, const AttentionCase &a) {
    c.text("mask_kind", "select").real("masked_value", -kInf);
    HostTensor mask({a.s, a.t}, Bool);
    for (int64_t row = 0; row < a.s; ++row)
      for (int64_t col = 0; col < a.t; ++col)
        mask.setInt(row * a.t + col, col >= 64 + row);
    c.operand(std::move(mask));
  };
  // An additive bias [B, 1, S, T] broadcast over heads.
  auto additiveBias = [](CaseBuilder &c, const AttentionCase &a) {
    c.uniform({a.batch[0], 1, a.s, a.t}, F32, -2, 2);
  };
  static const std::vector<AttentionCase> cases = {
      {"no_mask", {2, 3}, 17, 40, 32, 32, nullptr},
      {"value_width_rank3", {2}, 16, 23, 16, 24, nullptr},
      {"rank2", {}, 9, 13, 8, 5, nullptr},
      {"grouped_rank5", {2, 2, 3}, 5, 9, 16, 16, nullptr},
      {"causal_additive", {2, 4}, 33, 33, 64, 64, additiveCausal},
      {"causal_offset", {1, 2}, 5, 37, 32, 32, additiveCausal},
      {"causal_select_lowest", {2, 2}, 19, 19, 32, 32, selectCausalLowest},
      {"padding_select", {3, 2}, 6, 21, 16, 16, selectPadding},
      {"fully_masked_inf", {1, 2}, 8, 8, 16, 16, selectFullyMaskedInf},
      {"additive_bias", {2, 3}, 7, 29, 32, 32, additiveBias},
      {"long_keys", {1, 2}, 3, 1500, 64, 64, nullptr},
      {"long_causal", {1, 1}, 1100, 1100, 64, 64, additiveCausal},
      {"head_dim_128", {1, 2}, 70, 70, 128, 128, additiveCausal},
      {"large_scores", {1, 2}, 12, 40, 64, 64, nullptr, 3},
      {"scale_10", {1, 2}, 9, 70, 32, 32, additiveCausal, 1, 10},
      {"one_query_65_keys", {2, 2}, 1, 65, 64, 64, nullptr},
      {"tiles_63_130", {1, 2}, 63, 130, 64, 64, additiveCausal},
      {"wide_heads", {1, 2}, 20, 33, 160, 257, nullptr},
      {"head_dim_0", {1, 2}, 5, 7, 0, 16, nullptr},
      {"no_queries", {1, 2}, 0, 7, 16, 16, nullptr},
      {"value_width_0", {1, 2}, 5, 7, 16, 0, nullptr},
      {"empty_keys", {1, 2}, 4, 0, 8, 8, nullptr},
      {"mask_over_keys", {2, 2}, 6, 45, 16, 16, additiveKeys},
      {"additive_fully_masked", {1, 2}, 6, 20, 16, 16, additiveRowMasked},
      {"first_tile_masked", {1, 1}, 8, 200, 32, 32, selectFirstTile},
  };
  return cases;
}

/// `inputs`: the types of q, k and v (bf16 ones are mixed precision's,
/// widened as the kernels read them; the results stay f32).
void fillAttention(CaseBuilder &c, const AttentionCase &a, bool gradient,
                   std::array<ElementType, 3> inputs = {F32, F32, F32}) {
  auto shape = [&](int64_t rows, int64_t width) {
    Shape result = a.batch;
    result.insert(result.end(), {rows, width});
    return result;
  };
  c.real("scale",
         a.scale
             ? a.scale
             : 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(a.d, 1))));
  if (gradient)
    c.uniform(shape(a.s, a.dv));
  c.uniform(shape(a.s, a.d), inputs[0], -a.range, a.range)
      .uniform(shape(a.t, a.d), inputs[1], -a.range, a.range)
      .uniform(shape(a.t, a.dv), inputs[2]);
  if (a.mask)
    a.mask(c, a);
  if (gradient)
    c.result(shape(a.s, a.d)).result(shape(a.t, a.d)).result(shape(a.t, a.dv));
  else
    c.result(shape(a.s, a.dv));
  c.tolerance(1e-4, 2e-5);
}

void addAttentionCases() {
  for (const AttentionCase &a : attentionCases()) {
    add("attention", a.label,
        [a](CaseBuilder &c) { fillAttention(c, a, /*gradient=*/false); });
    add("attention_grad", a.label,
        [a](CaseBuilder &c) { fillAttention(c, a, /*gradient=*/true); });
  }
  add("attention", "misaligned", [](CaseBuilder &c) {
    fillAttention(c, attentionCases()[0], false);
    c.misaligned();
  });
  // Mixed precision: GPT-2's q, k and v are bf16 views of one projection;
  // Llama's value is bf16 (its q and k leave the rotary products f32).
  const ElementType bf16 = ElementType::BF16;
  const std::pair<const char *, std::array<ElementType, 3>> inputs[] = {
      {"bf16_qkv_", {bf16, bf16, bf16}}, {"bf16_value_", {F32, F32, bf16}}};
  for (const auto &[prefix, types] : inputs)
    for (size_t i : {size_t(0), size_t(4), size_t(12)}) {
      const AttentionCase &a = attentionCases()[i];
      std::string label = prefix + std::string(a.label);
      for (bool gradient : {false, true})
        add(gradient ? "attention_grad" : "attention", label,
            [a, gradient, types = types](CaseBuilder &c) {
              fillAttention(c, a, gradient, types);
            });
    }
}

//===----------------------------------------------------------------------===//
// The KV cache (cache_append, cached_attention)
//===----------------------------------------------------------------------===//

/// Positions [B, S]: row b's tokens at `first[b]`, `first[b] + 1`, ...
HostTensor consecutivePositions(const std::vector<int64_t> &first,
                                int64_t sequence, ElementType type) {
  int64_t batch = static_cast<int64_t>(first.size());
  HostTensor positions({batch, sequence}, type);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < sequence; ++s)
      positions.setInt(b * sequence + s, first[b] + s);
  return positions;
}

void addCacheAppendCases() {
  struct Append {
    const char *label;
    int64_t batch, heads, slots, width, sequence;
    ElementType type, positionType;
    std::vector<int64_t> first;
  };
  const Append cases[] = {
      {"decode", 3, 4, 16, 64, 1, F32, I64, {0, 7, 15}},
      {"prefill_i32", 2, 2, 32, 16, 5, F32, I32, {0, 8}},
      {"f64", 2, 3, 8, 24, 2, F64, I64, {6, 1}},
      {"wide_rows", 1, 2, 9, 1100, 3, F32, I64, {4}},
  };
  for (const Append &a : cases)
    add("cache_append", a.label, [a](CaseBuilder &c) {
      c.uniform({a.batch, a.heads, a.slots, a.width}, a.type)
          .uniform({a.batch, a.heads, a.sequence, a.width}, a.type)
          .operand(consecutivePositions(a.first, a.sequence, a.positionType))
          .resultAliasing(0);
    });
  // Distinct but unordered positions per row.
  add("cache_append", "scattered", [](CaseBuilder &c) {
    c.uniform({2, 2, 12, 8}).uniform({2, 2, 4, 8});
    c.values({2, 4}, I64, {9, 2, 11, 0, 5, 3, 10, 7}).resultAliasing(0);
  });
  add("cache_append", "misaligned", [](CaseBuilder &c) {
    c.uniform({2, 3, 10, 33}).uniform({2, 3, 1, 33});
    c.values({2, 1}, I64, {3, 9}).resultAliasing(0).misaligned();
  });
  add("cache_append", "position_out_of_range", [](CaseBuilder &c) {
    c.uniform({2, 2, 8, 4}).uniform({2, 2, 1, 4});
    c.values({2, 1}, I64, {3, 8}).resultAliasing(0).expectError();
  });
}

void addCachedAttentionCases() {
  struct Cached {
    const char *label;
    int64_t batch, heads, sequence, slots, width, valueWidth;
    ElementType positionType;
    std::vector<int64_t> first;
  };
  const Cached cases[] = {
      {"decode", 3, 4, 1, 64, 64, 64, I64, {0, 17, 63}},
      {"prefill", 2, 2, 7, 32, 32, 32, I64, {0, 10}},
      {"long_cache", 2, 2, 1, 2048, 128, 128, I64, {2047, 1500}},
      {"value_width_i32", 2, 3, 2, 40, 64, 40, I32, {5, 30}},
      {"prefill_short_rows", 2, 2, 3, 50, 32, 32, I64, {0, 20}},
      {"head_dim_odd", 1, 3, 1, 33, 72, 72, I64, {32}},
      {"cache_4100", 2, 1, 1, 4100, 64, 64, I64, {4099, 2500}},
      {"prefill_long", 1, 2, 5, 3000, 64, 32, I32, {2100}},
  };
  for (const Cached &a : cases)
    add("cached_attention", a.label, [a](CaseBuilder &c) {
      c.real("scale", 1.0 / std::sqrt(static_cast<double>(a.width)));
      c.uniform({a.batch, a.heads, a.sequence, a.width}, F32, -2, 2)
          .uniform({a.batch, a.heads, a.slots, a.width}, F32, -2, 2)
          .uniform({a.batch, a.heads, a.slots, a.valueWidth});
      c.operand(consecutivePositions(a.first, a.sequence, a.positionType));
      // Every slot past a row's last position holds non-finite values (a
      // longer earlier sequence's, or garbage): the CPU never reads them,
      // and a kernel that does (even times a zero weight) turns NaN.
      for (int64_t b = 0; b < a.batch; ++b) {
        int64_t lastSeen = a.first[b] + a.sequence - 1;
        for (int64_t h = 0; h < a.heads; ++h)
          for (int64_t slot = lastSeen + 1; slot < a.slots; ++slot) {
            int64_t row = (b * a.heads + h) * a.slots + slot;
            for (int64_t i = 0; i < a.width; ++i)
              c.operandAt(1).set(row * a.width + i, kNaN);
            for (int64_t i = 0; i < a.valueWidth; ++i)
              c.operandAt(2).set(row * a.valueWidth + i, kInf);
          }
      }
      c.result({a.batch, a.heads, a.sequence, a.valueWidth});
      c.tolerance(1e-4, 2e-5);
    });
  add("cached_attention", "unordered_positions", [](CaseBuilder &c) {
    c.real("scale", 0.25).uniform({2, 2, 3, 16}).uniform({2, 2, 12, 16});
    c.uniform({2, 2, 12, 16}).values({2, 3}, I64, {5, 2, 9, 11, 0, 6});
    c.result({2, 2, 3, 16}).tolerance(1e-4, 2e-5);
  });
  // Mixed precision: a bf16 cache, widened as it is read (decode: one
  // query per row; prefill: several, unordered).
  add("cached_attention", "bf16_cache_decode", [](CaseBuilder &c) {
    c.real("scale", 0.25).uniform({3, 4, 1, 16});
    c.uniform({3, 4, 40, 16}, ElementType::BF16, -2, 2)
        .uniform({3, 4, 40, 24}, ElementType::BF16, -1, 1);
    c.values({3, 1}, I64, {39, 0, 17});
    c.result({3, 4, 1, 24}).tolerance(1e-4, 2e-5);
  });
  add("cached_attention", "bf16_cache_prefill", [](CaseBuilder &c) {
    c.real("scale", 0.25).uniform({2, 2, 3, 16});
    c.uniform({2, 2, 12, 16}, ElementType::BF16, -2, 2)
        .uniform({2, 2, 12, 16}, ElementType::BF16);
    c.values({2, 3}, I32, {5, 2, 9, 11, 0, 6});
    c.result({2, 2, 3, 16}).tolerance(1e-4, 2e-5);
  });
  add("cache_append", "bf16_cache", [](CaseBuilder &c) {
    c.uniform({2, 3, 10, 8}, ElementType::BF16)
        .uniform({2, 3, 2, 8}, ElementType::BF16)
        .values({2, 2}, I64, {4, 5, 0, 9})
        .resultAliasing(0);
  });
  add("cached_attention", "position_out_of_range", [](CaseBuilder &c) {
    c.real("scale", 0.25).uniform({2, 1, 1, 8}).uniform({2, 1, 6, 8});
    c.uniform({2, 1, 6, 8}).values({2, 1}, I64, {2, 6});
    c.result({2, 1, 1, 8}).expectError();
  });
}

//===----------------------------------------------------------------------===//
// Normalization: layer_norm, rms_norm, softmax and their gradients
//===----------------------------------------------------------------------===//

void addLayerNormCases() {
  struct LayerNorm {
    const char *label;
    Shape input;
    int64_t axis;
    /// operandSegmentSizes (input, weight, bias); empty: not written.
    std::vector<int64_t> segments;
    ElementType type = F32;
    double mean = 0; // the rows' offset (cancellation in the variance)
  };
  const LayerNorm cases[] = {
      {"weight_bias", {4, 1536}, -1, {1, 1, 1}},
      {"no_segments", {5, 96}, -1, {}},
      {"plain", {7, 100}, 1, {1, 0, 0}},
      {"weight_only", {6, 80}, -1, {1, 1, 0}},
      {"bias_only", {6, 80}, -1, {1, 0, 1}},
      {"two_axes", {3, 5, 64}, 1, {1, 1, 1}},
      {"wide_row", {2, 5000}, -1, {1, 1, 1}},
      {"rank4", {2, 3, 4, 40}, 3, {1, 1, 1}},
      {"single_column", {5, 1}, -1, {1, 1, 1}},
      {"f64", {4, 300}, -1, {1, 1, 1}, F64},
      {"far_from_zero", {4, 512}, -1, {1, 1, 1}, F32, 1000},
      {"axis0_one_row", {4, 6}, 0, {1, 1, 1}},
      {"width_1024", {3, 1024}, -1, {1, 1, 1}},
      {"width_1025", {3, 1025}, -1, {1, 1, 1}},
      {"no_rows", {0, 16}, -1, {1, 1, 1}},
      {"many_narrow_rows", {5000, 8}, -1, {1, 1, 1}},
  };
  for (const LayerNorm &n : cases)
    add("layer_norm", n.label, [n](CaseBuilder &c) {
      size_t axis = n.axis < 0 ? n.input.size() + n.axis : n.axis;
      Shape normalized(n.input.begin() + axis, n.input.end());
      c.ints("axis", {n.axis}).real("epsilon", 1e-5);
      bool weight = n.segments.empty() || n.segments[1];
      bool bias = n.segments.empty() || n.segments[2];
      if (!n.segments.empty())
        c.ints("operandSegmentSizes", n.segments);
      c.uniform(n.input, n.type, n.mean - 1, n.mean + 1);
      if (weight)
        c.uniform(normalized, n.type, 0.5, 1.5);
      if (bias)
        c.uniform(normalized, n.type);
      c.result(n.input, n.type);
      // Rows far from zero: a float mean is off by ~1e-7 of the offset,
      // which moves every output by that over the row's deviation (~3e-4
      // here); E[x^2] - mean^2 in float would be off by percents.
      floatTolerance(c, n.type, n.mean ? 1e-3 : 1e-5, n.mean ? 1e-3 : 1e-5);
    });
  add("layer_norm", "misaligned", [](CaseBuilder &c) {
    c.ints("axis", {-1}).real("epsilon", 1e-6).uniform({3, 257});
    c.uniform({257}).uniform({257}).result({3, 257});
    c.misaligned().tolerance(1e-5, 1e-5);
  });
}

void addRmsNormCases() {
  struct RmsNorm {
    const char *label;
    Shape input;
    bool weight;
    ElementType type = F32;
  };
  const RmsNorm cases[] = {
      {"weight", {6, 2048}, true},
      {"no_weight", {3, 17}, false},
      {"rank4", {2, 2, 3, 96}, true},
      {"wide_row", {2, 6000}, true},
      {"f64", {4, 300}, true, F64},
      {"single_row", {1, 4096}, true},
      {"width_1025", {3, 1025}, true},
      {"no_rows", {0, 16}, true},
      {"many_narrow_rows", {5000, 8}, false},
  };
  for (const RmsNorm &n : cases)
    add("rms_norm", n.label, [n](CaseBuilder &c) {
      c.real("epsilon", 1e-6).uniform(n.input, n.type);
      if (n.weight)
        c.uniform({n.input.back()}, n.type, 0.5, 1.5);
      c.result(n.input, n.type);
      floatTolerance(c, n.type, 1e-5, 1e-5);
    });
  add("rms_norm", "misaligned", [](CaseBuilder &c) {
    c.real("epsilon", 1e-6).uniform({3, 259}).uniform({259});
    c.result({3, 259}).misaligned().tolerance(1e-5, 1e-5);
  });
}

void addSoftmaxCases() {
  struct Softmax {
    const char *label;
    Shape shape;
    int64_t axis;
    double range = 3;
    ElementType type = F32;
  };
  const Softmax cases[] = {
      {"last_axis", {5, 1500}, -1},         {"middle_axis", {4, 7, 9}, 1},
      {"first_axis", {6, 33}, 0},           {"rank4", {2, 3, 5, 70}, 3},
      {"large_values", {4, 300}, -1, 1000}, {"vocab_row", {3, 50257}, -1},
      {"f64", {5, 200}, -1, 3, F64},        {"single", {7, 1}, -1},
  };
  for (const Softmax &s : cases)
    add("softmax", s.label, [s](CaseBuilder &c) {
      c.ints("axis", {s.axis}).uniform(s.shape, s.type, -s.range, s.range);
      c.result(s.shape, s.type);
      floatTolerance(c, s.type, 1e-5, 1e-9);
    });
  // -inf entries (a mask), and a row that is -inf throughout (NaN).
  add("softmax", "masked_rows", [](CaseBuilder &c) {
    c.ints("axis", {-1}).uniform({4, 50});
    for (int64_t col = 0; col < 50; ++col) {
      c.lastOperand().set(50 + col, col % 3 ? -kInf : 0.5);
      c.lastOperand().set(150 + col, -kInf);
    }
    c.result({4, 50}).tolerance(1e-5, 1e-9);
  });
  // A NaN in a row, +inf in another: NaN rows on the CPU.
  add("softmax", "nan_and_inf", [](CaseBuilder &c) {
    c.ints("axis", {-1}).uniform({3, 40});
    c.lastOperand().set(7, kNaN);
    c.lastOperand().set(41, kInf);
    c.result({3, 40}).tolerance(1e-5, 1e-9);
  });
  add("softmax", "empty_lines", [](CaseBuilder &c) {
    c.ints("axis", {1}).uniform({0, 5}).result({0, 5});
  });
}

void addNormalizationGradCases() {
  struct NormGrad {
    const char *label;
    Shape input;
    int64_t axis;
    ElementType type = F32;
  };
  const NormGrad cases[] = {
      {"rows", {64, 256}, -1},       {"two_axes", {4, 3, 32}, 1},
      {"wide_row", {3, 5000}, -1},   {"many_rows", {2048, 64}, -1},
      {"f64", {16, 100}, -1, F64},   {"rank4", {2, 3, 4, 40}, -1},
      {"no_rows", {0, 16}, -1},      {"one_row", {1, 300}, -1},
      {"rows_17", {17, 300}, -1},    {"rows_3000", {3000, 300}, -1},
      {"width_1500", {5, 1500}, -1},
  };
  for (const NormGrad &n : cases) {
    size_t axis = n.axis < 0 ? n.input.size() + n.axis : n.axis;
    Shape weight(n.input.begin() + axis, n.input.end());
    // Weight gradients sum over every row: GEMM-like accumulation.
    add("layer_norm_grad", n.label, [n, weight](CaseBuilder &c) {
      c.ints("axis", {n.axis}).real("epsilon", 1e-5);
      c.uniform(n.input, n.type).uniform(n.input, n.type);
      c.uniform(weight, n.type, 0.5, 1.5);
      c.result(n.input, n.type).result(weight, n.type).result(weight, n.type);
      floatTolerance(c, n.type, 1e-4, 1e-4);
    });
    if (n.axis != -1)
      continue; // rms_norm normalises the last axis only
    add("rms_norm_grad", n.label, [n](CaseBuilder &c) {
      Shape weight{n.input.back()};
      c.real("epsilon", 1e-6);
      c.uniform(n.input, n.type).uniform(n.input, n.type);
      c.uniform(weight, n.type, 0.5, 1.5);
      c.result(n.input, n.type).result(weight, n.type);
      floatTolerance(c, n.type, 1e-4, 1e-4);
    });
  }

  struct SoftmaxGrad {
    const char *label;
    Shape shape;
    int64_t axis;
    ElementType type = F32;
  };
  const SoftmaxGrad softmaxCases[] = {
      {"last_axis", {5, 1500}, -1}, {"middle_axis", {4, 7, 9}, 1},
      {"first_axis", {6, 33}, 0},   {"f64", {5, 200}, -1, F64},
      {"rank4", {2, 3, 5, 70}, 3},
  };
  for (const SoftmaxGrad &s : softmaxCases)
    add("softmax_grad", s.label, [s](CaseBuilder &c) {
      c.ints("axis", {s.axis}).uniform(s.shape, s.type);
      c.uniform(s.shape, s.type, 0, 1).result(s.shape, s.type);
      floatTolerance(c, s.type, 1e-5, 1e-7);
    });

  for (const char *approximate : {"none", "tanh"}) {
    for (ElementType type : {F32, F64})
      add("gelu_grad", std::string(approximate) + "_" + typeName(type),
          [=](CaseBuilder &c) {
            c.text("approximate", approximate);
            c.uniform({3, 1500}, type).uniform({3, 1500}, type, -6, 6);
            c.result({3, 1500}, type);
            floatTolerance(c, type, 1e-5, 1e-6);
          });
    add("gelu_grad", std::string(approximate) + "_specials",
        [=](CaseBuilder &c) {
          Shape shape{static_cast<int64_t>(kFloatSpecials.size())};
          c.text("approximate", approximate).uniform(shape);
          c.values(shape, F32, kFloatSpecials).result(shape);
          c.tolerance(1e-5, 1e-6);
        });
  }
  for (ElementType type : {F32, F64})
    add("gelu_grad", "tail_" + typeName(type), [=](CaseBuilder &c) {
      c.uniform({1000}, type).uniform({1000}, type, -40, 40);
      c.result({1000}, type);
      floatTolerance(c, type, 1e-5, 1e-30);
    });
  add("gelu_grad", "empty",
      [](CaseBuilder &c) { c.uniform({0}).uniform({0}).result({0}); });
  add("gelu_grad", "default_rank4_misaligned", [](CaseBuilder &c) {
    c.uniform({2, 3, 4, 45}).uniform({2, 3, 4, 45}, F32, -6, 6);
    c.result({2, 3, 4, 45}).misaligned().tolerance(1e-5, 1e-6);
  });
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

void addReductionCases() {
  struct Reduce {
    const char *label;
    Shape input;
    std::vector<int64_t> axes;
    bool keepdims;
  };
  const Reduce shapes[] = {
      {"inner_axis", {3, 4, 5}, {1}, true},
      {"outer_axes", {3, 4, 5}, {0, 2}, false},
      {"all_axes", {6, 7, 8}, {0, 1, 2}, false},
      {"no_axes", {4, 5}, {}, true},
      {"long_row", {4, 5000}, {1}, false},
      {"long_column", {5000, 3}, {0}, false},
      {"rank4_mixed", {2, 3, 4, 5}, {1, 3}, true},
      {"empty_axis", {3, 0}, {1}, false},
      {"single_output", {64, 1024}, {0, 1}, false},
      {"bias_gradient", {4, 33, 300}, {0, 1}, false},
      {"middle_axis", {5, 300, 7}, {1}, true},
  };
  auto resultShape = [](const Reduce &r) {
    Shape result;
    for (size_t d = 0; d < r.input.size(); ++d) {
      bool reduced = std::find(r.axes.begin(), r.axes.end(),
                               static_cast<int64_t>(d)) != r.axes.end();
      if (!reduced)
        result.push_back(r.input[d]);
      else if (r.keepdims)
        result.push_back(1);
    }
    return result;
  };
  for (const char *op : {"reduce_mean", "reduce_sum", "reduce_max"}) {
    for (const Reduce &r : shapes)
      add(op, r.label, [=](CaseBuilder &c) {
        c.ints("axes", r.axes).ints("keepdims", {r.keepdims});
        c.uniform(r.input).result(resultShape(r)).tolerance(1e-5, 1e-5);
      });
    // Integers wrap (sums) and truncate (means): exact.
    for (ElementType type : {F64, I64, I32, I8, U8})
      add(op, "long_row_" + typeName(type), [=](CaseBuilder &c) {
        c.ints("axes", {1}).ints("keepdims", {0});
        fullRange(c, {3, 1500}, type);
        c.result({3}, type);
        floatTolerance(c, type, 0, 0);
      });
    add(op, "nan", [=](CaseBuilder &c) {
      c.ints("axes", {1}).ints("keepdims", {1}).uniform({3, 40});
      c.lastOperand().set(45, kNaN);
      c.result({3, 1}).tolerance(1e-5, 1e-5);
    });
  }
}

//===----------------------------------------------------------------------===//
// Data movement and its gradients
//===----------------------------------------------------------------------===//

void addTransposeCases() {
  struct Transpose {
    const char *label;
    Shape input;
    std::vector<int64_t> perm;
    ElementType type = F32;
  };
  const Transpose cases[] = {
      {"matrix", {33, 1050}, {1, 0}},
      {"heads", {2, 17, 4, 32}, {0, 2, 1, 3}},
      {"rank4_general", {2, 3, 4, 5}, {3, 1, 0, 2}},
      {"identity", {5, 6}, {0, 1}},
      {"rank1", {7}, {0}},
      {"large", {1029, 1027}, {1, 0}},
      {"f64", {30, 40}, {1, 0}, F64},
      {"i8", {31, 67}, {1, 0}, I8},
      {"bool", {9, 5, 3}, {2, 0, 1}, Bool},
      {"i32_rank3", {4, 5, 6}, {2, 0, 1}, I32},
      {"i64", {7, 3, 2}, {1, 2, 0}, I64},
  };
  for (const Transpose &t : cases)
    add("transpose", t.label, [t](CaseBuilder &c) {
      Shape result;
      for (int64_t axis : t.perm)
        result.push_back(t.input[axis]);
      c.ints("perm", t.perm);
      fullRange(c, t.input, t.type);
      c.result(result, t.type);
    });
}

/// A slice: the input, starts and steps per dimension, and the sliced
/// shape (every position inside the input).
struct SliceCase {
  const char *label;
  Shape input;
  std::vector<int64_t> starts, steps;
  Shape sliced;
  ElementType type = F32;
};

const std::vector<SliceCase> &sliceCases() {
  static const std::vector<SliceCase> cases = {
      {"steps", {10, 2000}, {2, 5}, {3, 7}, {3, 285}},
      {"negative_steps", {10, 2000}, {9, 1999}, {-2, -3}, {5, 667}},
      {"last_dim_split", {4, 6, 64}, {1, 0, 32}, {1, 1, 1}, {2, 6, 32}},
      {"rank4", {2, 3, 4, 5}, {1, 0, 1, 0}, {1, 2, 2, 1}, {1, 2, 2, 5}},
      {"i64", {8, 9}, {1, 2}, {2, 3}, {4, 3}, I64},
      {"bool", {8, 9}, {7, 0}, {-1, 4}, {8, 3}, Bool},
      {"i8", {5, 70}, {0, 3}, {2, 5}, {3, 14}, I8},
      {"empty", {3, 5}, {0, 0}, {1, 1}, {0, 5}},
  };
  return cases;
}

void addSliceCases() {
  for (const SliceCase &s : sliceCases()) {
    add("slice", s.label, [s](CaseBuilder &c) {
      c.ints("starts", s.starts).ints("steps", s.steps);
      fullRange(c, s.input, s.type);
      c.result(s.sliced, s.type);
    });
    add("slice_grad", s.label, [s](CaseBuilder &c) {
      c.ints("starts", s.starts).ints("steps", s.steps);
      fullRange(c, s.sliced, s.type);
      c.result(s.input, s.type);
    });
  }
}

void addConcatCases() {
  struct Concat {
    const char *label;
    std::vector<Shape> inputs;
    int64_t axis;
    ElementType type = F32;
  };
  const Concat cases[] = {
      {"last_axis", {{4, 3}, {4, 5}, {4, 1}}, -1},
      {"first_axis", {{2, 7}, {5, 7}}, 0},
      {"middle_axis", {{2, 3, 4}, {2, 1, 4}, {2, 6, 4}}, 1},
      {"wide_f64", {{2, 1100}, {2, 1300}}, 1, F64},
      {"i32", {{3, 2}, {3, 9}}, 1, I32},
      {"bool", {{5}, {2}, {9}}, 0, Bool},
      {"single_input", {{3, 4}}, 0},
      {"empty_input", {{3, 0}, {3, 4}}, 1},
      {"rank4_heads", {{2, 2, 3, 8}, {2, 2, 5, 8}}, 2},
  };
  for (const Concat &k : cases)
    add("concat", k.label, [k](CaseBuilder &c) {
      size_t axis = k.axis < 0 ? k.inputs[0].size() + k.axis : k.axis;
      Shape result = k.inputs[0];
      result[axis] = 0;
      c.ints("axis", {k.axis});
      for (const Shape &input : k.inputs) {
        fullRange(c, input, k.type);
        result[axis] += input[axis];
      }
      c.result(result, k.type);
    });
}

/// One gather: data [...], indices along `axis`.
struct GatherCase {
  const char *label;
  Shape data;
  Shape indices;
  int64_t axis;
  ElementType indexType = I64;
  ElementType type = F32;
  /// Draw indices in [0, repeatRange) only: many repeats (the gradient
  /// accumulates them).
  int64_t repeatRange = 0;
};

Shape gatheredShape(const GatherCase &g) {
  size_t axis = g.axis < 0 ? g.data.size() + g.axis : g.axis;
  Shape result(g.data.begin(), g.data.begin() + axis);
  result.insert(result.end(), g.indices.begin(), g.indices.end());
  result.insert(result.end(), g.data.begin() + axis + 1, g.data.end());
  return result;
}

void addGatherCases() {
  const GatherCase cases[] = {
      {"axis0", {50, 33}, {4, 3}, 0},
      {"axis1_i32", {3, 40, 5}, {7}, 1, I32},
      {"scalar_index", {10, 20}, {}, 0},
      {"last_axis", {6, 30}, {4}, -1},
      {"f64", {12, 1030}, {5}, 0, I64, F64},
      {"i8", {9, 7}, {3, 2}, 1, I32, I8},
      {"repeated", {10, 64}, {40}, 0, I64, F32, 3},
  };
  for (const GatherCase &g : cases) {
    size_t axis = g.axis < 0 ? g.data.size() + g.axis : g.axis;
    int64_t extent = g.data[axis];
    add("gather", g.label, [=](CaseBuilder &c) {
      c.ints("axis", {g.axis});
      fullRange(c, g.data, g.type);
      if (g.repeatRange)
        c.uniform(g.indices, g.indexType, 0, g.repeatRange - 1);
      else
        indices(c, g.indices, g.indexType, extent);
      c.result(gatheredShape(g), g.type);
    });
    if (!isFloat(g.type))
      continue; // gather_grad takes float gradients
    add("gather_grad", g.label, [=](CaseBuilder &c) {
      c.ints("axis", {g.axis});
      c.uniform(gatheredShape(g), g.type);
      if (g.repeatRange)
        c.uniform(g.indices, g.indexType, 0, g.repeatRange - 1);
      else
        indices(c, g.indices, g.indexType, extent);
      c.result(g.data, g.type);
      floatTolerance(c, g.type, 1e-5, 1e-6);
    });
  }
  add("gather", "index_out_of_range", [](CaseBuilder &c) {
    c.ints("axis", {0}).uniform({5, 4}).values({3}, I64, {1, 5, 0});
    c.result({3, 4}).expectError();
  });
  add("gather_grad", "index_out_of_range", [](CaseBuilder &c) {
    c.ints("axis", {0}).uniform({3, 4}).values({3}, I64, {1, -6, 0});
    c.result({5, 4}).expectError();
  });
}

void addEmbeddingCases() {
  struct Embedding {
    const char *label;
    int64_t rows, width;
    Shape ids;
    ElementType idType = I64;
    ElementType type = F32;
    int64_t repeatRange = 0;
  };
  const Embedding cases[] = {
      {"tokens", 1000, 96, {2, 17}},
      {"wide_i32", 50, 1030, {9}, I32},
      {"f64", 30, 20, {3, 4}, I64, F64},
      {"i32_table", 20, 7, {11}, I32, I32},
      {"repeated", 20, 64, {3, 40}, I64, F32, 4},
      {"single_id", 8, 16, {}, I64},
  };
  for (const Embedding &e : cases) {
    Shape gathered = e.ids;
    gathered.push_back(e.width);
    auto drawIds = [e](CaseBuilder &c) {
      if (e.repeatRange)
        c.uniform(e.ids, e.idType, 0, e.repeatRange - 1);
      else
        indices(c, e.ids, e.idType, e.rows);
    };
    add("embedding", e.label, [=](CaseBuilder &c) {
      fullRange(c, {e.rows, e.width}, e.type);
      drawIds(c);
      c.result(gathered, e.type);
    });
    if (!isFloat(e.type))
      continue;
    add("embedding_grad", e.label, [=](CaseBuilder &c) {
      c.uniform(gathered, e.type);
      drawIds(c);
      c.result({e.rows, e.width}, e.type);
      floatTolerance(c, e.type, 1e-5, 1e-6);
    });
  }
  add("embedding", "id_out_of_range", [](CaseBuilder &c) {
    c.uniform({6, 4}).values({2, 2}, I64, {0, 3, 6, 1});
    c.result({2, 2, 4}).expectError();
  });
  add("embedding_grad", "id_out_of_range", [](CaseBuilder &c) {
    c.uniform({3, 4}).values({3}, I32, {0, -7, 2});
    c.result({6, 4}).expectError();
  });
}

void addExpandAndReshapeCases() {
  struct Expand {
    const char *label;
    Shape input, result;
    ElementType type = F32;
  };
  const Expand expands[] = {
      {"rank4", {3, 1, 5}, {2, 3, 4, 5}},
      {"vector", {1}, {1500}},
      {"columns_bool", {4, 1}, {4, 1100}, Bool},
      {"scalar", {}, {3, 3}},
      {"i64", {2, 1, 3}, {2, 4, 3}, I64},
      {"same_shape", {5, 6}, {5, 6}},
      // Grouped-query attention: keys [B, Hkv, 1, T, D] -> [B, Hkv, G, T, D].
      {"grouped_keys", {2, 2, 1, 16, 8}, {2, 2, 3, 16, 8}},
  };
  for (const Expand &e : expands)
    add("expand", e.label, [e](CaseBuilder &c) {
      fullRange(c, e.input, e.type);
      c.result(e.result, e.type);
    });
  const Expand reshapes[] = {
      {"flatten", {6, 35}, {210}},
      {"rank4_i32", {2, 3, 4, 5}, {6, 20}, I32},
      {"bool", {4, 4}, {2, 8}, Bool},
  };
  for (const Expand &r : reshapes)
    add("reshape", r.label, [r](CaseBuilder &c) {
      fullRange(c, r.input, r.type);
      c.result(r.result, r.type);
    });
  // The result is the input's own buffer: nothing to move.
  add("reshape", "in_place",
      [](CaseBuilder &c) { c.uniform({6, 35}).resultAliasing(0, {5, 42}); });
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

void addLossCases() {
  struct Loss {
    const char *label;
    Shape logits;
    ElementType targetType = I64;
    /// The logits' type; the results' is the type it computes in (f32 for
    /// bf16 logits, mixed precision's, widened as they are read).
    ElementType type = F32;
    double range = 3;
    /// The ignore_index attribute (absent: -100), and how many targets
    /// take the ignored value.
    std::optional<int64_t> ignoreIndex;
    int64_t ignored = 1;
    ElementType resultType() const {
      return type == ElementType::BF16 ? F32 : type;
    }
  };
  const Loss cases[] = {
      {"rows", {8, 50}},
      {"vocab_i32", {2, 5, 3000}, I32, F32, 5, std::nullopt, 3},
      {"gpt2_vocab", {4, 50257}},
      {"ignore_attribute", {6, 40}, I64, F32, 3, 0, 2},
      {"all_ignored", {5, 30}, I64, F32, 3, std::nullopt, 5},
      {"f64", {6, 70}, I64, F64},
      {"large_logits", {4, 300}, I64, F32, 80},
      {"single_class", {7, 1}, I64, F32, 3, std::nullopt, 0},
      {"no_rows", {0, 10}, I64, F32, 3, std::nullopt, 0},
      {"bf16_logits", {2, 9, 3000}, I64, ElementType::BF16},
      {"bf16_gpt2_vocab", {3, 50257}, I32, ElementType::BF16, 8},
  };
  for (const Loss &l : cases) {
    Shape targets(l.logits.begin(), l.logits.end() - 1);
    int64_t classes = l.logits.back();
    auto fill = [=](CaseBuilder &c) {
      if (l.ignoreIndex)
        c.ints("ignore_index", {*l.ignoreIndex});
      c.uniform(l.logits, l.type, -l.range, l.range);
      c.uniform(targets, l.targetType, 0, classes - 1);
      // The first `ignored` targets (spread through the rows) ignored.
      HostTensor &drawn = c.lastOperand();
      int64_t rows = drawn.numElements();
      for (int64_t k = 0; k < l.ignored && k < rows; ++k)
        drawn.setInt(k * rows / std::max<int64_t>(l.ignored, 1),
                     l.ignoreIndex.value_or(-100));
    };
    ElementType out = l.resultType();
    add("cross_entropy", l.label, [=](CaseBuilder &c) {
      fill(c);
      c.result({}, out);
      floatTolerance(c, out, 1e-5, 1e-6);
    });
    add("cross_entropy_grad", l.label, [=](CaseBuilder &c) {
      fill(c);
      c.values({}, out, {0.7}).result(l.logits, out);
      floatTolerance(c, out, 1e-5, 1e-8);
    });
    // The RL ops (docs/rl.md) over the same logits and targets.
    add("token_logprobs", l.label, [=](CaseBuilder &c) {
      fill(c);
      c.result(targets, out);
      floatTolerance(c, out, 1e-5, 1e-6);
    });
    add("token_logprobs_grad", l.label, [=](CaseBuilder &c) {
      fill(c);
      c.uniform(targets, out, -1, 1).result(l.logits, out);
      floatTolerance(c, out, 1e-5, 1e-8);
    });
    add("token_entropy", l.label, [=](CaseBuilder &c) {
      c.uniform(l.logits, l.type, -l.range, l.range);
      c.result(targets, out);
      floatTolerance(c, out, 1e-5, 1e-6);
    });
  }
  for (const char *op : {"cross_entropy", "cross_entropy_grad",
                         "token_logprobs", "token_logprobs_grad"})
    for (const auto &[label, bad] :
         {std::pair{"target_out_of_range", 10},
          std::pair{"negative_target_out_of_range", -1}})
      add(op, label, [op, bad = bad](CaseBuilder &c) {
        c.uniform({4, 10}).values({4}, I64, {1, -100, double(bad), 2});
        if (std::string(op) == "cross_entropy_grad")
          c.values({}, F32, {1.0}).result({4, 10});
        else if (std::string(op) == "token_logprobs_grad")
          c.values({4}, F32, {1.0, 1.0, 1.0, 1.0}).result({4, 10});
        else if (std::string(op) == "token_logprobs")
          c.result({4});
        else
          c.result({});
        c.expectError();
      });
}

//===----------------------------------------------------------------------===//
// Optimizers (in place, no results)
//===----------------------------------------------------------------------===//

/// The f32[8] hyper tensor: lr, beta1 or momentum, beta2, eps,
/// weight_decay, grad_scale, 1 - beta1^t, 1 - beta2^t.
std::vector<double> hyper(double lr, double beta1, double beta2, double eps,
                          double weightDecay, double gradScale, int step) {
  return {lr,
          beta1,
          beta2,
          eps,
          weightDecay,
          gradScale,
          1 - std::pow(beta1, step),
          1 - std::pow(beta2, step)};
}

void addOptimizerCases() {
  struct AdamW {
    const char *label;
    Shape shape;
    std::vector<double> hyper;
    bool freshState = false; // m = v = 0 (the first step)
    bool misaligned = false;
  };
  const AdamW adamw[] = {
      {"step3", {5003}, hyper(1e-3, 0.9, 0.999, 1e-8, 0.01, 0.5, 3)},
      {"matrix", {37, 129}, hyper(3e-4, 0.9, 0.95, 1e-8, 0.1, 1, 10)},
      {"no_weight_decay", {1000}, hyper(1e-2, 0.8, 0.99, 1e-6, 0, 1, 2)},
      {"first_step", {777}, hyper(1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1), true},
      {"single", {1}, hyper(1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 5)},
      {"misaligned",
       {1029},
       hyper(1e-3, 0.9, 0.999, 1e-8, 0.01, 0.25, 4),
       false,
       true},
      {"million", {1000003}, hyper(1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 7)},
      {"empty", {0}, hyper(1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 7)},
  };
  for (const AdamW &a : adamw)
    add("adamw", a.label, [a](CaseBuilder &c) {
      c.uniform(a.shape).uniform(a.shape, F32, -2, 2);
      if (a.freshState)
        c.values(a.shape, F32, {0}).values(a.shape, F32, {0});
      else
        c.uniform(a.shape, F32, -0.1, 0.1).uniform(a.shape, F32, 0, 1e-2);
      c.values({8}, F32, a.hyper).tolerance(1e-5, 1e-9);
      if (a.misaligned)
        c.misaligned();
    });

  // Bias corrections outside (0, 1] (t = 0): refused, even for an empty
  // parameter (a device checks them in a kernel).
  for (const auto &[label, shape] :
       {std::pair{"bias_correction_out_of_range", Shape{64}},
        std::pair{"empty_bias_correction_out_of_range", Shape{0}}})
    add("adamw", label, [shape = shape](CaseBuilder &c) {
      c.uniform(shape).uniform(shape).uniform(shape).uniform(shape, F32, 0, 1);
      c.values({8}, F32, hyper(1e-3, 0.9, 0.999, 1e-8, 0, 1, 0));
      c.expectError();
    });

  struct Sgd {
    const char *label;
    Shape shape;
    std::vector<double> hyper;
    bool misaligned = false;
  };
  const Sgd sgd[] = {
      {"momentum", {5003}, hyper(0.1, 0.9, 0, 0, 0.01, 1, 1)},
      {"no_momentum", {37, 129}, hyper(0.05, 0, 0, 0, 0, 0.5, 1)},
      {"weight_decay_only", {1000}, hyper(0.01, 0, 0, 0, 0.1, 1, 1)},
      {"misaligned", {1029}, hyper(0.1, 0.9, 0, 0, 0.01, 2, 1), true},
  };
  for (const Sgd &s : sgd)
    add("sgd", s.label, [s](CaseBuilder &c) {
      c.uniform(s.shape).uniform(s.shape, F32, -2, 2).uniform(s.shape);
      c.values({8}, F32, s.hyper).tolerance(1e-5, 1e-8);
      if (s.misaligned)
        c.misaligned();
    });
}

//===----------------------------------------------------------------------===//
// All cases, and the tests
//===----------------------------------------------------------------------===//

const std::vector<CaseEntry> &cases() {
  static const bool registered = [] {
    addUnaryFloatCases();
    addUnaryNumericCases();
    addBinaryCases();
    addCompareCases();
    addWhereCases();
    addCastCases();
    addMatmulCases();
    addAttentionCases();
    addCacheAppendCases();
    addCachedAttentionCases();
    addLayerNormCases();
    addRmsNormCases();
    addSoftmaxCases();
    addNormalizationGradCases();
    addReductionCases();
    addTransposeCases();
    addSliceCases();
    addConcatCases();
    addGatherCases();
    addEmbeddingCases();
    addExpandAndReshapeCases();
    addLossCases();
    addOptimizerCases();
    return true;
  }();
  (void)registered;
  return registry();
}

/// The backend every case is checked against.
Backend &referenceBackend() { return cpu::cpuBackend(); }

/// The backend under test; null (with `skip` saying why) when it cannot
/// run here.
Backend *testedBackend(std::string &skip) {
#if ZPLAN_KERNEL_DIFF_CUDA
  if (cuda::deviceCount() == 0) {
    skip = "no CUDA device: " + cuda::noDeviceReason();
    return nullptr;
  }
  static std::unique_ptr<Backend> backend;
  static Status created = cuda::createCudaBackend(0, backend);
  if (!created.ok()) {
    skip = "";
    ADD_FAILURE() << created.message();
    return nullptr;
  }
  return backend.get();
#else
  // A second instance: the harness cannot tell it is the same code.
  (void)skip;
  static cpu::CpuBackend backend;
  return &backend;
#endif
}

/// gtest names allow letters, digits and '_': "add/rows" -> "add__rows".
std::string testName(const CaseEntry &entry) {
  std::string name = entry.op + "__" + entry.variant;
  for (char &c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      c = '_';
  return name;
}

class KernelDiff : public ::testing::TestWithParam<size_t> {};

TEST_P(KernelDiff, MatchesCpuReference) {
  std::string skip;
  Backend *tested = testedBackend(skip);
  if (!tested) {
    if (!skip.empty())
      GTEST_SKIP() << skip;
    return; // creating the backend failed, already reported
  }
  const CaseEntry &entry = cases()[GetParam()];
  DiffCase diffCase = entry.make();
  DiffRun reference = runCase(referenceBackend(), diffCase);
  DiffRun run = runCase(*tested, diffCase);
  std::string differences = compareRuns(diffCase, reference, run);
  EXPECT_TRUE(differences.empty()) << "on " << tested->name() << " against "
                                   << referenceBackend().name() << ":\n"
                                   << differences;
}

INSTANTIATE_TEST_SUITE_P(Cases, KernelDiff,
                         ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t> &info) {
                           return testName(cases()[info.param]);
                         });

#if !ZPLAN_KERNEL_DIFF_CUDA
// The case list itself, checked once (in the CPU binary: it needs no
// device).

TEST(KernelDiffCoverage, EveryCpuOpcodeHasSeveralCases) {
  std::map<plan::Opcode, int> valid;
  std::set<plan::Opcode> seen;
  for (const CaseEntry &entry : cases()) {
    std::optional<plan::Opcode> opcode = plan::opcodeFromName(entry.op);
    ASSERT_TRUE(opcode) << entry.name();
    seen.insert(*opcode);
    // Error cases do not count towards the shapes an op is checked on.
    if (!entry.make().expectError)
      ++valid[*opcode];
  }
  int kernels = 0;
  for (const plan::OpcodeInfo *info = plan::opcodesBegin();
       info != plan::opcodesEnd(); ++info) {
    if (!cpu::hasKernel(info->opcode))
      continue;
    ++kernels;
    EXPECT_GE(valid[info->opcode], 3)
        << info->name << " has a CPU kernel but "
        << (seen.count(info->opcode) ? "fewer than 3" : "no")
        << " kernel-diff cases";
  }
  // The table is what Kernels.cpp registers; an empty one would pass.
  EXPECT_GE(kernels, 50);
  for (plan::Opcode opcode : seen)
    EXPECT_TRUE(cpu::hasKernel(opcode))
        << plan::opcodeName(opcode) << " has cases but no CPU kernel";
}

TEST(KernelDiffCoverage, CaseNamesAreUnique) {
  std::set<std::string> names;
  for (const CaseEntry &entry : cases())
    EXPECT_TRUE(names.insert(testName(entry)).second)
        << "two cases are called " << testName(entry);
}

// The harness itself: a difference beyond the tolerance, a NaN against a
// number and a changed integer are each reported with where and what.
TEST(KernelDiffHarness, ReportsTheFirstMismatch) {
  HostTensor reference({2, 3}, F32), tested({2, 3}, F32);
  for (int64_t i = 0; i < 6; ++i) {
    reference.set(i, i);
    tested.set(i, i);
  }
  EXPECT_EQ(compareTensors("result 0", reference, tested, {0, 0}), "");
  tested.set(4, 4.001);
  EXPECT_EQ(compareTensors("result 0", reference, tested, {1e-3, 0}), "");
  std::string message =
      compareTensors("result 0", reference, tested, {1e-5, 0});
  EXPECT_NE(message.find("element 4 [1, 1]"), std::string::npos) << message;
  EXPECT_NE(message.find("reference 4, tested 4.00099993"), std::string::npos)
      << message;
  EXPECT_NE(message.find("1 of 6 elements differ"), std::string::npos)
      << message;

  reference.set(2, kNaN);
  tested.set(2, kNaN);
  tested.set(4, 4);
  EXPECT_EQ(compareTensors("result 0", reference, tested, {0, 0}), "");
  tested.set(2, 2);
  EXPECT_NE(compareTensors("result 0", reference, tested, {1, 1}), "");
  tested.set(2, kNaN);
  tested.set(5, kInf);
  reference.set(5, kInf);
  EXPECT_EQ(compareTensors("result 0", reference, tested, {0, 0}), "");
  tested.set(5, -kInf);
  EXPECT_NE(compareTensors("result 0", reference, tested, {1, 1}), "");

  HostTensor ints({3}, I64), otherInts({3}, I64);
  otherInts.setInt(2, 1);
  message = compareTensors("operand 1", ints, otherInts, {1, 1});
  EXPECT_NE(message.find("element 2 [2]: reference 0, tested 1 (exact)"),
            std::string::npos)
      << message;
}

// A kernel that leaves an element unwritten is caught by the poison, and
// an operand changed in place is compared: the runs of a case on one
// backend, with one result element overwritten as a faulty backend would.
TEST(KernelDiffHarness, SeesUnwrittenResultsAndInPlaceOperands) {
  CaseBuilder builder("sgd", "harness");
  builder.uniform({5}).uniform({5}).uniform({5});
  builder.values({8}, F32, hyper(0.1, 0.9, 0, 0, 0, 1, 1));
  DiffCase diffCase = builder.build();
  DiffRun reference = runCase(referenceBackend(), diffCase);
  ASSERT_TRUE(reference.status.ok()) << reference.status.message();
  // The gradient (operand 1) is zeroed in place; the parameter moved.
  for (int64_t i = 0; i < 5; ++i)
    EXPECT_EQ(reference.operands[1].get(i), 0.0);
  EXPECT_NE(reference.operands[0].bytes, diffCase.operands[0].bytes);
  DiffRun faulty = reference;
  faulty.operands[0].set(3, 7.0);
  std::string message = compareRuns(diffCase, reference, faulty);
  EXPECT_NE(message.find("op sgd (case sgd/harness): operand 0 after the run"),
            std::string::npos)
      << message;

  // A result poisoned before the run and not written stays NaN.
  CaseBuilder empty("reshape", "harness");
  empty.uniform({4}).result({4});
  DiffCase reshape = empty.build();
  DiffRun copied = runCase(referenceBackend(), reshape);
  ASSERT_TRUE(copied.status.ok()) << copied.status.message();
  EXPECT_EQ(copied.results[0].bytes, reshape.operands[0].bytes);
  DiffRun unwritten = copied;
  unwritten.results[0].set(1, kNaN);
  EXPECT_NE(compareRuns(reshape, copied, unwritten), "");
}

TEST(KernelDiffHarness, ErrorCasesMustFailOnBothBackends) {
  CaseBuilder builder("embedding", "harness");
  builder.uniform({4, 2}).values({2}, I64, {0, 4}).result({2, 2});
  DiffCase diffCase = builder.expectError().build();
  DiffRun run = runCase(referenceBackend(), diffCase);
  ASSERT_FALSE(run.status.ok());
  EXPECT_EQ(run.status.message().rfind("embedding: ", 0), 0u)
      << run.status.message();
  EXPECT_EQ(compareRuns(diffCase, run, run), "");
  DiffRun succeeded;
  EXPECT_NE(compareRuns(diffCase, run, succeeded).find("backend succeeded"),
            std::string::npos);
}
#endif

} // namespace
