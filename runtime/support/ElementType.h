//===- ElementType.h - the one table of element types ---------------------===//
//
// Every element type zplan knows, with its size and the way each side spells
// it: the ONNX TensorProto number the importer reads, the plan.proto
// DataType number zcc writes and zrun reads, the MLIR spelling the IR and
// compiler diagnostics use, NumPy's name for user-facing runtime messages,
// the .npy header descriptor, and the quiet NaN `zrun --check` poisons
// released buffers with. The compiler, the plan, npy I/O and the
// kernels all look types up here, so adding a type is one row, not a switch
// in each of them.
//
// Header-only and free of protobuf, LLVM and MLIR: the runtime builds with
// plain flags and the compiler with LLVM's, and both include it. The plan
// numbers are checked against plan.proto where both are visible: static
// asserts beside plan::dataTypeSize (runtime/plan/PlanLoader.cpp), and
// test/unit/ElementTypeTest.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SUPPORT_ELEMENTTYPE_H
#define ZPLAN_RUNTIME_SUPPORT_ELEMENTTYPE_H

#include <cstdint>
#include <optional>
#include <string_view>

namespace zplan {

enum class ElementType : uint8_t {
  F32,
  F16,
  BF16,
  F64,
  I64,
  I32,
  I8,
  U8,
  Bool,
};

struct ElementTypeInfo {
  ElementType type;
  /// Bytes per element (Bool is one byte, as in ONNX raw data and NumPy).
  uint32_t bytes;
  bool isFloat;
  /// onnx::TensorProto::DataType.
  int32_t onnx;
  /// zplan.plan.DataType (runtime/plan/plan.proto).
  int32_t plan;
  /// As MLIR prints the type, and as compiler diagnostics and dumps name it.
  std::string_view name;
  /// NumPy's dtype name, as users see it in their arrays ("float32").
  std::string_view numpyName;
  /// The .npy header descriptor NumPy writes on a little-endian machine
  /// (one-byte types carry '|'); empty where NumPy has no such type.
  std::string_view npyDescr;
  /// The bits of one quiet NaN, little-endian in `bytes` bytes; 0 for the
  /// integer types, which have none.
  uint64_t quietNaN;
};

// clang-format off
inline constexpr ElementTypeInfo kElementTypes[] = {
  // type               bytes float  onnx plan  name    numpyName   npyDescr  quietNaN
  {ElementType::F32,    4,    true,   1,   1,   "f32",  "float32",  "<f4",    0x7FC00000},
  {ElementType::F16,    2,    true,  10,   2,   "f16",  "float16",  "<f2",    0x7E00},
  {ElementType::BF16,   2,    true,  16,   3,   "bf16", "bfloat16", "",       0x7FC0},
  {ElementType::F64,    8,    true,  11,   4,   "f64",  "float64",  "<f8",    0x7FF8000000000000},
  {ElementType::I64,    8,    false,  7,   5,   "i64",  "int64",    "<i8",    0},
  {ElementType::I32,    4,    false,  6,   6,   "i32",  "int32",    "<i4",    0},
  {ElementType::I8,     1,    false,  3,   7,   "i8",   "int8",     "|i1",    0},
  {ElementType::U8,     1,    false,  2,   8,   "ui8",  "uint8",    "|u1",    0},
  {ElementType::Bool,   1,    false,  9,   9,   "i1",   "bool",     "|b1",    0},
};
// clang-format on

/// The row of `type`.
constexpr const ElementTypeInfo &elementTypeInfo(ElementType type) {
  return kElementTypes[static_cast<unsigned>(type)];
}

namespace detail {
template <typename Key, typename Field>
constexpr std::optional<ElementType> findElementType(Key key, Field field) {
  for (const ElementTypeInfo &info : kElementTypes)
    if (info.*field == key)
      return info.type;
  return std::nullopt;
}
} // namespace detail

/// Lookups by each side's spelling; nullopt for a type zplan does not know.
constexpr std::optional<ElementType> elementTypeFromOnnx(int32_t onnx) {
  return detail::findElementType(onnx, &ElementTypeInfo::onnx);
}
constexpr std::optional<ElementType> elementTypeFromPlan(int32_t plan) {
  return detail::findElementType(plan, &ElementTypeInfo::plan);
}
constexpr std::optional<ElementType>
elementTypeFromName(std::string_view name) {
  return detail::findElementType(name, &ElementTypeInfo::name);
}
/// An empty descriptor never matches: NumPy has no bfloat16.
constexpr std::optional<ElementType>
elementTypeFromNpyDescr(std::string_view descr) {
  if (descr.empty())
    return std::nullopt;
  return detail::findElementType(descr, &ElementTypeInfo::npyDescr);
}

// The table is indexed by the enum: its rows must stay in enum order.
namespace detail {
constexpr bool rowsInEnumOrder() {
  for (unsigned i = 0; i < sizeof(kElementTypes) / sizeof(kElementTypes[0]);
       ++i)
    if (static_cast<unsigned>(kElementTypes[i].type) != i)
      return false;
  return true;
}
static_assert(rowsInEnumOrder(), "kElementTypes rows must follow the enum");
} // namespace detail

} // namespace zplan

#endif // ZPLAN_RUNTIME_SUPPORT_ELEMENTTYPE_H
