//===- TypeDispatch.h - element type to C++ type, one rule per backend ----===//
//
// Shared validation for every backend to call: which element types a
// kernel takes, and the C++ type each is computed in. A kernel body is a
// generic lambda called with TypeTag<T>; an element type outside the set
// is an error naming the op and the tensor, the same on every backend.
// bool is stored as uint8_t (0 or 1) everywhere.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_TYPEDISPATCH_H
#define ZPLAN_RUNTIME_OPS_TYPEDISPATCH_H

#include "runtime/ops/Checks.h"
#include "runtime/ops/KernelCall.h"

#include <cstdint>
#include <string>

namespace zplan::ops {

template <typename T> struct TypeTag {
  using type = T;
};

/// Calls fn(TypeTag<T>{}) for the C++ type of `type` among f32, f64, i64,
/// i32, i8, u8 and bool (stored as uint8_t, 0 or 1); fn returns a Status.
/// Anything else (f16, bf16) is an error naming the op and `what`.
template <typename Fn>
Status dispatchType(const KernelCall &call, const char *what, ElementType type,
                    Fn &&fn) {
  switch (type) {
  case ElementType::F32:
    return fn(TypeTag<float>{});
  case ElementType::F64:
    return fn(TypeTag<double>{});
  case ElementType::I64:
    return fn(TypeTag<int64_t>{});
  case ElementType::I32:
    return fn(TypeTag<int32_t>{});
  case ElementType::I8:
    return fn(TypeTag<int8_t>{});
  case ElementType::U8:
  case ElementType::Bool:
    return fn(TypeTag<uint8_t>{});
  default:
    return call.error(std::string(what) + " has element type " +
                      dataTypeName(type) + ", which the kernels lack");
  }
}

/// As dispatchType, for f32 and f64 only.
template <typename Fn>
Status dispatchFloatType(const KernelCall &call, const char *what,
                         ElementType type, Fn &&fn) {
  switch (type) {
  case ElementType::F32:
    return fn(TypeTag<float>{});
  case ElementType::F64:
    return fn(TypeTag<double>{});
  default:
    return call.error(std::string(what) + " has element type " +
                      dataTypeName(type) + ", expected f32 or f64");
  }
}

/// Calls fn(TypeTag<T>{}) with an unsigned integer type as wide as one
/// element of `type`: for kernels that only move elements around.
template <typename Fn>
Status dispatchBySize(const KernelCall &call, const char *what,
                      ElementType type, Fn &&fn) {
  switch (elementBytes(type)) {
  case 1:
    return fn(TypeTag<uint8_t>{});
  case 2:
    return fn(TypeTag<uint16_t>{});
  case 4:
    return fn(TypeTag<uint32_t>{});
  case 8:
    return fn(TypeTag<uint64_t>{});
  default:
    return call.error(std::string(what) + " has element type " +
                      dataTypeName(type) + ", which the kernels lack");
  }
}

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_TYPEDISPATCH_H
