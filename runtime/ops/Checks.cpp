//===- Checks.cpp - operand, type and shape checks every op starts with ---===//
//
// The messages name the tensor as the op's definition does ("rhs",
// "result", "dy") and give the value found and the one expected.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/Checks.h"
#include "runtime/support/ShapeText.h"

namespace zplan::ops {

const char *dataTypeName(ElementType type) {
  // The table's names are literals, so their data is null-terminated.
  return elementTypeInfo(type).name.data();
}

int64_t elementBytes(ElementType type) { return elementTypeInfo(type).bytes; }

Status expectArity(const KernelCall &call, size_t minimum, size_t maximum,
                   size_t results) {
  size_t count = call.operands.size();
  if (count < minimum || count > maximum) {
    std::string expected =
        minimum == maximum
            ? std::to_string(minimum)
            : std::to_string(minimum) + " to " + std::to_string(maximum);
    return call.error("takes " + expected + " operands, got " +
                      std::to_string(count));
  }
  if (call.results.size() != results)
    return call.error("has " + std::to_string(results) + " result" +
                      (results == 1 ? "" : "s") + ", got " +
                      std::to_string(call.results.size()));
  return Status::success();
}

Status expectType(const KernelCall &call, const char *what,
                  const TensorRef &tensor, ElementType type) {
  if (tensor.dtype == type)
    return Status::success();
  return call.error(std::string(what) + " has element type " +
                    dataTypeName(tensor.dtype) + ", expected " +
                    dataTypeName(type));
}

Status expectShape(const KernelCall &call, const char *what,
                   const TensorRef &tensor, const std::vector<int64_t> &shape) {
  if (tensor.shape == shape)
    return Status::success();
  return call.error(std::string(what) + " has shape " +
                    shapeText(tensor.shape) + ", expected " + shapeText(shape));
}

Status expectLike(const KernelCall &call, const char *what,
                  const TensorRef &tensor, const TensorRef &like) {
  if (Status status = expectType(call, what, tensor, like.dtype); !status.ok())
    return status;
  return expectShape(call, what, tensor, like.shape);
}

Status expectFloatType(const KernelCall &call, const char *what,
                       const TensorRef &tensor) {
  if (tensor.dtype == ElementType::F32 || tensor.dtype == ElementType::F64)
    return Status::success();
  return call.error(std::string(what) + " has element type " +
                    dataTypeName(tensor.dtype) + ", expected f32 or f64");
}

Status movableElementBytes(const KernelCall &call, const char *what,
                           ElementType type, int64_t &bytes) {
  bytes = elementBytes(type);
  if (bytes != 0)
    return Status::success();
  return call.error(std::string(what) + " has element type " +
                    dataTypeName(type) + ", which the kernels lack");
}

} // namespace zplan::ops
