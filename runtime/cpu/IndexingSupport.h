//===- IndexingSupport.h - index values, checked on the host (private) ----===//
//
// The CPU kernels read index tensors on the host, so they check every index
// value before anything is written (negative indices count from the end):
// the gather and embedding kernels of DataMovement.cpp, their gradients in
// ScatterGrad.cpp, and the loss's targets and the KV cache's positions.
// Everything else about an indexing op (types, shapes, the axis and slice
// attributes) is the ops layer's shared validation
// (runtime/ops/IndexingOps.h). Defined in DataMovement.cpp (the index walks
// here, inline); private to runtime/cpu.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_INDEXINGSUPPORT_H
#define ZPLAN_RUNTIME_CPU_INDEXINGSUPPORT_H

#include "runtime/cpu/KernelSupport.h"
#include "runtime/ops/IndexingOps.h"

#include <string>

namespace zplan::cpu::detail {

/// Index `i` of an i64 or i32 index tensor.
inline int64_t indexAt(const TensorRef &indices, int64_t i) {
  return indices.dtype == ElementType::I64 ? indices.as<int64_t>()[i]
                                           : indices.as<int32_t>()[i];
}

/// Every index in [-extent, extent): otherwise "<what> <index> (element <i>
/// of <plural>) is out of range for <describeRange()>", the description
/// built only then (these checks run on every call).
template <typename DescribeRange>
Status checkIndices(const KernelCall &call, const TensorRef &indices,
                    int64_t extent, const char *what, const char *plural,
                    DescribeRange &&describeRange) {
  int64_t count = indices.numElements();
  for (int64_t i = 0; i < count; ++i) {
    int64_t index = indexAt(indices, i);
    if (index < -extent || index >= extent)
      return call.error(std::string(what) + " " + std::to_string(index) +
                        " (element " + std::to_string(i) + " of " + plural +
                        ") is out of range for " + describeRange());
  }
  return Status::success();
}

/// Every index in [-extent, extent) of axis `axis` of the gathered data.
Status checkGatherIndices(const KernelCall &call, const TensorRef &indices,
                          int64_t axis, int64_t extent);

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_INDEXINGSUPPORT_H
