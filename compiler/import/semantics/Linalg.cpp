//===- Linalg.cpp - MatMul, Gemm ------------------------------------------===//
//
// Linear algebra: numpy-style batched MatMul and Gemm's 2-D product with
// optional transposes; folding is bounded by kMaxFoldedMultiplyAdds.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"

#include <algorithm>

namespace zplan::onnx_import {

llvm::Error inferMatMul(NodeContext &ctx) {
  const ValueInfo &lhs = *ctx.input(0), &rhs = *ctx.input(1);
  if (lhs.type != rhs.type)
    return typeMismatchError(ctx, lhs.type, rhs.type);
  if (lhs.shape.empty() || rhs.shape.empty())
    return ctx.error("operands must not be scalars, got " +
                     formatShape(lhs.shape) + " and " + formatShape(rhs.shape));
  // numpy rules: a 1-D lhs is a row vector and a 1-D rhs a column vector,
  // and the added dimension is dropped from the result.
  std::vector<int64_t> a = lhs.shape, b = rhs.shape;
  bool lhsVector = a.size() == 1, rhsVector = b.size() == 1;
  if (lhsVector)
    a.insert(a.begin(), 1);
  if (rhsVector)
    b.push_back(1);
  int64_t rows = a[a.size() - 2], depth = a.back();
  int64_t columns = b.back();
  if (b[b.size() - 2] != depth)
    return ctx.error("inner dimensions differ: " + formatShape(lhs.shape) +
                     " times " + formatShape(rhs.shape));
  std::vector<int64_t> batchA(a.begin(), a.end() - 2);
  std::vector<int64_t> batchB(b.begin(), b.end() - 2);
  std::optional<std::vector<int64_t>> batch = broadcastShapes(batchA, batchB);
  if (!batch)
    return ctx.error("cannot broadcast batch dimensions " +
                     formatShape(batchA) + " with " + formatShape(batchB));
  std::vector<int64_t> shape = *batch;
  if (!lhsVector)
    shape.push_back(rows);
  if (!rhsVector)
    shape.push_back(columns);
  ctx.setOutput(0, lhs.type, shape);
  int64_t batchCount = numElements(*batch);
  if (!ctx.canFold(shape, {&lhs, &rhs}) ||
      batchCount * rows * columns * depth > kMaxFoldedMultiplyAdds)
    return llvm::Error::success();

  std::vector<int64_t> batchAt = broadcastOffsets(batchA, *batch);
  std::vector<int64_t> batchBt = broadcastOffsets(batchB, *batch);
  const HostTensor &x = *lhs.value, &y = *rhs.value;
  bool floating = elementTypeInfo(lhs.type).isFloat;
  int64_t count = batchCount * rows * columns;
  std::vector<double> floats(floating ? count : 0);
  std::vector<int64_t> ints(floating ? 0 : count);
  for (int64_t n = 0; n < batchCount; ++n) {
    int64_t aBase = batchAt[n] * rows * depth;
    int64_t bBase = batchBt[n] * depth * columns;
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < columns; ++j) {
        int64_t out = (n * rows + i) * columns + j;
        // Accumulate in double (or wrapping int64) and round once: the
        // runtime's summation order is unknown, so this is the closest
        // deterministic answer.
        for (int64_t k = 0; k < depth; ++k) {
          int64_t xAt = aBase + i * depth + k, yAt = bBase + k * columns + j;
          if (floating)
            floats[out] += x.floats[xAt] * y.floats[yAt];
          else
            ints[out] =
                wrappingAdd(ints[out], wrappingMul(x.ints[xAt], y.ints[yAt]));
        }
      }
    }
  }
  ctx.setOutput(
      0, floating ? HostTensor::fromFloats(lhs.type, shape, std::move(floats))
                  : HostTensor::fromInts(lhs.type, shape, std::move(ints)));
  return llvm::Error::success();
}

llvm::Error inferGemm(NodeContext &ctx) {
  const ValueInfo &lhs = *ctx.input(0), &rhs = *ctx.input(1);
  const ValueInfo *bias = ctx.input(2);
  if (lhs.type != rhs.type)
    return typeMismatchError(ctx, lhs.type, rhs.type);
  if (lhs.shape.size() != 2 || rhs.shape.size() != 2)
    return ctx.error("operands must be matrices, got " +
                     formatShape(lhs.shape) + " and " + formatShape(rhs.shape));
  bool transA = ctx.getInt("transA", 0) != 0;
  bool transB = ctx.getInt("transB", 0) != 0;
  int64_t rows = lhs.shape[transA ? 1 : 0], depth = lhs.shape[transA ? 0 : 1];
  int64_t rhsDepth = rhs.shape[transB ? 1 : 0];
  int64_t columns = rhs.shape[transB ? 0 : 1];
  if (rhsDepth != depth)
    return ctx.error("inner dimensions differ: " + formatShape(lhs.shape) +
                     (transA ? " (transposed)" : "") + " times " +
                     formatShape(rhs.shape) + (transB ? " (transposed)" : ""));
  std::vector<int64_t> shape = {rows, columns};
  if (bias) {
    if (bias->type != lhs.type)
      return typeMismatchError(ctx, lhs.type, bias->type);
    // C broadcasts one way only: to the result, never the result to C.
    std::optional<std::vector<int64_t>> withBias =
        broadcastShapes(bias->shape, shape);
    if (!withBias || *withBias != shape)
      return broadcastError(ctx, bias->shape, shape);
  }
  ctx.setOutput(0, lhs.type, shape);
  if (!ctx.canFold(shape, {&lhs, &rhs, bias}) ||
      rows * columns * depth > kMaxFoldedMultiplyAdds)
    return llvm::Error::success();

  double alpha = ctx.getFloat("alpha", 1.0), beta = ctx.getFloat("beta", 1.0);
  std::vector<int64_t> biasAt;
  if (bias)
    biasAt = broadcastOffsets(bias->shape, shape);
  std::vector<double> values(rows * columns, 0.0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < columns; ++j) {
      double sum = 0;
      for (int64_t k = 0; k < depth; ++k) {
        double x = lhs.value->getDouble(transA ? k * rows + i : i * depth + k);
        double y =
            rhs.value->getDouble(transB ? j * depth + k : k * columns + j);
        sum += x * y;
      }
      double result = alpha * sum;
      if (bias)
        result += beta * bias->value->getDouble(biasAt[i * columns + j]);
      values[i * columns + j] = result;
    }
  }
  ctx.setOutput(0, HostTensor::fromFloats(lhs.type, shape, std::move(values)));
  return llvm::Error::success();
}

} // namespace zplan::onnx_import
