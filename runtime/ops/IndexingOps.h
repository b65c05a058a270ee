//===- IndexingOps.h - the data-movement ops' and gradients' checks -------===//
//
// Shared validation for every backend to call: the gradient kernels of the
// indexing ops write back to exactly the elements the forward kernels
// read, so every backend's forward and gradient kernels read index tensor
// types, the gather axis and the slice attributes by one set of rules
// (negative indices count from the end) and phrase their errors alike.
// Everything but the index *values* is checked here, before a kernel
// issues its copies: the CPU then checks every index on the host before
// it writes, the CUDA kernels on the device.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_INDEXINGOPS_H
#define ZPLAN_RUNTIME_OPS_INDEXINGOPS_H

#include "runtime/ops/KernelCall.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zplan::ops {

/// `indices` (called `what`) is an i64 or i32 tensor.
Status checkIndexType(const KernelCall &call, const char *what,
                      const TensorRef &indices);

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
// index values
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

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_INDEXINGOPS_H
