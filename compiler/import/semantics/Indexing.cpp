//===- Indexing.cpp - Gather(ND, Elements), Slice, Trilu, ScatterND ------===//
//
// Indexing ops: the output shape follows from the indices (or, for Slice,
// the constant starts/ends/axes/steps); contents fold through strided views.
// ScatterND and GatherND need constant indices (their maps are what the
// importer lowers them with).
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"

#include <algorithm>

namespace zplan::onnx_import {

llvm::Error checkIndexType(const NodeContext &ctx, const ValueInfo &indices) {
  if (indices.type != ElementType::I64 && indices.type != ElementType::I32)
    return ctx.error(std::string("indices must be i32 or i64, got ") +
                     typeName(indices.type));
  return llvm::Error::success();
}

/// Normalises constant indices against an axis of `size` (negative ones count
/// from the end).
llvm::Error normalizeIndices(const NodeContext &ctx, const HostTensor &indices,
                             int64_t size, std::vector<int64_t> &result) {
  result = toInts(indices);
  for (int64_t &index : result) {
    if (index < -size || index >= size)
      return ctx.error("index " + std::to_string(index) +
                       " out of range for axis of size " +
                       std::to_string(size));
    if (index < 0)
      index += size;
  }
  return llvm::Error::success();
}

llvm::Error inferGather(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0), &indices = *ctx.input(1);
  if (llvm::Error err = checkIndexType(ctx, indices))
    return err;
  int64_t rank = data.shape.size();
  llvm::Expected<int64_t> axis = readAxis(ctx, rank, 0);
  if (!axis)
    return axis.takeError();

  // data[:axis] + indices + data[axis+1:]: a scalar index drops the axis.
  std::vector<int64_t> shape(data.shape.begin(), data.shape.begin() + *axis);
  shape.insert(shape.end(), indices.shape.begin(), indices.shape.end());
  shape.insert(shape.end(), data.shape.begin() + *axis + 1, data.shape.end());
  ctx.setOutput(0, data.type, shape);

  std::vector<int64_t> positions;
  if (indices.value)
    if (llvm::Error err =
            normalizeIndices(ctx, *indices.value, data.shape[*axis], positions))
      return err;
  if (!ctx.canFold(shape, {&data, &indices}))
    return llvm::Error::success();
  AxisExtents extents = extentsAround(data.shape, *axis);
  std::vector<int64_t> offsets;
  offsets.reserve(numElements(shape));
  for (int64_t outer = 0; outer < extents.outer; ++outer)
    for (int64_t position : positions)
      for (int64_t inner = 0; inner < extents.inner; ++inner)
        offsets.push_back((outer * extents.length + position) * extents.inner +
                          inner);
  ctx.setOutput(0, pickElements(*data.value, offsets, shape));
  return llvm::Error::success();
}

llvm::Error inferGatherElements(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0), &indices = *ctx.input(1);
  if (llvm::Error err = checkIndexType(ctx, indices))
    return err;
  int64_t rank = data.shape.size();
  if (static_cast<int64_t>(indices.shape.size()) != rank || rank == 0)
    return ctx.error("data " + formatShape(data.shape) + " and indices " +
                     formatShape(indices.shape) +
                     " must have the same nonzero rank");
  llvm::Expected<int64_t> axis = readAxis(ctx, rank, 0);
  if (!axis)
    return axis.takeError();
  for (int64_t d = 0; d < rank; ++d)
    if (d != *axis && indices.shape[d] > data.shape[d])
      return ctx.error("indices " + formatShape(indices.shape) +
                       " exceed data " + formatShape(data.shape) +
                       " outside the gather axis");
  ctx.setOutput(0, data.type, indices.shape);

  std::vector<int64_t> positions;
  if (indices.value)
    if (llvm::Error err =
            normalizeIndices(ctx, *indices.value, data.shape[*axis], positions))
      return err;
  if (!ctx.canFold(indices.shape, {&data, &indices}))
    return llvm::Error::success();
  // Walk the indices' shape with the data's strides, with the gather axis
  // zeroed out, then add each index along that axis.
  std::vector<int64_t> strides = rowMajorStrides(data.shape);
  int64_t axisStride = strides[*axis];
  strides[*axis] = 0;
  std::vector<int64_t> offsets = stridedOffsets(indices.shape, strides);
  for (size_t i = 0; i < offsets.size(); ++i)
    offsets[i] += positions[i] * axisStride;
  ctx.setOutput(0, pickElements(*data.value, offsets, indices.shape));
  return llvm::Error::success();
}

llvm::Error inferSlice(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  std::vector<int64_t> starts, ends, axes, steps;
  if (ctx.getOpset() < 10) {
    starts = ctx.getInts("starts").value_or(std::vector<int64_t>());
    ends = ctx.getInts("ends").value_or(std::vector<int64_t>());
    axes = ctx.getInts("axes").value_or(std::vector<int64_t>());
  } else {
    const char *names[4] = {"starts", "ends", "axes", "steps"};
    std::vector<int64_t> *lists[4] = {&starts, &ends, &axes, &steps};
    for (size_t i = 0; i < 4; ++i) {
      if (i >= 2 && !ctx.input(i + 1))
        continue;
      const HostTensor *tensor;
      if (llvm::Error err = ctx.getConstantInput(i + 1, names[i], tensor))
        return err;
      *lists[i] = toInts(*tensor);
    }
  }
  if (axes.empty())
    for (int64_t i = 0; i < static_cast<int64_t>(starts.size()); ++i)
      axes.push_back(i);
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return ctx.error("starts, ends, axes and steps have different lengths");

  std::vector<int64_t> shape = data.shape;
  std::vector<int64_t> dataStrides = rowMajorStrides(data.shape);
  std::vector<int64_t> viewStrides = dataStrides;
  std::vector<bool> seen(rank, false);
  int64_t base = 0;
  for (size_t i = 0; i < starts.size(); ++i) {
    std::optional<int64_t> axis = normalizeAxis(axes[i], rank);
    if (!axis)
      return axisError(ctx, axes[i], rank);
    if (seen[*axis])
      return ctx.error("axis " + std::to_string(axes[i]) + " is repeated");
    seen[*axis] = true;
    int64_t step = steps[i];
    if (step == 0)
      return ctx.error("step for axis " + std::to_string(axes[i]) + " is 0");
    int64_t dim = data.shape[*axis];
    int64_t start = starts[i], end = ends[i];
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    // Clamp as the spec does: [0, dim] going forward, [-1, dim-1] backward,
    // which makes INT64_MAX / INT64_MIN mean "to the end".
    int64_t count = 0;
    if (dim == 0) {
      count = 0;
    } else if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      count = end > start ? (end - start - 1) / step + 1 : 0;
    } else {
      start = std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      count = start > end ? (end - start + 1) / step + 1 : 0;
    }
    shape[*axis] = count;
    // With at most one element the step never applies; skipping it avoids
    // overflowing step * stride for huge steps.
    viewStrides[*axis] = count > 1 ? step * dataStrides[*axis] : 0;
    if (count > 0)
      base += start * dataStrides[*axis];
  }
  ctx.setOutput(0, data.type, shape);
  if (!ctx.canFold(shape, {&data}))
    return llvm::Error::success();
  ctx.setOutput(0,
                pickElements(*data.value,
                             stridedOffsets(shape, viewStrides, base), shape));
  return llvm::Error::success();
}

llvm::Error inferTrilu(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  if (rank < 2)
    return ctx.error("input must have rank >= 2, got " +
                     formatShape(data.shape));
  int64_t diagonal = 0;
  if (ctx.input(1))
    if (llvm::Error err = getConstantScalar(ctx, 1, "k", diagonal))
      return err;
  bool upper = ctx.getInt("upper", 1) != 0;
  ctx.setOutput(0, data.type, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return llvm::Error::success();
  int64_t rows = data.shape[rank - 2], columns = data.shape[rank - 1];
  HostTensor result = *data.value;
  for (int64_t i = 0; i < result.numElements(); ++i) {
    int64_t row = (i / columns) % rows, column = i % columns;
    bool keep = upper ? column - row >= diagonal : column - row <= diagonal;
    if (keep)
      continue;
    if (elementTypeInfo(result.type).isFloat)
      result.floats[i] = 0;
    else
      result.ints[i] = 0;
  }
  ctx.setOutput(0, std::move(result));
  return llvm::Error::success();
}

llvm::Error checkScatterND(const std::vector<int64_t> &dataShape,
                           const HostTensor &indices,
                           const std::vector<int64_t> &updatesShape) {
  auto fail = [](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  int64_t rank = dataShape.size();
  if (indices.shape.empty())
    return fail("indices must have rank >= 1, got a scalar");
  int64_t depth = indices.shape.back();
  if (depth < 1 || depth > rank)
    return fail("the last dimension of indices " + formatShape(indices.shape) +
                " must be in 1.." + llvm::Twine(rank) + " (the rank of data " +
                formatShape(dataShape) + ")");
  // updates = indices.shape[:-1] + data.shape[depth:].
  std::vector<int64_t> expected(indices.shape.begin(), indices.shape.end() - 1);
  expected.insert(expected.end(), dataShape.begin() + depth, dataShape.end());
  if (updatesShape != expected)
    return fail("updates " + formatShape(updatesShape) + " must be " +
                formatShape(expected) + " for data " + formatShape(dataShape) +
                " and indices " + formatShape(indices.shape));
  int64_t tuples = numElements(indices.shape) / depth;
  for (int64_t t = 0; t < tuples; ++t)
    for (int64_t d = 0; d < depth; ++d) {
      int64_t index = indices.getInt(t * depth + d);
      if (index < -dataShape[d] || index >= dataShape[d])
        return fail("index " + llvm::Twine(index) + " (indices tuple " +
                    llvm::Twine(t) + ") out of range for axis " +
                    llvm::Twine(d) + " of size " + llvm::Twine(dataShape[d]));
    }
  return llvm::Error::success();
}

/// Index tuple `t` as a row-major offset into data.shape[:depth].
static int64_t scatterNDTupleOffset(const std::vector<int64_t> &dataShape,
                                    const HostTensor &indices, int64_t t) {
  int64_t depth = indices.shape.back();
  int64_t offset = 0;
  for (int64_t d = 0; d < depth; ++d) {
    int64_t index = indices.getInt(t * depth + d);
    offset = offset * dataShape[d] + (index < 0 ? index + dataShape[d] : index);
  }
  return offset;
}

bool isInOrderScatterND(const std::vector<int64_t> &dataShape,
                        const HostTensor &indices) {
  int64_t depth = indices.shape.back();
  int64_t tuples = numElements(indices.shape) / depth;
  if (tuples != numElements(std::vector<int64_t>(dataShape.begin(),
                                                 dataShape.begin() + depth)))
    return false;
  for (int64_t t = 0; t < tuples; ++t)
    if (scatterNDTupleOffset(dataShape, indices, t) != t)
      return false;
  return true;
}

std::vector<int64_t> scatterNDSourceMap(const std::vector<int64_t> &dataShape,
                                        const HostTensor &indices) {
  int64_t depth = indices.shape.back();
  // Each index tuple writes one slice of data.shape[depth:] (an element when
  // depth == rank).
  int64_t slice = numElements(
      std::vector<int64_t>(dataShape.begin() + depth, dataShape.end()));
  std::vector<int64_t> source(numElements(dataShape), -1);
  int64_t tuples = numElements(indices.shape) / depth;
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t base = scatterNDTupleOffset(dataShape, indices, t) * slice;
    // Repeated tuples: the last write wins, as onnxruntime applies them in
    // order.
    for (int64_t i = 0; i < slice; ++i)
      source[base + i] = t * slice + i;
  }
  return source;
}

llvm::Error inferScatterND(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0), &indices = *ctx.input(1),
                  &updates = *ctx.input(2);
  if (indices.type != ElementType::I64)
    return ctx.error("indices must be i64, got " + typeName(indices.type));
  if (updates.type != data.type)
    return typeMismatchError(ctx, data.type, updates.type);
  if (const onnx::AttributeProto *reduction = ctx.findAttribute("reduction"))
    if (reduction->s() != "none")
      return ctx.error("reduction '" + reduction->s() +
                       "' is not supported; only 'none' is");
  ctx.setOutput(0, data.type, data.shape);
  // Without known indices the written elements are unknown: neither folding
  // nor the importer's lowering can proceed.
  const HostTensor *known;
  if (llvm::Error err = ctx.getConstantInput(1, "indices", known))
    return err;
  if (llvm::Error err = checkScatterND(data.shape, *known, updates.shape))
    return ctx.error(llvm::toString(std::move(err)));
  if (!ctx.canFold(data.shape, {&data, &updates}))
    return llvm::Error::success();
  std::vector<int64_t> source = scatterNDSourceMap(data.shape, *known);
  HostTensor result = *data.value;
  bool isFloat = elementTypeInfo(result.type).isFloat;
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] < 0)
      continue;
    if (isFloat)
      result.floats[i] = updates.value->floats[source[i]];
    else
      result.ints[i] = updates.value->ints[source[i]];
  }
  ctx.setOutput(0, std::move(result));
  return llvm::Error::success();
}

llvm::Error gatherNDRows(const std::vector<int64_t> &dataShape,
                         const HostTensor &indices, int64_t batchDims,
                         std::vector<int64_t> &rows) {
  auto fail = [](const std::string &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), message);
  };
  int64_t rank = dataShape.size();
  int64_t indicesRank = indices.shape.size();
  if (indicesRank < 1 || rank < 1)
    return fail("data and indices must have rank 1 or more");
  if (batchDims < 0 || batchDims >= std::min(rank, indicesRank))
    return fail("batch_dims " + std::to_string(batchDims) +
                " must be less than the ranks of data (" +
                std::to_string(rank) + ") and indices (" +
                std::to_string(indicesRank) + ")");
  int64_t depth = indices.shape.back();
  if (depth < 1 || batchDims + depth > rank)
    return fail("indices " + formatShape(indices.shape) + " index " +
                std::to_string(depth) + " dimensions of data " +
                formatShape(dataShape) + " after " + std::to_string(batchDims) +
                " batch dimensions");
  for (int64_t d = 0; d < batchDims; ++d)
    if (indices.shape[d] != dataShape[d])
      return fail("batch dimension " + std::to_string(d) + " is " +
                  std::to_string(dataShape[d]) + " in data but " +
                  std::to_string(indices.shape[d]) + " in indices");
  // Rows of one batch element: the indexed dimensions' product.
  int64_t indexedRows = 1;
  for (int64_t d = batchDims; d < batchDims + depth; ++d)
    indexedRows *= dataShape[d];
  // Index tuples per batch element.
  int64_t tuplesPerBatch = 1;
  for (int64_t d = batchDims; d < indicesRank - 1; ++d)
    tuplesPerBatch *= indices.shape[d];
  std::vector<int64_t> values = toInts(indices);
  int64_t tuples = int64_t(values.size()) / depth;
  rows.assign(tuples, 0);
  for (int64_t t = 0; t < tuples; ++t) {
    int64_t row = 0;
    for (int64_t j = 0; j < depth; ++j) {
      int64_t size = dataShape[batchDims + j];
      int64_t index = values[t * depth + j];
      if (index < -size || index >= size)
        return fail(
            "index " + std::to_string(index) + " out of range for dimension " +
            std::to_string(batchDims + j) + " of size " + std::to_string(size));
      row = row * size + (index < 0 ? index + size : index);
    }
    rows[t] = (t / tuplesPerBatch) * indexedRows + row;
  }
  return llvm::Error::success();
}

llvm::Error inferGatherND(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0), &indices = *ctx.input(1);
  if (indices.type != ElementType::I64)
    return ctx.error("indices must be i64, got " + typeName(indices.type));
  int64_t batchDims = ctx.getInt("batch_dims", 0);
  int64_t rank = data.shape.size();
  // Run-time indices would pick rows nothing here knows.
  const HostTensor *known;
  if (llvm::Error err = ctx.getConstantInput(1, "indices", known))
    return err;
  std::vector<int64_t> rows;
  if (llvm::Error err = gatherNDRows(data.shape, *known, batchDims, rows))
    return ctx.error(llvm::toString(std::move(err)));
  // gatherNDRows checked batch_dims + k <= rank. Out: indices[:-1] +
  // data[batch_dims + k:].
  int64_t depth = indices.shape.back();
  std::vector<int64_t> shape(indices.shape.begin(), indices.shape.end() - 1);
  shape.insert(shape.end(), data.shape.begin() + batchDims + depth,
               data.shape.end());
  ctx.setOutput(0, data.type, shape);
  if (!ctx.canFold(shape, {&data}))
    return llvm::Error::success();
  int64_t inner = 1;
  for (int64_t d = batchDims + depth; d < rank; ++d)
    inner *= data.shape[d];
  std::vector<int64_t> offsets;
  offsets.reserve(rows.size() * inner);
  for (int64_t row : rows)
    for (int64_t i = 0; i < inner; ++i)
      offsets.push_back(row * inner + i);
  ctx.setOutput(0, pickElements(*data.value, offsets, shape));
  return llvm::Error::success();
}

} // namespace zplan::onnx_import
