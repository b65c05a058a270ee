//===- Shapes.h - strides, numpy broadcasting and element counts ----------===//
//
// Shared validation for every backend to call: the row-major strides of a
// shape and numpy's broadcasting rules, by which the elementwise ops, the
// matmul batch and bias, expand and the attention mask read an operand of
// one shape over a result of another. Every backend derives its read
// strides here, so a shape one backend refuses no backend accepts.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_SHAPES_H
#define ZPLAN_RUNTIME_OPS_SHAPES_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace zplan::ops {

/// Row-major element strides of `shape`.
std::vector<int64_t> contiguousStrides(const std::vector<int64_t> &shape);
/// Element strides with which an operand of `shape` is read when it
/// broadcasts (numpy rules) to `target`: aligned to target's rank, 0 along
/// broadcast dimensions. False when it does not broadcast to `target`.
bool broadcastStrides(const std::vector<int64_t> &shape,
                      const std::vector<int64_t> &target,
                      std::vector<int64_t> &strides);
/// The numpy broadcast of `a` and `b`; false when they do not broadcast.
bool broadcastShapes(const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b,
                     std::vector<int64_t> &result);
/// The product of shape[begin, end): an element count.
int64_t product(const std::vector<int64_t> &shape, size_t begin = 0,
                size_t end = SIZE_MAX);

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_SHAPES_H
