//===- Shapes.cpp - strides, numpy broadcasting and element counts --------===//
//
// Broadcasting aligns shapes at their last dimension; a dimension of 1
// stretches to the other's extent and is then read with stride 0.
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/Shapes.h"

#include <algorithm>

namespace zplan::ops {

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

} // namespace zplan::ops
