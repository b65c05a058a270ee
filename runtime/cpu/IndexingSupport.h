//===- IndexingSupport.h - what the indexing kernels and gradients share --===//
//
// The gradient kernels of ScatterGrad.cpp write back to exactly the
// elements the forward kernels of DataMovement.cpp read, so both read index
// tensors, the gather axis and the slice attributes by one set of rules
// (negative indices count from the end; every index checked before anything
// is written) and phrase their errors alike. The CUDA kernels
// (runtime/cuda/DataMovement.cu, ScatterGrad.cu) run the same checks, from
// the read*/check* functions below, before they issue their copies; they
// check the index *values* on the device. Defined in DataMovement.cpp and
// ScatterGrad.cpp (the index walks here, inline); private to runtime/cpu
// and runtime/cuda.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_INDEXINGSUPPORT_H
#define ZPLAN_RUNTIME_CPU_INDEXINGSUPPORT_H

#include "runtime/cpu/KernelSupport.h"

namespace zplan::cpu::detail {

/// Index `i` of an i64 or i32 index tensor.
inline int64_t indexAt(const TensorRef &indices, int64_t i) {
  return indices.dtype == ElementType::I64 ? indices.as<int64_t>()[i]
                                           : indices.as<int32_t>()[i];
}

/// `indices` (called `what`) is an i64 or i32 tensor.
Status checkIndexType(const KernelCall &call, const char *what,
                      const TensorRef &indices);

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

/// The "axis" attribute of concat, gather and gather_grad, below `rank`: a
/// negative one counts from the end, and the error names the axis after
/// that count.
Status dataAxisAttribute(const KernelCall &call, int64_t rank, int64_t &axis);

/// Reads gather's (and gather_grad's) axis into the data of shape `data`
/// and checks that `gathered` (called `gatheredName`: gather's result,
/// gather_grad's dy) has shape data[:axis] + indices.shape + data[axis+1:].
Status readGatherAxis(const KernelCall &call, const std::vector<int64_t> &data,
                      const TensorRef &indices, const char *gatheredName,
                      const TensorRef &gathered, int64_t &axis);

/// Every index in [-extent, extent) of axis `axis` of the gathered data.
Status checkGatherIndices(const KernelCall &call, const TensorRef &indices,
                          int64_t axis, int64_t extent);

/// The starts and steps attributes of slice and slice_grad: one entry per
/// dimension of the whole input (rank `rank`), as the slice itself
/// (`sliced`, called `slicedName` in the message) must have.
Status readSliceAttributes(const KernelCall &call, size_t rank,
                           const char *slicedName,
                           const std::vector<int64_t> &sliced,
                           std::vector<int64_t> &starts,
                           std::vector<int64_t> &steps);

/// The slice as a strided view of the whole input of shape `input`:
/// element j of dimension d is input element start + j * step, so `base`
/// is the starts' offset and `strides` the steps times the input's strides.
/// Unless the slice is empty every position it covers must lie inside the
/// input; the error says the slice `verb`s ("reads", "writes") outside.
Status sliceView(const KernelCall &call, const std::vector<int64_t> &starts,
                 const std::vector<int64_t> &steps,
                 const std::vector<int64_t> &input,
                 const std::vector<int64_t> &sliced, const char *verb,
                 int64_t &base, std::vector<int64_t> &strides);

//===----------------------------------------------------------------------===//
// The checks of each data-movement kernel and gradient, everything but the
// index values (DataMovement.cpp, ScatterGrad.cpp)
//===----------------------------------------------------------------------===//

/// One operand and one result of the same element type.
Status checkMove(const KernelCall &call);

/// transpose: the input's strides permuted by "perm", aligned to the result.
Status readTranspose(const KernelCall &call, std::vector<int64_t> &strides);

/// slice: the result as a strided view of the input (sliceView).
Status readSlice(const KernelCall &call, int64_t &base,
                 std::vector<int64_t> &strides);

/// expand: the input's broadcast strides to the result shape.
Status readExpand(const KernelCall &call, std::vector<int64_t> &strides);

/// reshape: as many elements in the result as in the input.
Status checkReshape(const KernelCall &call);

/// concat: the normalised axis, and the bytes of one element.
Status readConcat(const KernelCall &call, int64_t &axis, int64_t &bytes);

/// gather: the normalised axis and the bytes of one element, every shape
/// and type checked (not the indices' values: checkGatherIndices).
Status checkGather(const KernelCall &call, int64_t &axis, int64_t &bytes);

/// embedding: the bytes of one element, every shape and type checked (not
/// the ids' values).
Status checkEmbedding(const KernelCall &call, int64_t &bytes);

/// embedding_grad: every shape and type checked (not the ids' values).
Status checkEmbeddingGrad(const KernelCall &call);

/// gather_grad: the normalised axis, every shape and type checked (not the
/// indices' values).
Status checkGatherGrad(const KernelCall &call, int64_t &axis);

/// slice_grad: dy as a strided view written into the result (sliceView),
/// and the bytes of one element.
Status readSliceGrad(const KernelCall &call, int64_t &base,
                     std::vector<int64_t> &strides, int64_t &bytes);

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_INDEXINGSUPPORT_H
