//===- ReductionOps.cpp - a reduction's checks and layout -----------------===//
//
// One numeric operand, "axes" sorted, unique and below its rank, and
// "keepdims"; the kept dimensions walk the result, the reduced ones each
// result element's inputs, both with the input's contiguous strides.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/ReductionOps.h"

#include "runtime/ops/Attributes.h"
#include "runtime/ops/Checks.h"
#include "runtime/ops/Shapes.h"

#include <string>

namespace zplan::ops {

Status readReduction(const KernelCall &call, ReductionLayout &layout) {
  if (Status status = expectArity(call, 1, 1); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (Status status = expectType(call, "result", result, input.dtype);
      !status.ok())
    return status;
  if (input.dtype == ElementType::Bool)
    return call.error("input has element type bool, expected a number");
  std::vector<int64_t> axes;
  if (Status status = intsAttribute(call, "axes", axes); !status.ok())
    return status;
  int64_t keepdims;
  if (Status status = intAttribute(call, "keepdims", keepdims); !status.ok())
    return status;
  int64_t rank = static_cast<int64_t>(input.shape.size());
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] < 0 || axes[i] >= rank)
      return call.error("axis " + std::to_string(axes[i]) +
                        " is out of range for rank " + std::to_string(rank));
    if (i > 0 && axes[i] <= axes[i - 1])
      return call.error("axes must be sorted and unique");
  }

  std::vector<int64_t> strides = contiguousStrides(input.shape);
  std::vector<int64_t> expected;
  layout = ReductionLayout();
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (next < axes.size() && axes[next] == d) {
      ++next;
      layout.reducedShape.push_back(input.shape[d]);
      layout.reducedStrides.push_back(strides[d]);
      if (keepdims)
        expected.push_back(1);
    } else {
      layout.keptShape.push_back(input.shape[d]);
      layout.keptStrides.push_back(strides[d]);
      expected.push_back(input.shape[d]);
    }
  }
  layout.reducedCount = product(layout.reducedShape);
  return expectShape(call, "result", result, expected);
}

} // namespace zplan::ops
