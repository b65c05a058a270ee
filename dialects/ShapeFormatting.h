//===- ShapeFormatting.h - how the compiler's messages print a shape ------===//
//
// Verifiers, the importer, the ONNX semantics and the passes all name shapes
// in their messages, and they print them the same way. The header needs
// nothing but LLVM's ADT, so that the importer's MLIR-free ONNX semantics
// (compiler/import/semantics/) uses it too. (The runtime, which links no
// LLVM, has its own.)
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_DIALECTS_SHAPEFORMATTING_H
#define ZPLAN_DIALECTS_SHAPEFORMATTING_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace zplan {

namespace detail {
/// The dimensions of `shape` with `separator` between them.
inline std::string joinDims(llvm::ArrayRef<int64_t> shape,
                            llvm::StringRef separator) {
  std::string text;
  llvm::interleave(
      shape, [&](int64_t dim) { text += std::to_string(dim); },
      [&] { text += separator; });
  return text;
}
} // namespace detail

/// "2x16x64", or "scalar" for rank 0: how every message prints a shape.
inline std::string formatShape(llvm::ArrayRef<int64_t> shape) {
  if (shape.empty())
    return "scalar";
  return detail::joinDims(shape, "x");
}

/// "[2, 16, 64]": a shape printed beside a layout written the same way
/// ("its keys [1, 1, 3, 4] do not come from a [batch 1, heads, ...]").
inline std::string formatShapeAsList(llvm::ArrayRef<int64_t> shape) {
  return "[" + detail::joinDims(shape, ", ") + "]";
}

} // namespace zplan

#endif // ZPLAN_DIALECTS_SHAPEFORMATTING_H
