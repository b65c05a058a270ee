//===- OnnxSemanticsTest.cpp - Tests for ONNX inference and folding -------===//
//
// Checks the operator semantics the importer relies on to specialise LLM
// graphs to static shapes: broadcasting, the shape arithmetic exporters emit
// (Shape/Gather/Slice/Concat/Range/Reshape/...), opset-dependent attribute
// versus input forms, float32 rounding of folded values, tensor decoding and
// the diagnostics given for shapes that cannot be known at compile time.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/OnnxSemantics.h"

#include "onnx/onnx.pb.h"
#include "llvm/Support/Error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace zplan::onnx_import;

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

/// A node with inputs in0.. and outputs out0..; attributes are added after.
onnx::NodeProto makeNode(const std::string &opType, int numInputs = 1,
                         int numOutputs = 1) {
  onnx::NodeProto node;
  node.set_op_type(opType);
  for (int i = 0; i < numInputs; ++i)
    node.add_input("in" + std::to_string(i));
  for (int i = 0; i < numOutputs; ++i)
    node.add_output("out" + std::to_string(i));
  return node;
}

void setInt(onnx::NodeProto &node, const std::string &name, int64_t value) {
  onnx::AttributeProto *attribute = node.add_attribute();
  attribute->set_name(name);
  attribute->set_type(onnx::AttributeProto::INT);
  attribute->set_i(value);
}

void setFloat(onnx::NodeProto &node, const std::string &name, float value) {
  onnx::AttributeProto *attribute = node.add_attribute();
  attribute->set_name(name);
  attribute->set_type(onnx::AttributeProto::FLOAT);
  attribute->set_f(value);
}

void setInts(onnx::NodeProto &node, const std::string &name,
             const std::vector<int64_t> &values) {
  onnx::AttributeProto *attribute = node.add_attribute();
  attribute->set_name(name);
  attribute->set_type(onnx::AttributeProto::INTS);
  for (int64_t value : values)
    attribute->add_ints(value);
}

ValueInfo constInts(std::vector<int64_t> shape, std::vector<int64_t> values,
                    ElementType type = ElementType::I64) {
  HostTensor tensor = HostTensor::fromInts(type, shape, std::move(values));
  return ValueInfo{type, shape, tensor};
}

ValueInfo constFloats(std::vector<int64_t> shape, std::vector<double> values,
                      ElementType type = ElementType::F32) {
  HostTensor tensor = HostTensor::fromFloats(type, shape, std::move(values));
  return ValueInfo{type, shape, tensor};
}

ValueInfo runtime(std::vector<int64_t> shape,
                  ElementType type = ElementType::F32) {
  return ValueInfo{type, std::move(shape), std::nullopt};
}

ValueInfo constBools(std::vector<int64_t> shape, std::vector<int64_t> values) {
  return constInts(std::move(shape), std::move(values), ElementType::Bool);
}

/// The message of a failed llvm::Error; "" on success.
std::string messageOf(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : std::string();
}

/// Runs inference on a single-output node and returns that output, failing
/// the test on an error.
ValueInfo inferOne(const onnx::NodeProto &node, int64_t opset,
                   const std::vector<const ValueInfo *> &inputs) {
  std::vector<ValueInfo> outputs;
  EXPECT_EQ(messageOf(inferNode(node, opset, inputs, outputs)), "");
  EXPECT_FALSE(outputs.empty());
  return outputs.empty() ? ValueInfo() : outputs[0];
}

std::string inferError(const onnx::NodeProto &node, int64_t opset,
                       const std::vector<const ValueInfo *> &inputs) {
  std::vector<ValueInfo> outputs;
  return messageOf(inferNode(node, opset, inputs, outputs));
}

std::vector<int64_t> intsOf(const ValueInfo &info) {
  EXPECT_TRUE(info.value.has_value());
  return info.value ? info.value->ints : std::vector<int64_t>();
}

std::vector<double> floatsOf(const ValueInfo &info) {
  EXPECT_TRUE(info.value.has_value());
  return info.value ? info.value->floats : std::vector<double>();
}

using Shape = std::vector<int64_t>;
using Ints = std::vector<int64_t>;
using Floats = std::vector<double>;

//===----------------------------------------------------------------------===//
// Broadcasting and element-wise arithmetic.
//===----------------------------------------------------------------------===//

TEST(OnnxSemantics, BroadcastShapes) {
  EXPECT_EQ(broadcastShapes({2, 1, 4}, {3, 1}), Shape({2, 3, 4}));
  EXPECT_EQ(broadcastShapes({}, {5}), Shape({5}));
  EXPECT_EQ(broadcastShapes({0, 1}, {1, 3}), Shape({0, 3}));
  EXPECT_FALSE(broadcastShapes({2, 3}, {4}).has_value());
  EXPECT_EQ(formatShape({2, 16}), "2x16");
  EXPECT_EQ(formatShape({}), "scalar");
  EXPECT_EQ(normalizeAxis(-1, 3), 2);
  EXPECT_FALSE(normalizeAxis(3, 3).has_value());
  EXPECT_FALSE(normalizeAxis(-4, 3).has_value());
}

TEST(OnnxSemantics, AddBroadcastsAndFolds) {
  ValueInfo a = constFloats({2, 1}, {10, 20});
  ValueInfo b = constFloats({3}, {1, 2, 3});
  ValueInfo out = inferOne(makeNode("Add", 2), 17, {&a, &b});
  EXPECT_EQ(out.type, ElementType::F32);
  EXPECT_EQ(out.shape, Shape({2, 3}));
  EXPECT_EQ(floatsOf(out), Floats({11, 12, 13, 21, 22, 23}));
}

TEST(OnnxSemantics, AddOfRuntimeValueInfersShapeOnly) {
  ValueInfo a = runtime({4, 1, 8});
  ValueInfo b = constFloats({3, 1}, {1, 2, 3});
  ValueInfo out = inferOne(makeNode("Add", 2), 17, {&a, &b});
  EXPECT_EQ(out.shape, Shape({4, 3, 8}));
  EXPECT_FALSE(out.isConstant());
}

TEST(OnnxSemantics, IncompatibleBroadcastIsAnError) {
  ValueInfo a = runtime({2, 3});
  ValueInfo b = runtime({4});
  EXPECT_EQ(inferError(makeNode("Add", 2), 17, {&a, &b}),
            "Add: cannot broadcast 2x3 with 4");
  ValueInfo c = runtime({2, 3}, ElementType::I64);
  EXPECT_EQ(inferError(makeNode("Mul", 2), 17, {&a, &c}),
            "Mul: element types f32 and i64 differ");
}

TEST(OnnxSemantics, IntegerDivisionTruncatesTowardZero) {
  ValueInfo a = constInts({4}, {-7, 7, -7, 7});
  ValueInfo b = constInts({4}, {2, 2, -2, -2});
  EXPECT_EQ(intsOf(inferOne(makeNode("Div", 2), 17, {&a, &b})),
            Ints({-3, 3, 3, -3}));
  // Mod follows the divisor's sign unless fmod = 1.
  EXPECT_EQ(intsOf(inferOne(makeNode("Mod", 2), 17, {&a, &b})),
            Ints({1, 1, -1, -1}));
  onnx::NodeProto fmod = makeNode("Mod", 2);
  setInt(fmod, "fmod", 1);
  EXPECT_EQ(intsOf(inferOne(fmod, 17, {&a, &b})), Ints({-1, 1, -1, 1}));

  ValueInfo zero = constInts({}, {0});
  EXPECT_EQ(inferError(makeNode("Div", 2), 17, {&a, &zero}),
            "Div: integer division by zero");
}

TEST(OnnxSemantics, Int32ArithmeticWraps) {
  ValueInfo a = constInts({}, {2147483647}, ElementType::I32);
  ValueInfo b = constInts({}, {1}, ElementType::I32);
  ValueInfo out = inferOne(makeNode("Add", 2), 17, {&a, &b});
  EXPECT_EQ(out.type, ElementType::I32);
  EXPECT_EQ(intsOf(out), Ints({-2147483648LL}));
}

TEST(OnnxSemantics, FoldedFloat32ValuesAreRounded) {
  ValueInfo one = constFloats({}, {1});
  ValueInfo three = constFloats({}, {3});
  ValueInfo out = inferOne(makeNode("Div", 2), 17, {&one, &three});
  ASSERT_EQ(floatsOf(out).size(), 1u);
  EXPECT_EQ(floatsOf(out)[0], static_cast<double>(1.0f / 3.0f));
  EXPECT_NE(floatsOf(out)[0], 1.0 / 3.0);

  // Float64 keeps full precision.
  ValueInfo oneD = constFloats({}, {1}, ElementType::F64);
  ValueInfo threeD = constFloats({}, {3}, ElementType::F64);
  EXPECT_EQ(floatsOf(inferOne(makeNode("Div", 2), 17, {&oneD, &threeD}))[0],
            1.0 / 3.0);

  // Inputs are rounded on construction too: 0.1 is stored as 0.1f.
  ValueInfo tenth = constFloats({}, {0.1});
  ValueInfo sqrtOut = inferOne(makeNode("Sqrt"), 17, {&tenth});
  EXPECT_EQ(floatsOf(sqrtOut)[0], static_cast<double>(static_cast<float>(
                                      std::sqrt(static_cast<double>(0.1f)))));
}

TEST(OnnxSemantics, PowAcceptsExponentOfOtherType) {
  ValueInfo base = constFloats({3}, {2, 3, 4});
  ValueInfo exponent = constInts({}, {2});
  ValueInfo out = inferOne(makeNode("Pow", 2), 17, {&base, &exponent});
  EXPECT_EQ(out.type, ElementType::F32);
  EXPECT_EQ(floatsOf(out), Floats({4, 9, 16}));
}

TEST(OnnxSemantics, UnaryMathFolds) {
  ValueInfo x = constFloats({4}, {-1.5, 0, 2.25, -0.0});
  EXPECT_EQ(floatsOf(inferOne(makeNode("Neg"), 17, {&x})),
            Floats({1.5, 0, -2.25, 0}));
  EXPECT_EQ(floatsOf(inferOne(makeNode("Floor"), 17, {&x})),
            Floats({-2, 0, 2, 0}));
  EXPECT_EQ(floatsOf(inferOne(makeNode("Relu"), 17, {&x})),
            Floats({0, 0, 2.25, 0}));
  EXPECT_EQ(floatsOf(inferOne(makeNode("Sign"), 17, {&x})),
            Floats({-1, 0, 1, 0}));
  ValueInfo zero = constFloats({1}, {0});
  EXPECT_EQ(floatsOf(inferOne(makeNode("Cos"), 17, {&zero})), Floats({1}));
  EXPECT_EQ(floatsOf(inferOne(makeNode("Sigmoid"), 17, {&zero})),
            Floats({0.5}));
  ValueInfo ints = constInts({3}, {-4, 0, 5});
  EXPECT_EQ(intsOf(inferOne(makeNode("Abs"), 17, {&ints})), Ints({4, 0, 5}));
  EXPECT_EQ(inferError(makeNode("Exp"), 17, {&ints}),
            "Exp: integer input i64 is not supported");
}

TEST(OnnxSemantics, VariadicMinMax) {
  ValueInfo a = constInts({3}, {1, 5, 3});
  ValueInfo b = constInts({}, {2});
  ValueInfo c = constInts({1, 3}, {0, 9, 4});
  EXPECT_EQ(intsOf(inferOne(makeNode("Max", 3), 17, {&a, &b, &c})),
            Ints({2, 9, 4}));
  ValueInfo out = inferOne(makeNode("Min", 3), 17, {&a, &b, &c});
  EXPECT_EQ(out.shape, Shape({1, 3}));
  EXPECT_EQ(intsOf(out), Ints({0, 2, 2}));
}

TEST(OnnxSemantics, ComparisonsAndLogic) {
  ValueInfo a = constInts({3}, {1, 2, 3});
  ValueInfo b = constInts({}, {2});
  ValueInfo equal = inferOne(makeNode("Equal", 2), 17, {&a, &b});
  EXPECT_EQ(equal.type, ElementType::Bool);
  EXPECT_EQ(intsOf(equal), Ints({0, 1, 0}));
  EXPECT_EQ(intsOf(inferOne(makeNode("Less", 2), 17, {&a, &b})),
            Ints({1, 0, 0}));
  EXPECT_EQ(intsOf(inferOne(makeNode("GreaterOrEqual", 2), 17, {&a, &b})),
            Ints({0, 1, 1}));
  ValueInfo p = constBools({2}, {1, 0});
  ValueInfo q = constBools({2, 1}, {1, 0});
  ValueInfo conjunction = inferOne(makeNode("And", 2), 17, {&p, &q});
  EXPECT_EQ(conjunction.shape, Shape({2, 2}));
  EXPECT_EQ(intsOf(conjunction), Ints({1, 0, 0, 0}));
  EXPECT_EQ(intsOf(inferOne(makeNode("Not"), 17, {&p})), Ints({0, 1}));
}

TEST(OnnxSemantics, WhereBroadcastsAllThree) {
  ValueInfo condition = constBools({2, 1}, {1, 0});
  ValueInfo onTrue = constFloats({3}, {1, 2, 3});
  ValueInfo onFalse = constFloats({}, {-100});
  ValueInfo out =
      inferOne(makeNode("Where", 3), 17, {&condition, &onTrue, &onFalse});
  EXPECT_EQ(out.shape, Shape({2, 3}));
  EXPECT_EQ(floatsOf(out), Floats({1, 2, 3, -100, -100, -100}));
}

TEST(OnnxSemantics, CastTruncatesFloatToInteger) {
  ValueInfo x = constFloats({4}, {-2.7, 2.7, 0.5, -0.5});
  onnx::NodeProto node = makeNode("Cast");
  setInt(node, "to", onnx::TensorProto::INT64);
  ValueInfo out = inferOne(node, 17, {&x});
  EXPECT_EQ(out.type, ElementType::I64);
  EXPECT_EQ(intsOf(out), Ints({-2, 2, 0, 0}));

  onnx::NodeProto toBool = makeNode("Cast");
  setInt(toBool, "to", onnx::TensorProto::BOOL);
  EXPECT_EQ(intsOf(inferOne(toBool, 17, {&x})), Ints({1, 1, 1, 1}));

  // Narrowing to float16 rounds to its 11-bit significand.
  ValueInfo tenth = constFloats({}, {0.1}, ElementType::F64);
  onnx::NodeProto toHalf = makeNode("Cast");
  setInt(toHalf, "to", onnx::TensorProto::FLOAT16);
  EXPECT_EQ(floatsOf(inferOne(toHalf, 17, {&tenth}))[0], 0.0999755859375);

  ValueInfo like = runtime({1}, ElementType::I32);
  ValueInfo castLike = inferOne(makeNode("CastLike", 2), 17, {&x, &like});
  EXPECT_EQ(castLike.type, ElementType::I32);
  EXPECT_EQ(intsOf(castLike), Ints({-2, 2, 0, 0}));
}

//===----------------------------------------------------------------------===//
// Shape arithmetic.
//===----------------------------------------------------------------------===//

TEST(OnnxSemantics, ShapeAndSize) {
  ValueInfo x = runtime({2, 5, 7});
  ValueInfo shape = inferOne(makeNode("Shape"), 14, {&x});
  EXPECT_EQ(shape.type, ElementType::I64);
  EXPECT_EQ(intsOf(shape), Ints({2, 5, 7}));

  onnx::NodeProto sliced = makeNode("Shape");
  setInt(sliced, "start", 1);
  setInt(sliced, "end", -1);
  EXPECT_EQ(intsOf(inferOne(sliced, 15, {&x})), Ints({5}));
  // start/end do not exist before opset 15.
  EXPECT_EQ(intsOf(inferOne(sliced, 14, {&x})), Ints({2, 5, 7}));

  ValueInfo size = inferOne(makeNode("Size"), 14, {&x});
  EXPECT_TRUE(size.shape.empty());
  EXPECT_EQ(intsOf(size), Ints({70}));
}

TEST(OnnxSemantics, GatherScalarIndexDropsRank) {
  ValueInfo shape = constInts({3}, {2, 5, 7});
  ValueInfo last = constInts({}, {-1});
  ValueInfo out = inferOne(makeNode("Gather", 2), 14, {&shape, &last});
  EXPECT_TRUE(out.shape.empty());
  EXPECT_EQ(intsOf(out), Ints({7}));

  ValueInfo pair = constInts({2}, {0, 2}, ElementType::I32);
  out = inferOne(makeNode("Gather", 2), 14, {&shape, &pair});
  EXPECT_EQ(out.shape, Shape({2}));
  EXPECT_EQ(intsOf(out), Ints({2, 7}));
}

TEST(OnnxSemantics, GatherAlongInnerAxisOfRuntimeData) {
  ValueInfo table = constFloats({2, 3}, {0, 1, 2, 10, 11, 12});
  ValueInfo indices = constInts({2, 2}, {2, 0, 1, 1});
  onnx::NodeProto node = makeNode("Gather", 2);
  setInt(node, "axis", 1);
  ValueInfo out = inferOne(node, 14, {&table, &indices});
  EXPECT_EQ(out.shape, Shape({2, 2, 2}));
  EXPECT_EQ(floatsOf(out), Floats({2, 0, 1, 1, 12, 10, 11, 11}));

  ValueInfo embeddings = runtime({50257, 768});
  ValueInfo ids = runtime({1, 9}, ElementType::I64);
  out = inferOne(makeNode("Gather", 2), 14, {&embeddings, &ids});
  EXPECT_EQ(out.shape, Shape({1, 9, 768}));
  EXPECT_FALSE(out.isConstant());
}

TEST(OnnxSemantics, GatherIndexOutOfRange) {
  ValueInfo data = runtime({5});
  ValueInfo index = constInts({}, {7});
  EXPECT_EQ(inferError(makeNode("Gather", 2), 14, {&data, &index}),
            "Gather: index 7 out of range for axis of size 5");
}

TEST(OnnxSemantics, GatherElements) {
  ValueInfo data = constInts({2, 2}, {1, 2, 3, 4});
  ValueInfo indices = constInts({2, 2}, {0, 0, 1, 0});
  onnx::NodeProto node = makeNode("GatherElements", 2);
  setInt(node, "axis", 1);
  EXPECT_EQ(intsOf(inferOne(node, 14, {&data, &indices})), Ints({1, 1, 4, 3}));
}

/// Slices 0..9 with the given parameters at opset 13 (inputs form).
Ints sliceRange10(Ints starts, Ints ends, Ints steps) {
  ValueInfo data = constInts({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  int64_t n = starts.size();
  ValueInfo startsInfo = constInts({n}, starts);
  ValueInfo endsInfo = constInts({n}, ends);
  ValueInfo axes = constInts({n}, Ints(n, 0));
  ValueInfo stepsInfo = constInts({n}, steps);
  ValueInfo out = inferOne(makeNode("Slice", 5), 13,
                           {&data, &startsInfo, &endsInfo, &axes, &stepsInfo});
  EXPECT_EQ(out.shape, Shape({static_cast<int64_t>(intsOf(out).size())}));
  return intsOf(out);
}

TEST(OnnxSemantics, SliceClampsNegativeAndHugeBounds) {
  EXPECT_EQ(sliceRange10({-3}, {kInt64Max}, {1}), Ints({7, 8, 9}));
  EXPECT_EQ(sliceRange10({1}, {8}, {3}), Ints({1, 4, 7}));
  EXPECT_EQ(sliceRange10({-1}, {kInt64Min}, {-1}),
            Ints({9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(sliceRange10({kInt64Max}, {-8}, {-3}), Ints({9, 6, 3}));
  EXPECT_EQ(sliceRange10({5}, {2}, {1}), Ints({}));
  EXPECT_EQ(sliceRange10({-100}, {2}, {1}), Ints({0, 1}));
}

TEST(OnnxSemantics, SliceOfRuntimeDataOnChosenAxis) {
  ValueInfo data = runtime({1, 12, 64});
  ValueInfo starts = constInts({1}, {0});
  ValueInfo ends = constInts({1}, {32});
  ValueInfo axes = constInts({1}, {-1});
  ValueInfo out =
      inferOne(makeNode("Slice", 4), 13, {&data, &starts, &ends, &axes});
  EXPECT_EQ(out.shape, Shape({1, 12, 32}));
  EXPECT_FALSE(out.isConstant());

  ValueInfo runtimeEnds = runtime({1}, ElementType::I64);
  EXPECT_EQ(
      inferError(makeNode("Slice", 3), 13, {&data, &starts, &runtimeEnds}),
      "Slice: ends (input 2) is not a compile-time constant");
}

TEST(OnnxSemantics, SliceAttributeFormBeforeOpset10) {
  ValueInfo data = constInts({2, 3}, {0, 1, 2, 3, 4, 5});
  onnx::NodeProto node = makeNode("Slice");
  setInts(node, "starts", {1});
  setInts(node, "ends", {kInt64Max});
  setInts(node, "axes", {1});
  ValueInfo out = inferOne(node, 9, {&data});
  EXPECT_EQ(out.shape, Shape({2, 2}));
  EXPECT_EQ(intsOf(out), Ints({1, 2, 4, 5}));
}

TEST(OnnxSemantics, ConcatOfShapeVectors) {
  ValueInfo a = constInts({1}, {1});
  ValueInfo b = constInts({2}, {-1, 64});
  onnx::NodeProto node = makeNode("Concat", 2);
  setInt(node, "axis", 0);
  EXPECT_EQ(intsOf(inferOne(node, 14, {&a, &b})), Ints({1, -1, 64}));

  ValueInfo x = constInts({2, 1}, {1, 2});
  ValueInfo y = constInts({2, 2}, {3, 4, 5, 6});
  onnx::NodeProto columns = makeNode("Concat", 2);
  setInt(columns, "axis", -1);
  ValueInfo out = inferOne(columns, 14, {&x, &y});
  EXPECT_EQ(out.shape, Shape({2, 3}));
  EXPECT_EQ(intsOf(out), Ints({1, 3, 4, 2, 5, 6}));

  ValueInfo z = constInts({3, 2}, {0, 0, 0, 0, 0, 0});
  EXPECT_EQ(inferError(columns, 14, {&x, &z}),
            "Concat: cannot concatenate 2x1 with 3x2 on axis 1");
}

TEST(OnnxSemantics, RangeIntegerAndFloat) {
  ValueInfo zero = constInts({}, {0}), ten = constInts({}, {10}),
            three = constInts({}, {3});
  ValueInfo out = inferOne(makeNode("Range", 3), 14, {&zero, &ten, &three});
  EXPECT_EQ(out.shape, Shape({4}));
  EXPECT_EQ(intsOf(out), Ints({0, 3, 6, 9}));

  ValueInfo five = constInts({}, {5}), minusTwo = constInts({}, {-2});
  EXPECT_EQ(
      intsOf(inferOne(makeNode("Range", 3), 14, {&five, &zero, &minusTwo})),
      Ints({5, 3, 1}));

  ValueInfo start = constFloats({}, {0}), limit = constFloats({}, {64}),
            delta = constFloats({}, {2});
  ValueInfo floats =
      inferOne(makeNode("Range", 3), 14, {&start, &limit, &delta});
  EXPECT_EQ(floats.type, ElementType::F32);
  EXPECT_EQ(floats.shape, Shape({32}));
  EXPECT_EQ(floatsOf(floats)[31], 62.0);

  ValueInfo length = runtime({}, ElementType::I64);
  EXPECT_EQ(inferError(makeNode("Range", 3), 14, {&zero, &length, &three}),
            "Range: limit (input 1) is not a compile-time constant");
}

TEST(OnnxSemantics, ConstantOfShape) {
  ValueInfo shape = constInts({2}, {2, 3});
  onnx::NodeProto node = makeNode("ConstantOfShape");
  onnx::AttributeProto *value = node.add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  value->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  value->mutable_t()->add_dims(1);
  value->mutable_t()->add_int64_data(1);
  ValueInfo out = inferOne(node, 14, {&shape});
  EXPECT_EQ(out.type, ElementType::I64);
  EXPECT_EQ(out.shape, Shape({2, 3}));
  EXPECT_EQ(intsOf(out), Ints(6, 1));

  // Without a value the fill is float32 zero.
  ValueInfo plain = inferOne(makeNode("ConstantOfShape"), 14, {&shape});
  EXPECT_EQ(plain.type, ElementType::F32);
  EXPECT_EQ(floatsOf(plain), Floats(6, 0.0));

  ValueInfo runtimeShape = runtime({2}, ElementType::I64);
  EXPECT_EQ(inferError(node, 14, {&runtimeShape}),
            "ConstantOfShape: the shape (input 0) is not a compile-time "
            "constant");
}

TEST(OnnxSemantics, LargeResultsKeepShapeButNotValue) {
  ValueInfo shape = constInts({2}, {2, kMaxFoldedElements});
  ValueInfo out = inferOne(makeNode("ConstantOfShape"), 14, {&shape});
  EXPECT_EQ(out.shape, Shape({2, kMaxFoldedElements}));
  EXPECT_FALSE(out.isConstant());

  ValueInfo small = constInts({1}, {kMaxFoldedElements});
  EXPECT_TRUE(inferOne(makeNode("ConstantOfShape"), 14, {&small}).isConstant());
}

TEST(OnnxSemantics, ExpandBroadcastsBothWays) {
  ValueInfo data = constInts({3, 1}, {1, 2, 3});
  ValueInfo shape = constInts({3}, {2, 1, 4});
  ValueInfo out = inferOne(makeNode("Expand", 2), 14, {&data, &shape});
  EXPECT_EQ(out.shape, Shape({2, 3, 4}));
  Ints expected;
  for (int repeat = 0; repeat < 2; ++repeat)
    for (int64_t row : {1, 2, 3})
      for (int column = 0; column < 4; ++column)
        expected.push_back(row);
  EXPECT_EQ(intsOf(out), expected);

  ValueInfo runtimeShape = runtime({3}, ElementType::I64);
  EXPECT_EQ(inferError(makeNode("Expand", 2), 14, {&data, &runtimeShape}),
            "Expand: the target shape (input 1) is not a compile-time "
            "constant");
  ValueInfo bad = constInts({2}, {4, 1});
  EXPECT_EQ(inferError(makeNode("Expand", 2), 14, {&data, &bad}),
            "Expand: cannot broadcast 3x1 with 4x1");
}

TEST(OnnxSemantics, ReshapeCopiesZerosAndInfersMinusOne) {
  ValueInfo data = runtime({2, 3, 4});
  ValueInfo shape = constInts({2}, {0, -1});
  ValueInfo out = inferOne(makeNode("Reshape", 2), 14, {&data, &shape});
  EXPECT_EQ(out.shape, Shape({2, 12}));
  EXPECT_FALSE(out.isConstant());

  ValueInfo values = constInts({2, 2}, {1, 2, 3, 4});
  ValueInfo flat = constInts({1}, {-1});
  out = inferOne(makeNode("Reshape", 2), 14, {&values, &flat});
  EXPECT_EQ(out.shape, Shape({4}));
  EXPECT_EQ(intsOf(out), Ints({1, 2, 3, 4}));
  EXPECT_EQ(out.value->shape, Shape({4}));

  // With allowzero a 0 is a real zero-sized dimension.
  ValueInfo empty = runtime({0, 4});
  ValueInfo zeroShape = constInts({2}, {0, 4});
  onnx::NodeProto allowZero = makeNode("Reshape", 2);
  setInt(allowZero, "allowzero", 1);
  EXPECT_EQ(inferOne(allowZero, 14, {&empty, &zeroShape}).shape, Shape({0, 4}));
  ValueInfo wide = runtime({2, 4});
  EXPECT_EQ(inferError(allowZero, 14, {&wide, &zeroShape}),
            "Reshape: cannot reshape 2x4 into 0x4");
}

TEST(OnnxSemantics, ReshapeErrors) {
  ValueInfo data = runtime({2, 16});
  ValueInfo shape = constInts({2}, {3, -1});
  EXPECT_EQ(inferError(makeNode("Reshape", 2), 14, {&data, &shape}),
            "Reshape: cannot reshape 2x16 into 3x-1");
  ValueInfo runtimeShape = runtime({2}, ElementType::I64);
  EXPECT_EQ(inferError(makeNode("Reshape", 2), 14, {&data, &runtimeShape}),
            "Reshape: the target shape (input 1) is not a compile-time "
            "constant");
}

TEST(OnnxSemantics, FlattenAndTranspose) {
  ValueInfo data = runtime({2, 3, 4});
  onnx::NodeProto flatten = makeNode("Flatten");
  setInt(flatten, "axis", -1);
  EXPECT_EQ(inferOne(flatten, 14, {&data}).shape, Shape({6, 4}));

  ValueInfo matrix = constInts({2, 3}, {1, 2, 3, 4, 5, 6});
  ValueInfo transposed = inferOne(makeNode("Transpose"), 14, {&matrix});
  EXPECT_EQ(transposed.shape, Shape({3, 2}));
  EXPECT_EQ(intsOf(transposed), Ints({1, 4, 2, 5, 3, 6}));

  onnx::NodeProto permuted = makeNode("Transpose");
  setInts(permuted, "perm", {0, 2, 1, 3});
  ValueInfo heads = runtime({1, 9, 12, 64});
  EXPECT_EQ(inferOne(permuted, 14, {&heads}).shape, Shape({1, 12, 9, 64}));
}

TEST(OnnxSemantics, UnsqueezeAxesAttributeBeforeOpset13) {
  ValueInfo scalar = constInts({}, {5});
  onnx::NodeProto attributeForm = makeNode("Unsqueeze");
  setInts(attributeForm, "axes", {0});
  ValueInfo out = inferOne(attributeForm, 11, {&scalar});
  EXPECT_EQ(out.shape, Shape({1}));
  EXPECT_EQ(intsOf(out), Ints({5}));
  // At opset 13 the attribute is gone and the axes input is required.
  EXPECT_EQ(inferError(attributeForm, 13, {&scalar}),
            "Unsqueeze: axes (input 1) is missing");

  ValueInfo data = runtime({2, 3});
  ValueInfo axes = constInts({2}, {0, -1});
  EXPECT_EQ(inferOne(makeNode("Unsqueeze", 2), 13, {&data, &axes}).shape,
            Shape({1, 2, 3, 1}));
  ValueInfo runtimeAxes = runtime({2}, ElementType::I64);
  EXPECT_EQ(inferError(makeNode("Unsqueeze", 2), 13, {&data, &runtimeAxes}),
            "Unsqueeze: axes (input 1) is not a compile-time constant");
}

TEST(OnnxSemantics, Squeeze) {
  ValueInfo data = runtime({1, 3, 1});
  EXPECT_EQ(inferOne(makeNode("Squeeze"), 13, {&data}).shape, Shape({3}));
  ValueInfo axes = constInts({1}, {-1});
  EXPECT_EQ(inferOne(makeNode("Squeeze", 2), 13, {&data, &axes}).shape,
            Shape({1, 3}));
  onnx::NodeProto attributeForm = makeNode("Squeeze");
  setInts(attributeForm, "axes", {1});
  EXPECT_EQ(inferError(attributeForm, 11, {&data}),
            "Squeeze: cannot squeeze axis 1 of size 3");
}

TEST(OnnxSemantics, SplitFormsAcrossOpsets) {
  ValueInfo data = constInts({5}, {0, 1, 2, 3, 4});
  std::vector<ValueInfo> outputs;

  onnx::NodeProto attributeForm = makeNode("Split", 1, 2);
  setInts(attributeForm, "split", {2, 3});
  ASSERT_EQ(messageOf(inferNode(attributeForm, 11, {&data}, outputs)), "");
  EXPECT_EQ(intsOf(outputs[0]), Ints({0, 1}));
  EXPECT_EQ(intsOf(outputs[1]), Ints({2, 3, 4}));

  ValueInfo sizes = constInts({2}, {4, 1});
  ASSERT_EQ(messageOf(inferNode(makeNode("Split", 2, 2), 13, {&data, &sizes},
                                outputs)),
            "");
  EXPECT_EQ(intsOf(outputs[0]), Ints({0, 1, 2, 3}));
  EXPECT_EQ(intsOf(outputs[1]), Ints({4}));

  onnx::NodeProto numOutputs = makeNode("Split", 1, 3);
  setInt(numOutputs, "num_outputs", 3);
  ASSERT_EQ(messageOf(inferNode(numOutputs, 18, {&data}, outputs)), "");
  EXPECT_EQ(intsOf(outputs[0]), Ints({0, 1}));
  EXPECT_EQ(intsOf(outputs[1]), Ints({2, 3}));
  EXPECT_EQ(intsOf(outputs[2]), Ints({4}));

  EXPECT_EQ(messageOf(inferNode(makeNode("Split", 1, 2), 13, {&data}, outputs)),
            "Split: cannot split an axis of size 5 into 2 equal parts");

  ValueInfo qkv = runtime({1, 9, 2304});
  onnx::NodeProto lastAxis = makeNode("Split", 1, 3);
  setInt(lastAxis, "axis", 2);
  ASSERT_EQ(messageOf(inferNode(lastAxis, 13, {&qkv}, outputs)), "");
  EXPECT_EQ(outputs[2].shape, Shape({1, 9, 768}));
}

TEST(OnnxSemantics, Tile) {
  ValueInfo data = constInts({2}, {1, 2});
  ValueInfo repeats = constInts({1}, {3});
  EXPECT_EQ(intsOf(inferOne(makeNode("Tile", 2), 14, {&data, &repeats})),
            Ints({1, 2, 1, 2, 1, 2}));
  ValueInfo matrix = constInts({2, 1}, {1, 2});
  ValueInfo both = constInts({2}, {2, 2});
  ValueInfo out = inferOne(makeNode("Tile", 2), 14, {&matrix, &both});
  EXPECT_EQ(out.shape, Shape({4, 2}));
  EXPECT_EQ(intsOf(out), Ints({1, 1, 2, 2, 1, 1, 2, 2}));
}

//===----------------------------------------------------------------------===//
// Masks, cumulative sums and reductions.
//===----------------------------------------------------------------------===//

TEST(OnnxSemantics, TriluKeepsUpperOrLowerTriangle) {
  ValueInfo ones = constInts({3, 3}, Ints(9, 1));
  ValueInfo lower = inferOne(
      [] {
        onnx::NodeProto node = makeNode("Trilu");
        setInt(node, "upper", 0);
        return node;
      }(),
      14, {&ones});
  EXPECT_EQ(intsOf(lower), Ints({1, 0, 0, 1, 1, 0, 1, 1, 1}));

  ValueInfo k = constInts({}, {1});
  ValueInfo strictUpper = inferOne(makeNode("Trilu", 2), 14, {&ones, &k});
  EXPECT_EQ(intsOf(strictUpper), Ints({0, 1, 1, 0, 0, 1, 0, 0, 0}));
}

TEST(OnnxSemantics, ScatterNDFoldsRowsAndElements) {
  ValueInfo data = constInts({2, 3}, {1, 2, 3, 4, 5, 6});
  // Row -1 (= 1) replaced.
  ValueInfo row = constInts({1, 1}, {-1});
  ValueInfo rowUpdates = constInts({1, 3}, {7, 8, 9});
  EXPECT_EQ(intsOf(inferOne(makeNode("ScatterND", 3), 17,
                            {&data, &row, &rowUpdates})),
            Ints({1, 2, 3, 7, 8, 9}));
  // Two writes of element (0, 2): the last one wins, as onnxruntime applies
  // the updates in order.
  ValueInfo cells = constInts({3, 2}, {0, 2, 1, 0, 0, 2});
  ValueInfo cellUpdates = constInts({3}, {10, 11, 12});
  EXPECT_EQ(intsOf(inferOne(makeNode("ScatterND", 3), 17,
                            {&data, &cells, &cellUpdates})),
            Ints({1, 2, 12, 11, 5, 6}));
  // Run-time updates: the shape only.
  ValueInfo runtimeUpdates = runtime({1, 3}, ElementType::I64);
  ValueInfo shapeOnly =
      inferOne(makeNode("ScatterND", 3), 17, {&data, &row, &runtimeUpdates});
  EXPECT_FALSE(shapeOnly.isConstant());
  EXPECT_EQ(shapeOnly.shape, Ints({2, 3}));
}

TEST(OnnxSemantics, ScatterNDSourceMapAndOrder) {
  HostTensor swapped = HostTensor::fromInts(ElementType::I64, {2, 1}, {1, 0});
  ASSERT_EQ(messageOf(checkScatterND({2, 2}, swapped, {2, 2})), "");
  EXPECT_EQ(scatterNDSourceMap({2, 2}, swapped), Ints({2, 3, 0, 1}));
  EXPECT_FALSE(isInOrderScatterND({2, 2}, swapped));
  HostTensor rows = HostTensor::fromInts(ElementType::I64, {2, 1}, {0, -1});
  EXPECT_TRUE(isInOrderScatterND({2, 2}, rows));
  HostTensor cells = HostTensor::fromInts(ElementType::I64, {2, 2, 2},
                                          {0, 0, 0, 1, 1, 0, 1, 1});
  EXPECT_TRUE(isInOrderScatterND({2, 2, 3}, cells));
  HostTensor one = HostTensor::fromInts(ElementType::I64, {1, 1}, {1});
  EXPECT_FALSE(isInOrderScatterND({3, 2}, one));
  EXPECT_EQ(scatterNDSourceMap({3, 2}, one), Ints({-1, -1, 0, 1, -1, -1}));
  EXPECT_EQ(messageOf(checkScatterND({3, 2}, one, {2, 2})),
            "updates 2x2 must be 1x2 for data 3x2 and indices 1x1");
  HostTensor far = HostTensor::fromInts(ElementType::I64, {1, 1}, {-4});
  EXPECT_EQ(messageOf(checkScatterND({3, 2}, far, {1, 2})),
            "index -4 (indices tuple 0) out of range for axis 0 of size 3");
}

TEST(OnnxSemantics, CumSumExclusiveAndReverse) {
  ValueInfo data = constInts({4}, {1, 2, 3, 4});
  ValueInfo axis = constInts({}, {0});
  auto run = [&](bool exclusive, bool reverse) {
    onnx::NodeProto node = makeNode("CumSum", 2);
    setInt(node, "exclusive", exclusive);
    setInt(node, "reverse", reverse);
    return intsOf(inferOne(node, 14, {&data, &axis}));
  };
  EXPECT_EQ(run(false, false), Ints({1, 3, 6, 10}));
  EXPECT_EQ(run(true, false), Ints({0, 1, 3, 6}));
  EXPECT_EQ(run(false, true), Ints({10, 9, 7, 4}));
  EXPECT_EQ(run(true, true), Ints({9, 7, 4, 0}));

  ValueInfo matrix = constFloats({2, 2}, {1, 2, 3, 4});
  ValueInfo lastAxis = constInts({}, {-1}, ElementType::I32);
  EXPECT_EQ(floatsOf(inferOne(makeNode("CumSum", 2), 14, {&matrix, &lastAxis})),
            Floats({1, 3, 3, 7}));
}

TEST(OnnxSemantics, ReduceMeanAxesAttributeVersusInput) {
  ValueInfo data = constFloats({2, 3}, {1, 2, 3, 4, 5, 6});
  onnx::NodeProto attributeForm = makeNode("ReduceMean");
  setInts(attributeForm, "axes", {-1});
  ValueInfo out = inferOne(attributeForm, 17, {&data});
  EXPECT_EQ(out.shape, Shape({2, 1}));
  EXPECT_EQ(floatsOf(out), Floats({2, 5}));

  ValueInfo axes = constInts({1}, {0});
  onnx::NodeProto inputForm = makeNode("ReduceMean", 2);
  setInt(inputForm, "keepdims", 0);
  out = inferOne(inputForm, 18, {&data, &axes});
  EXPECT_EQ(out.shape, Shape({3}));
  EXPECT_EQ(floatsOf(out), Floats({2.5, 3.5, 4.5}));

  // No axes reduces everything, unless noop_with_empty_axes says otherwise.
  out = inferOne(makeNode("ReduceMean"), 18, {&data});
  EXPECT_EQ(out.shape, Shape({1, 1}));
  EXPECT_EQ(floatsOf(out), Floats({3.5}));
  onnx::NodeProto noop = makeNode("ReduceMean");
  setInt(noop, "noop_with_empty_axes", 1);
  EXPECT_EQ(inferOne(noop, 18, {&data}).shape, Shape({2, 3}));

  ValueInfo runtimeAxes = runtime({1}, ElementType::I64);
  EXPECT_EQ(inferError(inputForm, 18, {&data, &runtimeAxes}),
            "ReduceMean: axes (input 1) is not a compile-time constant");
}

TEST(OnnxSemantics, ReduceSumTakesAxesInputFromOpset13) {
  ValueInfo data = constInts({2, 3}, {1, 2, 3, 4, 5, 6});
  ValueInfo axes = constInts({1}, {1});
  EXPECT_EQ(intsOf(inferOne(makeNode("ReduceSum", 2), 13, {&data, &axes})),
            Ints({6, 15}));
  onnx::NodeProto attributeForm = makeNode("ReduceSum");
  setInts(attributeForm, "axes", {0});
  EXPECT_EQ(intsOf(inferOne(attributeForm, 11, {&data})), Ints({5, 7, 9}));

  onnx::NodeProto reduceMax = makeNode("ReduceMax");
  setInts(reduceMax, "axes", {1});
  setInt(reduceMax, "keepdims", 0);
  EXPECT_EQ(intsOf(inferOne(reduceMax, 17, {&data})), Ints({3, 6}));
}

TEST(OnnxSemantics, ArgMax) {
  ValueInfo data = constFloats({2, 3}, {1, 9, 9, 7, 2, 3});
  onnx::NodeProto node = makeNode("ArgMax");
  setInt(node, "axis", 1);
  ValueInfo out = inferOne(node, 14, {&data});
  EXPECT_EQ(out.type, ElementType::I64);
  EXPECT_EQ(out.shape, Shape({2, 1}));
  EXPECT_EQ(intsOf(out), Ints({1, 0}));
  setInt(node, "select_last_index", 1);
  EXPECT_EQ(intsOf(inferOne(node, 14, {&data})), Ints({2, 0}));
}

TEST(OnnxSemantics, SoftmaxDefaultAxisChangesAtOpset13) {
  ValueInfo data = constFloats({2, 2}, {0, 0, 0, std::log(3.0)});
  // Opset 13: per row.
  Floats perRow = floatsOf(inferOne(makeNode("Softmax"), 13, {&data}));
  ASSERT_EQ(perRow.size(), 4u);
  EXPECT_EQ(perRow[0], 0.5);
  EXPECT_FLOAT_EQ(perRow[3], 0.75);
  // Opset 11: axis 1 coerces to 2-D, which for rank 2 is also per row; axis
  // 0 covers the whole tensor.
  onnx::NodeProto whole = makeNode("Softmax");
  setInt(whole, "axis", 0);
  Floats all = floatsOf(inferOne(whole, 11, {&data}));
  EXPECT_FLOAT_EQ(all[0], 1.0 / 6.0);
  EXPECT_FLOAT_EQ(all[3], 0.5);
  // At opset 13, axis 0 is per column.
  Floats perColumn = floatsOf(inferOne(whole, 13, {&data}));
  EXPECT_EQ(perColumn[0], 0.5);
  EXPECT_FLOAT_EQ(perColumn[1], 0.25);
}

TEST(OnnxSemantics, LayerNormalization) {
  ValueInfo data = constFloats({2, 2}, {1, 3, 0, 4});
  ValueInfo scale = constFloats({2}, {2, 1});
  ValueInfo bias = constFloats({2}, {0, 10});
  onnx::NodeProto node = makeNode("LayerNormalization", 3, 3);
  setFloat(node, "epsilon", 0);
  std::vector<ValueInfo> outputs;
  ASSERT_EQ(messageOf(inferNode(node, 17, {&data, &scale, &bias}, outputs)),
            "");
  ASSERT_EQ(outputs.size(), 3u);
  EXPECT_EQ(floatsOf(outputs[0]), Floats({-2, 11, -2, 11}));
  EXPECT_EQ(outputs[1].shape, Shape({2, 1}));
  EXPECT_EQ(floatsOf(outputs[1]), Floats({2, 2}));
  EXPECT_EQ(floatsOf(outputs[2]), Floats({1, 0.5}));

  ValueInfo hidden = runtime({1, 9, 768});
  ValueInfo gamma = runtime({768});
  ValueInfo out =
      inferOne(makeNode("LayerNormalization", 2), 17, {&hidden, &gamma});
  EXPECT_EQ(out.shape, Shape({1, 9, 768}));
}

//===----------------------------------------------------------------------===//
// Linear algebra.
//===----------------------------------------------------------------------===//

TEST(OnnxSemantics, MatMulShapes) {
  auto shapeOf = [](Shape a, Shape b) {
    ValueInfo lhs = runtime(a), rhs = runtime(b);
    return inferOne(makeNode("MatMul", 2), 14, {&lhs, &rhs}).shape;
  };
  EXPECT_EQ(shapeOf({2, 3}, {3}), Shape({2}));
  EXPECT_EQ(shapeOf({3}, {3, 4}), Shape({4}));
  EXPECT_EQ(shapeOf({3}, {3}), Shape({}));
  EXPECT_EQ(shapeOf({2, 1, 2, 3}, {5, 3, 4}), Shape({2, 5, 2, 4}));

  ValueInfo lhs = runtime({2, 3}), rhs = runtime({4, 5});
  EXPECT_EQ(inferError(makeNode("MatMul", 2), 14, {&lhs, &rhs}),
            "MatMul: inner dimensions differ: 2x3 times 4x5");
}

TEST(OnnxSemantics, MatMulValuesForRotaryTable) {
  // The rotary exporter pattern: positions (S x 1) times inverse frequencies
  // (1 x D/2), batched against a broadcast lhs.
  ValueInfo positions = constFloats({3, 1}, {0, 1, 2});
  ValueInfo frequencies = constFloats({1, 2}, {1, 0.5});
  ValueInfo out =
      inferOne(makeNode("MatMul", 2), 14, {&positions, &frequencies});
  EXPECT_EQ(out.shape, Shape({3, 2}));
  EXPECT_EQ(floatsOf(out), Floats({0, 0, 1, 0.5, 2, 1}));

  ValueInfo batch = constFloats({2, 1, 2}, {1, 2, 3, 4});
  ValueInfo matrix = constFloats({2, 2}, {1, 0, 0, 2});
  EXPECT_EQ(floatsOf(inferOne(makeNode("MatMul", 2), 14, {&batch, &matrix})),
            Floats({1, 4, 3, 8}));
}

TEST(OnnxSemantics, GemmTransposeAlphaBeta) {
  ValueInfo a = constFloats({1, 2}, {1, 2});
  ValueInfo b = constFloats({3, 2}, {1, 0, 0, 1, 1, 1});
  ValueInfo c = constFloats({3}, {10, 20, 30});
  onnx::NodeProto node = makeNode("Gemm", 3);
  setInt(node, "transB", 1);
  setFloat(node, "alpha", 2);
  setFloat(node, "beta", 0.5);
  ValueInfo out = inferOne(node, 14, {&a, &b, &c});
  EXPECT_EQ(out.shape, Shape({1, 3}));
  EXPECT_EQ(floatsOf(out), Floats({7, 14, 21}));
}

//===----------------------------------------------------------------------===//
// Misc ops and dispatch.
//===----------------------------------------------------------------------===//

TEST(OnnxSemantics, ConstantAttributes) {
  onnx::NodeProto node = makeNode("Constant", 0);
  setInts(node, "value_ints", {3, -1});
  ValueInfo out = inferOne(node, 14, {});
  EXPECT_EQ(out.type, ElementType::I64);
  EXPECT_EQ(intsOf(out), Ints({3, -1}));

  onnx::NodeProto scalar = makeNode("Constant", 0);
  setFloat(scalar, "value_float", 0.1f);
  out = inferOne(scalar, 14, {});
  EXPECT_TRUE(out.shape.empty());
  EXPECT_EQ(floatsOf(out), Floats({static_cast<double>(0.1f)}));
}

TEST(OnnxSemantics, DropoutIsIdentityWithTrueMask) {
  ValueInfo data = constFloats({2}, {1, 2});
  ValueInfo ratio = constFloats({}, {0.1});
  ValueInfo training = constBools({}, {0});
  std::vector<ValueInfo> outputs;
  ASSERT_EQ(messageOf(inferNode(makeNode("Dropout", 3, 2), 14,
                                {&data, &ratio, &training}, outputs)),
            "");
  EXPECT_EQ(floatsOf(outputs[0]), Floats({1, 2}));
  EXPECT_EQ(outputs[1].type, ElementType::Bool);
  EXPECT_EQ(intsOf(outputs[1]), Ints({1, 1}));

  ValueInfo trainingOn = constBools({}, {1});
  EXPECT_EQ(messageOf(inferNode(makeNode("Dropout", 3, 2), 14,
                                {&data, &ratio, &trainingOn}, outputs)),
            "Dropout: training mode is not supported");
}

TEST(OnnxSemantics, IsNaNAndIsInf) {
  double inf = std::numeric_limits<double>::infinity();
  ValueInfo x = constFloats({3}, {std::nan(""), inf, -inf});
  EXPECT_EQ(intsOf(inferOne(makeNode("IsNaN"), 14, {&x})), Ints({1, 0, 0}));
  onnx::NodeProto positiveOnly = makeNode("IsInf");
  setInt(positiveOnly, "detect_negative", 0);
  EXPECT_EQ(intsOf(inferOne(positiveOnly, 14, {&x})), Ints({0, 1, 0}));
}

TEST(OnnxSemantics, UnknownOpsAndMissingInputs) {
  ValueInfo x = runtime({2});
  EXPECT_EQ(inferError(makeNode("Einsum"), 14, {&x}),
            "Einsum: unsupported operator (opset 14)");
  onnx::NodeProto custom = makeNode("Add", 2);
  custom.set_domain("com.microsoft");
  EXPECT_EQ(inferError(custom, 14, {&x, &x}),
            "Add: unsupported domain 'com.microsoft'");
  EXPECT_EQ(inferError(makeNode("Add", 2), 14, {&x, nullptr}),
            "Add: required input 1 is missing");
  EXPECT_TRUE(isKnownOp("LayerNormalization"));
  EXPECT_FALSE(isKnownOp("Einsum"));
  EXPECT_TRUE(std::is_sorted(knownOps().begin(), knownOps().end()));
  EXPECT_NE(std::find(knownOps().begin(), knownOps().end(), "Trilu"),
            knownOps().end());
}

//===----------------------------------------------------------------------===//
// Inputs that cannot be trusted: sizes, attribute types, empty tensors.
//===----------------------------------------------------------------------===//

TEST(OnnxSemantics, CheckedSizes) {
  EXPECT_EQ(checkedNumElements({2, 3}), 6);
  EXPECT_EQ(checkedNumElements({}), 1);
  EXPECT_EQ(checkedNumElements({0, 5}), 0);
  EXPECT_EQ(checkedNumElements({2, -1}), std::nullopt);
  EXPECT_EQ(checkedNumElements({int64_t(1) << 32, int64_t(1) << 31}),
            std::nullopt);
  // Saturates rather than wraps, so no caller sizes a buffer from a wrap.
  EXPECT_EQ(numElements({int64_t(1) << 32, int64_t(1) << 32}), kInt64Max);
  EXPECT_EQ(
      messageOf(checkTensorSize({2000000000, 2000000000}, ElementType::F32)),
      "shape 2000000000x2000000000 of f32 holds more than 2^63-1 "
      "bytes");
  EXPECT_EQ(messageOf(checkTensorSize({3, -2}, ElementType::I64)),
            "shape 3x-2 has negative dimension -2");
  EXPECT_EQ(messageOf(checkTensorSize({1 << 20, 1 << 20}, ElementType::F64)),
            "");
}

TEST(OnnxSemantics, MistypedAttributesAreRefused) {
  ValueInfo a = runtime({3, 2}), b = runtime({3, 4});
  onnx::NodeProto gemm = makeNode("Gemm", 2);
  onnx::AttributeProto *transA = gemm.add_attribute();
  transA->set_name("transA");
  transA->set_type(onnx::AttributeProto::STRING);
  transA->set_s("1");
  EXPECT_EQ(inferError(gemm, 17, {&a, &b}),
            "Gemm: attribute 'transA' must be INT, got STRING");

  ValueInfo x = runtime({2, 3});
  onnx::NodeProto concat = makeNode("Concat", 2);
  setFloat(concat, "axis", 1);
  EXPECT_EQ(inferError(concat, 17, {&x, &x}),
            "Concat: attribute 'axis' must be INT, got FLOAT");
  // An attribute the op does not have is refused too (a misspelt one would
  // otherwise be silently ignored).
  onnx::NodeProto relu = makeNode("Relu");
  setFloat(relu, "alpha", 1);
  EXPECT_EQ(inferError(relu, 17, {&x}), "Relu: unknown attribute 'alpha'");
}

TEST(OnnxSemantics, EmptyOutputsAreKnown) {
  ValueInfo empty = runtime({0, 3});
  ValueInfo negated = inferOne(makeNode("Neg"), 17, {&empty});
  ASSERT_TRUE(negated.value.has_value());
  EXPECT_EQ(negated.value->shape, Shape({0, 3}));
  EXPECT_TRUE(negated.value->floats.empty());
}

TEST(OnnxSemantics, ShapeArithmeticOverflowIsAnError) {
  ValueInfo data = runtime({2});
  ValueInfo repeats = constInts({1}, {kInt64Max});
  EXPECT_EQ(inferError(makeNode("Tile", 2), 17, {&data, &repeats}),
            "Tile: tiled dimension 0 overflows int64 (2 * "
            "9223372036854775807)");

  ValueInfo start = constInts({}, {kInt64Min + 1}),
            limit = constInts({}, {kInt64Max});
  ValueInfo one = constInts({}, {1});
  EXPECT_EQ(inferError(makeNode("Range", 3), 17, {&start, &limit, &one}),
            "Range: the range has more than 2^63-1 elements");

  // num_outputs is checked against the outputs before anything is sized by
  // it (2^62 chunks used to be allocated).
  ValueInfo wide = runtime({8});
  onnx::NodeProto split = makeNode("Split", 1, 2);
  setInt(split, "num_outputs", int64_t(1) << 62);
  EXPECT_EQ(inferError(split, 18, {&wide}),
            "Split: num_outputs 4611686018427387904 does not match 2 outputs");

  ValueInfo target = constInts({2}, {2, -1});
  ValueInfo scalar = constFloats({}, {1.0});
  EXPECT_EQ(inferError(makeNode("Expand", 2), 17, {&scalar, &target}),
            "Expand: the target shape [2, -1] has negative dimension -1");
}

TEST(OnnxSemantics, ReduceAttributesFollowTheOpset) {
  ValueInfo x = runtime({2, 3});
  // Before opset 18 the importer would read noop_with_empty_axes where
  // inference reduces every axis; the node is refused instead.
  onnx::NodeProto mean = makeNode("ReduceMean");
  setInt(mean, "noop_with_empty_axes", 1);
  EXPECT_EQ(inferError(mean, 13, {&x}),
            "ReduceMean: noop_with_empty_axes exists from opset 18 (the "
            "model is opset 13)");
  ValueInfo floatAxes = constFloats({1}, {1});
  EXPECT_EQ(inferError(makeNode("ReduceMean", 2), 18, {&x, &floatAxes}),
            "ReduceMean: axes (input 1) must be i64, got f32");
}

TEST(OnnxSemantics, LayerNormalizationNeedsOpset17AndOneType) {
  ValueInfo x = runtime({2, 4}), scale = runtime({4});
  EXPECT_EQ(inferError(makeNode("LayerNormalization", 2), 16, {&x, &scale}),
            "LayerNormalization: is an operator of opset 17 and later; the "
            "model is opset 16");
  ValueInfo intScale = runtime({4}, ElementType::I32);
  EXPECT_EQ(inferError(makeNode("LayerNormalization", 2), 17, {&x, &intScale}),
            "LayerNormalization: element types f32 and i32 differ");
}

//===----------------------------------------------------------------------===//
// Tensor decoding.
//===----------------------------------------------------------------------===//

TEST(OnnxSemantics, DecodeFloat16RawData) {
  onnx::TensorProto proto;
  proto.set_data_type(onnx::TensorProto::FLOAT16);
  proto.add_dims(5);
  // 1.0, -2.0, 65504 (max), smallest subnormal, +inf; little-endian.
  const unsigned char bytes[] = {0x00, 0x3c, 0x00, 0xc0, 0xff,
                                 0x7b, 0x01, 0x00, 0x00, 0x7c};
  proto.set_raw_data(
      std::string(reinterpret_cast<const char *>(bytes), sizeof(bytes)));
  HostTensor tensor;
  ASSERT_EQ(messageOf(decodeTensor(proto, tensor)), "");
  EXPECT_EQ(tensor.type, ElementType::F16);
  EXPECT_EQ(tensor.shape, Shape({5}));
  ASSERT_EQ(tensor.floats.size(), 5u);
  EXPECT_EQ(tensor.floats[0], 1.0);
  EXPECT_EQ(tensor.floats[1], -2.0);
  EXPECT_EQ(tensor.floats[2], 65504.0);
  EXPECT_EQ(tensor.floats[3], std::ldexp(1.0, -24));
  EXPECT_TRUE(std::isinf(tensor.floats[4]) && tensor.floats[4] > 0);
}

TEST(OnnxSemantics, DecodeHalfBitsFromInt32DataAndBFloat16) {
  onnx::TensorProto half;
  half.set_data_type(onnx::TensorProto::FLOAT16);
  half.add_int32_data(0x3555); // 0.333251953125
  HostTensor tensor;
  ASSERT_EQ(messageOf(decodeTensor(half, tensor)), "");
  EXPECT_TRUE(tensor.shape.empty());
  EXPECT_EQ(tensor.floats, Floats({0.333251953125}));

  onnx::TensorProto bfloat;
  bfloat.set_data_type(onnx::TensorProto::BFLOAT16);
  bfloat.add_dims(2);
  const unsigned char bytes[] = {0x80, 0x3f, 0x40, 0xc0}; // 1.0, -3.0
  bfloat.set_raw_data(std::string(reinterpret_cast<const char *>(bytes), 4));
  ASSERT_EQ(messageOf(decodeTensor(bfloat, tensor)), "");
  EXPECT_EQ(tensor.floats, Floats({1.0, -3.0}));
}

TEST(OnnxSemantics, DecodeTypedAndRawIntegers) {
  onnx::TensorProto ints;
  ints.set_name("shape");
  ints.set_data_type(onnx::TensorProto::INT64);
  ints.add_dims(2);
  ints.add_int64_data(-1);
  ints.add_int64_data(768);
  HostTensor tensor;
  ASSERT_EQ(messageOf(decodeTensor(ints, tensor)), "");
  EXPECT_EQ(tensor.ints, Ints({-1, 768}));

  onnx::TensorProto raw;
  raw.set_data_type(onnx::TensorProto::INT32);
  raw.add_dims(1);
  const unsigned char bytes[] = {0xfe, 0xff, 0xff, 0xff}; // -2
  raw.set_raw_data(std::string(reinterpret_cast<const char *>(bytes), 4));
  ASSERT_EQ(messageOf(decodeTensor(raw, tensor)), "");
  EXPECT_EQ(tensor.type, ElementType::I32);
  EXPECT_EQ(tensor.ints, Ints({-2}));

  ints.add_dims(3);
  EXPECT_EQ(messageOf(decodeTensor(ints, tensor)),
            "tensor 'shape' holds 2 elements, expected 6");
}

TEST(OnnxSemantics, DecodeExternalAndFloatData) {
  onnx::TensorProto external;
  external.set_name("w");
  external.set_data_type(onnx::TensorProto::FLOAT);
  external.add_dims(1);
  external.set_data_location(onnx::TensorProto::EXTERNAL);
  HostTensor tensor;
  EXPECT_EQ(messageOf(decodeTensor(external, tensor)),
            "tensor 'w' stores its data externally and no bytes were given");
  float value = -0.75f;
  std::string bytes(reinterpret_cast<const char *>(&value), sizeof(value));
  ASSERT_EQ(messageOf(decodeTensor(external, tensor, &bytes)), "");
  EXPECT_EQ(tensor.floats, Floats({-0.75}));

  onnx::TensorProto inline_;
  inline_.set_data_type(onnx::TensorProto::FLOAT);
  inline_.add_float_data(2.5f);
  ASSERT_EQ(messageOf(decodeTensor(inline_, tensor)), "");
  EXPECT_EQ(tensor.getDouble(0), 2.5);
  EXPECT_EQ(tensor.getInt(0), 2);
}

} // namespace
