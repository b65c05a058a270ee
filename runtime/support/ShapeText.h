//===- ShapeText.h - how runtime messages print a shape -------------------===//
//
// "[2, 16, 64]": one spelling for every message of the runtime, kernels and
// plan checks alike, whatever holds the dimensions (a std::vector, a
// protobuf repeated field, an initializer list).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SUPPORT_SHAPETEXT_H
#define ZPLAN_RUNTIME_SUPPORT_SHAPETEXT_H

#include <cstdint>
#include <initializer_list>
#include <string>

namespace zplan {

/// "[2, 16, 64]"; "[]" for a scalar.
template <typename Dimensions> std::string shapeText(const Dimensions &shape) {
  std::string text = "[";
  bool first = true;
  for (auto dimension : shape) {
    text += (first ? "" : ", ") + std::to_string(dimension);
    first = false;
  }
  return text + "]";
}

inline std::string shapeText(std::initializer_list<int64_t> shape) {
  return shapeText<std::initializer_list<int64_t>>(shape);
}

} // namespace zplan

#endif // ZPLAN_RUNTIME_SUPPORT_SHAPETEXT_H
