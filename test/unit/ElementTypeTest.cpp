//===- ElementTypeTest.cpp - the one table of element types ---------------===//
//
// runtime/support/ElementType.h is the only place the compiler, the plan,
// npy I/O and the kernels learn a type's size and spellings. Each row must
// round-trip through every spelling it has, its plan number must be
// plan.proto's DataType value of the same name, and plan::dataTypeSize must
// answer from it.
//
//===----------------------------------------------------------------------===//

#include "runtime/support/ElementType.h"
#include "runtime/plan/PlanLoader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <iterator>
#include <set>
#include <utility>

using namespace zplan;

namespace {

constexpr size_t kRows = sizeof(kElementTypes) / sizeof(kElementTypes[0]);

TEST(ElementType, EveryRowRoundTripsThroughEverySpelling) {
  for (const ElementTypeInfo &info : kElementTypes) {
    SCOPED_TRACE(std::string(info.name));
    EXPECT_EQ(&elementTypeInfo(info.type), &info);
    EXPECT_EQ(elementTypeFromOnnx(info.onnx), info.type);
    EXPECT_EQ(elementTypeFromPlan(info.plan), info.type);
    EXPECT_EQ(elementTypeFromName(info.name), info.type);
    if (info.npyDescr.empty()) {
      EXPECT_FALSE(elementTypeFromNpyDescr(info.npyDescr).has_value());
    } else {
      EXPECT_EQ(elementTypeFromNpyDescr(info.npyDescr), info.type);
    }
  }
}

TEST(ElementType, SpellingsAreUnique) {
  std::set<int32_t> onnx, plans;
  std::set<std::string_view> names, numpyNames, descrs;
  for (const ElementTypeInfo &info : kElementTypes) {
    EXPECT_TRUE(onnx.insert(info.onnx).second) << info.name;
    EXPECT_TRUE(plans.insert(info.plan).second) << info.name;
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_TRUE(numpyNames.insert(info.numpyName).second) << info.name;
    if (!info.npyDescr.empty()) {
      EXPECT_TRUE(descrs.insert(info.npyDescr).second) << info.name;
    }
  }
}

TEST(ElementType, PlanNumbersAreThoseOfPlanProto) {
  // Each row's plan number is the DataType value of the same name, and
  // every DataType value but DATA_TYPE_UNSPECIFIED has a row.
  const std::pair<ElementType, const char *> protoNames[] = {
      {ElementType::F32, "F32"},   {ElementType::F16, "F16"},
      {ElementType::BF16, "BF16"}, {ElementType::F64, "F64"},
      {ElementType::I64, "I64"},   {ElementType::I32, "I32"},
      {ElementType::I8, "I8"},     {ElementType::U8, "U8"},
      {ElementType::Bool, "BOOL"}};
  ASSERT_EQ(std::size(protoNames), kRows);
  for (const auto &[type, protoName] : protoNames) {
    int32_t number = elementTypeInfo(type).plan;
    ASSERT_TRUE(plan::DataType_IsValid(number)) << protoName;
    EXPECT_EQ(plan::DataType_Name(static_cast<plan::DataType>(number)),
              protoName);
  }
  size_t values = 0;
  for (int value = plan::DataType_MIN; value <= plan::DataType_MAX; ++value)
    if (plan::DataType_IsValid(value) && value != plan::DATA_TYPE_UNSPECIFIED) {
      ++values;
      EXPECT_TRUE(elementTypeFromPlan(value).has_value()) << value;
    }
  EXPECT_EQ(values, kRows);
  EXPECT_FALSE(elementTypeFromPlan(plan::DATA_TYPE_UNSPECIFIED).has_value());
}

TEST(ElementType, DataTypeSizeIsTheTables) {
  for (const ElementTypeInfo &info : kElementTypes)
    EXPECT_EQ(plan::dataTypeSize(static_cast<plan::DataType>(info.plan)),
              info.bytes)
        << info.name;
  EXPECT_EQ(plan::dataTypeSize(plan::DATA_TYPE_UNSPECIFIED), 0u);
  EXPECT_EQ(plan::dataTypeSize(static_cast<plan::DataType>(77)), 0u);
}

TEST(ElementType, QuietNaNsAreNaNs) {
  float f32;
  uint32_t bits32 =
      static_cast<uint32_t>(elementTypeInfo(ElementType::F32).quietNaN);
  std::memcpy(&f32, &bits32, 4);
  EXPECT_TRUE(f32 != f32);
  double f64;
  uint64_t bits64 = elementTypeInfo(ElementType::F64).quietNaN;
  std::memcpy(&f64, &bits64, 8);
  EXPECT_TRUE(f64 != f64);
  for (const ElementTypeInfo &info : kElementTypes)
    EXPECT_EQ(info.quietNaN != 0, info.isFloat) << info.name;
}

} // namespace
