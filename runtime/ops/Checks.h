//===- Checks.h - operand, type and shape checks every op starts with -----===//
//
// Shared validation for every backend to call: the arity, element-type and
// shape checks of a compute instruction, each returning "<op>: <what was
// wrong and the values>" (STYLE: repeated checks go through one helper, so
// every message reads the same), and the names they print shapes and
// element types with. A backend's kernel runs them before it reads or
// writes an element, and the family checks of the *Ops.h headers are built
// from them.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_CHECKS_H
#define ZPLAN_RUNTIME_OPS_CHECKS_H

#include "runtime/ops/KernelCall.h"
#include "runtime/support/ShapeText.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace zplan::ops {

/// "f32", "i64", "i1", ...: the element-type table's (MLIR) names.
const char *dataTypeName(ElementType type);
/// Bytes per element, from the element-type table.
int64_t elementBytes(ElementType type);

/// Operand count in [minimum, maximum] and exactly `results` results.
Status expectArity(const KernelCall &call, size_t minimum, size_t maximum,
                   size_t results = 1);
/// `tensor` (called `what` in the message) has element type `type`.
Status expectType(const KernelCall &call, const char *what,
                  const TensorRef &tensor, ElementType type);
/// `tensor` (called `what`) has shape `shape`.
Status expectShape(const KernelCall &call, const char *what,
                   const TensorRef &tensor, const std::vector<int64_t> &shape);
/// `tensor` (called `what`) has the element type and shape of `like`.
Status expectLike(const KernelCall &call, const char *what,
                  const TensorRef &tensor, const TensorRef &like);
/// `tensor` (called `what`) is f32 or f64: the training kernels' gradients
/// and logits, checked before anything else about them.
Status expectFloatType(const KernelCall &call, const char *what,
                       const TensorRef &tensor);

/// The bytes per element of `type` (of the tensor called `what`), for a
/// kernel that moves elements as bytes; an error when the element-type
/// table gives it no size.
Status movableElementBytes(const KernelCall &call, const char *what,
                           ElementType type, int64_t &bytes);

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_CHECKS_H
