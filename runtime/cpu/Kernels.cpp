//===- Kernels.cpp - opcode -> CPU kernel, and the shared helpers ---------===//
//
// The dispatch table from compute opcodes (runtime/plan/Opcodes.h) to the
// kernel families in this directory, the BLAS thread setting, and the
// attribute/shape helpers of KernelSupport.h.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"

#include "runtime/plan/KernelTable.h"
#include "runtime/plan/Opcodes.h"

#include <cblas.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <utility>

namespace zplan::cpu {

using namespace detail;

namespace {

/// Set once the thread count is decided: by setBlasThreads(), or by the
/// first kernel call (1 thread, unless the environment names a count).
std::atomic<bool> blasThreadsChosen{false};

} // namespace

void detail::chooseDefaultBlasThreads() {
  if (blasThreadsChosen.exchange(true))
    return;
  // OpenBLAS otherwise starts one thread per core, and ranks share cores.
  if (!std::getenv("OPENBLAS_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS"))
    openblas_set_num_threads(1);
}

KernelFunction detail::findKernel(plan::Opcode opcode) {
  static const plan::KernelTable<KernelFunction> table({
#define ZPLAN_COMPUTE_KERNEL(opcode, function) {plan::opcode, function},
#include "runtime/plan/ComputeKernels.def"
  });
  return table.find(opcode);
}

Status runKernel(const plan::Instruction &instruction,
                 const std::vector<TensorRef> &operands,
                 const std::vector<TensorRef> &results) {
  KernelFunction function = findKernel(instruction.opcode());
  if (!function)
    return Status::error(plan::opcodeName(instruction.opcode()) +
                         ": no CPU kernel for this op");
  chooseDefaultBlasThreads();
  return function(KernelCall{instruction, operands, results});
}

bool hasKernel(plan::Opcode opcode) { return findKernel(opcode) != nullptr; }

void setBlasThreads(int threads) {
  blasThreadsChosen = true;
  openblas_set_num_threads(threads < 1 ? 1 : threads);
}

//===----------------------------------------------------------------------===//
// KernelSupport.h
//===----------------------------------------------------------------------===//

namespace detail {

std::string KernelCall::op() const {
  return plan::opcodeName(instruction.opcode());
}

Status KernelCall::error(const std::string &message) const {
  return Status::error(op() + ": " + message);
}

const plan::Attribute *findAttribute(const KernelCall &call,
                                     std::string_view name) {
  for (const plan::Attribute &attribute : call.instruction.attributes())
    if (attribute.name() == name)
      return &attribute;
  return nullptr;
}

Status intAttribute(const KernelCall &call, std::string_view name,
                    int64_t &value) {
  const plan::Attribute *attribute = findAttribute(call, name);
  if (!attribute)
    return call.error("missing attribute '" + std::string(name) + "'");
  if (attribute->ints_size() != 1)
    return call.error("attribute '" + std::string(name) +
                      "' should hold one integer, holds " +
                      std::to_string(attribute->ints_size()));
  value = attribute->ints(0);
  return Status::success();
}

int64_t intAttributeOr(const KernelCall &call, std::string_view name,
                       int64_t fallback) {
  const plan::Attribute *attribute = findAttribute(call, name);
  return attribute && attribute->ints_size() == 1 ? attribute->ints(0)
                                                  : fallback;
}

Status intsAttribute(const KernelCall &call, std::string_view name,
                     std::vector<int64_t> &values) {
  const plan::Attribute *attribute = findAttribute(call, name);
  if (!attribute)
    return call.error("missing attribute '" + std::string(name) + "'");
  values.assign(attribute->ints().begin(), attribute->ints().end());
  return Status::success();
}

Status floatAttribute(const KernelCall &call, std::string_view name,
                      double &value) {
  const plan::Attribute *attribute = findAttribute(call, name);
  if (!attribute)
    return call.error("missing attribute '" + std::string(name) + "'");
  if (attribute->floats_size() != 1)
    return call.error("attribute '" + std::string(name) +
                      "' should hold one float, holds " +
                      std::to_string(attribute->floats_size()));
  value = attribute->floats(0);
  return Status::success();
}

std::string textAttributeOr(const KernelCall &call, std::string_view name,
                            const std::string &fallback) {
  const plan::Attribute *attribute = findAttribute(call, name);
  return attribute ? attribute->text() : fallback;
}

std::string formatShape(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

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
                    formatShape(tensor.shape) + ", expected " +
                    formatShape(shape));
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
                    dataTypeName(type) + ", which the CPU backend lacks");
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = stride;
    stride *= shape[d];
  }
  return strides;
}

bool broadcastStrides(const std::vector<int64_t> &shape,
                      const std::vector<int64_t> &target,
                      std::vector<int64_t> &strides) {
  if (shape.size() > target.size())
    return false;
  std::vector<int64_t> own = contiguousStrides(shape);
  size_t lead = target.size() - shape.size();
  strides.assign(target.size(), 0);
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == target[lead + d])
      strides[lead + d] = shape[d] == 1 ? 0 : own[d];
    else if (shape[d] != 1)
      return false;
  }
  return true;
}

bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b,
                     std::vector<int64_t> &result) {
  size_t rank = std::max(a.size(), b.size());
  result.assign(rank, 1);
  for (size_t d = 0; d < rank; ++d) {
    int64_t x = d < rank - a.size() ? 1 : a[d - (rank - a.size())];
    int64_t y = d < rank - b.size() ? 1 : b[d - (rank - b.size())];
    if (x != y && x != 1 && y != 1)
      return false;
    result[d] = x == 1 ? y : x;
  }
  return true;
}

int64_t product(const std::vector<int64_t> &shape, size_t begin, size_t end) {
  int64_t count = 1;
  for (size_t d = begin; d < shape.size() && d < end; ++d)
    count *= shape[d];
  return count;
}

} // namespace detail
} // namespace zplan::cpu
