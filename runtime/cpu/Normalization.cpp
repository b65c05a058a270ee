//===- Normalization.cpp - layer_norm, rms_norm, softmax, reductions ------===//
//
// Everything here sums many elements, so every sum of floats is kept in
// double (and integer sums in int64) and rounded once: the results then
// stay within an ulp or two of the exact value whatever the row length,
// which is what lets them match onnxruntime to 1e-5 on transformer-sized
// rows. layer_norm takes the variance in a second pass over the row
// (sum of (x - mean)^2), not as E[x^2] - mean^2, which cancels.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/NormalizationSupport.h"

#include <cmath>
#include <limits>
#include <type_traits>

namespace zplan::cpu::detail {

Status axisAttribute(const KernelCall &call, size_t rank, size_t &axis) {
  int64_t value;
  if (Status status = intAttribute(call, "axis", value); !status.ok())
    return status;
  int64_t normalized = value < 0 ? value + static_cast<int64_t>(rank) : value;
  if (normalized < 0 || normalized >= static_cast<int64_t>(rank))
    return call.error("axis " + std::to_string(value) +
                      " is out of range for rank " + std::to_string(rank));
  axis = static_cast<size_t>(normalized);
  return Status::success();
}

Status expectNormalizedParameter(const KernelCall &call, const char *what,
                                 const TensorRef &parameter,
                                 const TensorRef &input, size_t axis) {
  if (Status status = expectType(call, what, parameter, input.dtype);
      !status.ok())
    return status;
  std::vector<int64_t> normalized(input.shape.begin() + axis,
                                  input.shape.end());
  return expectShape(call, what, parameter, normalized);
}

Status readSoftmaxLines(const KernelCall &call,
                        const std::vector<int64_t> &shape,
                        SoftmaxLines &lines) {
  size_t axis;
  if (Status status = axisAttribute(call, shape.size(), axis); !status.ok())
    return status;
  lines.outer = product(shape, 0, axis);
  lines.length = shape[axis];
  lines.inner = product(shape, axis + 1);
  return Status::success();
}

//===----------------------------------------------------------------------===//
// layer_norm, rms_norm
//===----------------------------------------------------------------------===//

/// The row loop both norms share: y = (x - mean?) / sqrt(mean square +
/// epsilon) * weight? + bias?, accumulated in double. layer_norm centres
/// each row first; rms_norm does not (and has no bias).
static Status normalizeRows(const KernelCall &call, const TensorRef &input,
                            const TensorRef &result, int64_t rows,
                            int64_t width, double epsilon,
                            const TensorRef *weight, const TensorRef *bias,
                            bool center) {
  return dispatchFloatType(call, "input", input.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *w = weight ? weight->as<T>() : nullptr;
    const T *b = bias ? bias->as<T>() : nullptr;
    for (int64_t row = 0; row < rows; ++row) {
      const T *x = input.as<T>() + row * width;
      T *y = result.as<T>() + row * width;
      RowStatistics statistics = rowStatistics(x, width, epsilon, center);
      double mean = statistics.mean, inverse = statistics.inverse;
      for (int64_t i = 0; i < width; ++i) {
        double normalized = (x[i] - mean) * inverse;
        if (w)
          normalized *= w[i];
        if (b)
          normalized += b[i];
        y[i] = static_cast<T>(normalized);
      }
    }
    return Status::success();
  });
}

Status readLayerNorm(const KernelCall &call, NormRows &norm) {
  if (Status status = expectArity(call, 1, 3); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (Status status = expectLike(call, "result", result, input); !status.ok())
    return status;
  size_t axis;
  if (Status status = axisAttribute(call, input.shape.size(), axis);
      !status.ok())
    return status;
  if (Status status = floatAttribute(call, "epsilon", norm.epsilon);
      !status.ok())
    return status;

  // The plan lists only the present operands; operandSegmentSizes
  // (input, weight, bias) says which of the optional ones they are. Without
  // it only the unambiguous counts can be read.
  bool hasWeight, hasBias;
  size_t count = call.operands.size();
  const plan::Attribute *segments = findAttribute(call, "operandSegmentSizes");
  if (segments && segments->ints_size() == 3) {
    int64_t input = segments->ints(0), weight = segments->ints(1),
            bias = segments->ints(2);
    if (input != 1 || weight < 0 || weight > 1 || bias < 0 || bias > 1 ||
        static_cast<size_t>(input + weight + bias) != count)
      return call.error("operandSegmentSizes [" + std::to_string(input) + ", " +
                        std::to_string(weight) + ", " + std::to_string(bias) +
                        "] does not describe " + std::to_string(count) +
                        " operands");
    hasWeight = weight == 1;
    hasBias = bias == 1;
  } else if (count == 2) {
    return call.error("2 operands but no operandSegmentSizes of 3 entries to "
                      "tell whether the second is the weight or the bias");
  } else {
    hasWeight = hasBias = count == 3;
  }
  norm.weight = hasWeight ? &call.operands[1] : nullptr;
  norm.bias = hasBias ? &call.operands[hasWeight ? 2 : 1] : nullptr;
  if (norm.weight)
    if (Status status = expectNormalizedParameter(call, "weight", *norm.weight,
                                                  input, axis);
        !status.ok())
      return status;
  if (norm.bias)
    if (Status status =
            expectNormalizedParameter(call, "bias", *norm.bias, input, axis);
        !status.ok())
      return status;
  norm.rows = product(input.shape, 0, axis);
  norm.width = product(input.shape, axis);
  return Status::success();
}

Status runLayerNorm(const KernelCall &call) {
  NormRows norm;
  if (Status status = readLayerNorm(call, norm); !status.ok())
    return status;
  return normalizeRows(call, call.operands[0], call.results[0], norm.rows,
                       norm.width, norm.epsilon, norm.weight, norm.bias,
                       /*center=*/true);
}

Status readRmsNorm(const KernelCall &call, NormRows &norm) {
  if (Status status = expectArity(call, 1, 2); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (Status status = expectLike(call, "result", result, input); !status.ok())
    return status;
  if (input.shape.empty())
    return call.error("input must have rank >= 1");
  size_t axis = input.shape.size() - 1;
  if (Status status = floatAttribute(call, "epsilon", norm.epsilon);
      !status.ok())
    return status;
  norm.weight = call.operands.size() == 2 ? &call.operands[1] : nullptr;
  if (norm.weight)
    if (Status status = expectNormalizedParameter(call, "weight", *norm.weight,
                                                  input, axis);
        !status.ok())
      return status;
  norm.width = input.shape.back();
  norm.rows = norm.width == 0 ? 0 : input.numElements() / norm.width;
  return Status::success();
}

Status runRmsNorm(const KernelCall &call) {
  NormRows norm;
  if (Status status = readRmsNorm(call, norm); !status.ok())
    return status;
  return normalizeRows(call, call.operands[0], call.results[0], norm.rows,
                       norm.width, norm.epsilon, norm.weight,
                       /*bias=*/nullptr, /*center=*/false);
}

//===----------------------------------------------------------------------===//
// softmax
//===----------------------------------------------------------------------===//

Status readSoftmax(const KernelCall &call, SoftmaxLines &lines) {
  if (Status status = expectArity(call, 1, 1); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  if (Status status = expectLike(call, "result", result, input); !status.ok())
    return status;
  return readSoftmaxLines(call, input.shape, lines);
}

Status runSoftmax(const KernelCall &call) {
  SoftmaxLines lines;
  if (Status status = readSoftmax(call, lines); !status.ok())
    return status;
  const TensorRef &input = call.operands[0], &result = call.results[0];
  int64_t length = lines.length, inner = lines.inner;
  return dispatchFloatType(call, "input", input.dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    lines.forEach([&](int64_t first) {
      const T *x = input.as<T>() + first;
      T *y = result.as<T>() + first;
      T maximum = -std::numeric_limits<T>::infinity();
      for (int64_t j = 0; j < length; ++j)
        maximum = std::max(maximum, x[j * inner]);
      double sum = 0;
      for (int64_t j = 0; j < length; ++j) {
        T e = std::exp(x[j * inner] - maximum);
        y[j * inner] = e;
        sum += e;
      }
      double inverse = 1.0 / sum;
      for (int64_t j = 0; j < length; ++j)
        y[j * inner] = static_cast<T>(y[j * inner] * inverse);
    });
    return Status::success();
  });
}

//===----------------------------------------------------------------------===//
// reduce_mean, reduce_sum, reduce_max
//===----------------------------------------------------------------------===//

namespace {

enum class Reduction { Mean, Sum, Max };

Status reduce(const KernelCall &call, Reduction reduction) {
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

  // Kept dimensions walk the result; reduced ones are walked per result
  // element, both with the input's strides.
  std::vector<int64_t> strides = contiguousStrides(input.shape);
  std::vector<int64_t> keptShape, keptStrides, reducedShape, reducedStrides,
      expected;
  size_t next = 0;
  for (int64_t d = 0; d < rank; ++d) {
    if (next < axes.size() && axes[next] == d) {
      ++next;
      reducedShape.push_back(input.shape[d]);
      reducedStrides.push_back(strides[d]);
      if (keepdims)
        expected.push_back(1);
    } else {
      keptShape.push_back(input.shape[d]);
      keptStrides.push_back(strides[d]);
      expected.push_back(input.shape[d]);
    }
  }
  if (Status status = expectShape(call, "result", result, expected);
      !status.ok())
    return status;
  int64_t reducedCount = product(reducedShape);
  StridedWalk<1> reducedWalk(reducedShape, {reducedStrides});

  return dispatchType(call, "input", input.dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    // Floats sum in double, integers in int64 (wrapping, computed unsigned).
    using Sum =
        std::conditional_t<std::is_floating_point_v<T>, double, uint64_t>;
    const T *x = input.as<T>();
    T *y = result.as<T>();
    auto reduceAt = [&](int64_t base) -> T {
      if (reduction == Reduction::Max) {
        T best = std::is_floating_point_v<T>
                     ? -std::numeric_limits<T>::infinity()
                     : std::numeric_limits<T>::lowest();
        reducedWalk.run({base},
                        [&](int64_t, const std::array<int64_t, 1> &at,
                            const std::array<int64_t, 1> &step, int64_t count) {
                          for (int64_t j = 0; j < count; ++j) {
                            T value = x[at[0] + j * step[0]];
                            // NaN wins, as in numpy's max.
                            if (value > best || value != value)
                              best = value;
                            if (best != best)
                              return;
                          }
                        });
        return best;
      }
      Sum sum = 0;
      reducedWalk.run({base},
                      [&](int64_t, const std::array<int64_t, 1> &at,
                          const std::array<int64_t, 1> &step, int64_t count) {
                        for (int64_t j = 0; j < count; ++j)
                          sum += static_cast<Sum>(x[at[0] + j * step[0]]);
                      });
      if (reduction == Reduction::Sum)
        return static_cast<T>(sum);
      if constexpr (std::is_floating_point_v<T>) {
        return static_cast<T>(sum / static_cast<double>(reducedCount));
      } else {
        if (reducedCount == 0)
          return 0;
        // The mean of signed integers truncates toward zero.
        return static_cast<T>(static_cast<int64_t>(sum) / reducedCount);
      }
    };
    forEachRun<1>(keptShape, {keptStrides}, {0},
                  [&](int64_t out, const std::array<int64_t, 1> &at,
                      const std::array<int64_t, 1> &step, int64_t count) {
                    for (int64_t j = 0; j < count; ++j)
                      y[out + j] = reduceAt(at[0] + j * step[0]);
                  });
    return Status::success();
  });
}

} // namespace

Status runReduceMean(const KernelCall &call) {
  return reduce(call, Reduction::Mean);
}

Status runReduceSum(const KernelCall &call) {
  return reduce(call, Reduction::Sum);
}

Status runReduceMax(const KernelCall &call) {
  return reduce(call, Reduction::Max);
}

} // namespace zplan::cpu::detail
