//===- Normalization.cpp - reductions and normalisations ------------------===//
//
// Reduce*, ArgMax/ArgMin, Softmax/LogSoftmax, LayerNormalization, CumSum and
// Dropout (an identity at inference): ops that work along axes.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/semantics/OpSemantics.h"

#include "onnx/onnx.pb.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace zplan::onnx_import {

llvm::Error inferReduce(NodeContext &ctx) {
  const std::string &op = ctx.opType();
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  // ReduceSum took axes as an input from opset 13, the others from 18.
  int64_t inputSince = op == "ReduceSum" ? 13 : 18;
  bool axesAsInput = ctx.getOpset() >= inputSince;
  // A node in the other opset's form is invalid; reading it as "no axes"
  // would reduce over every axis.
  if (axesAsInput && ctx.findAttribute("axes"))
    return ctx.error("axes is input 1 from opset " +
                     std::to_string(inputSince) +
                     ", not an attribute (the model is opset " +
                     std::to_string(ctx.getOpset()) + ")");
  // noop_with_empty_axes came with the input form; the importer reads it
  // whenever it is present, so an older node must not carry it.
  if (!axesAsInput && ctx.findAttribute("noop_with_empty_axes"))
    return ctx.error("noop_with_empty_axes exists from opset " +
                     std::to_string(inputSince) + " (the model is opset " +
                     std::to_string(ctx.getOpset()) + ")");
  if (!axesAsInput && ctx.input(1))
    return ctx.error("axes is an attribute before opset " +
                     std::to_string(inputSince) +
                     ", not an input (the model is opset " +
                     std::to_string(ctx.getOpset()) + ")");
  std::vector<int64_t> axes;
  if (axesAsInput) {
    if (ctx.input(1)) {
      const HostTensor *tensor;
      if (llvm::Error err = ctx.getConstantInput(1, "axes", tensor))
        return err;
      if (tensor->type != ElementType::I64)
        return ctx.error("axes (input 1) must be i64, got " +
                         typeName(tensor->type));
      axes = toInts(*tensor);
    }
    if (axes.empty() && ctx.getInt("noop_with_empty_axes", 0) != 0) {
      ctx.setOutput(0, data);
      return llvm::Error::success();
    }
  } else {
    axes = ctx.getInts("axes").value_or(std::vector<int64_t>());
  }

  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t axis : axes) {
    std::optional<int64_t> normalized = normalizeAxis(axis, rank);
    if (!normalized)
      return axisError(ctx, axis, rank);
    reduced[*normalized] = true;
  }
  bool keepDims = ctx.getInt("keepdims", 1) != 0;
  std::vector<int64_t> keptShape, shape;
  for (int64_t d = 0; d < rank; ++d) {
    keptShape.push_back(reduced[d] ? 1 : data.shape[d]);
    if (!reduced[d] || keepDims)
      shape.push_back(keptShape.back());
  }
  ctx.setOutput(0, data.type, shape);
  // Max, Min and Mean of nothing have no value worth folding.
  if (!ctx.canFold(shape, {&data}) ||
      (op != "ReduceSum" && numElements(data.shape) == 0))
    return llvm::Error::success();
  int64_t groupSize = numElements(data.shape) / numElements(keptShape);

  // Each input element lands on the output element it broadcasts from.
  std::vector<int64_t> target = broadcastOffsets(keptShape, data.shape);
  int64_t count = numElements(keptShape);
  const HostTensor &value = *data.value;
  if (elementTypeInfo(data.type).isFloat) {
    double initial =
        op == "ReduceMax"   ? -std::numeric_limits<double>::infinity()
        : op == "ReduceMin" ? std::numeric_limits<double>::infinity()
                            : 0.0;
    std::vector<double> results(count, initial);
    for (size_t i = 0; i < target.size(); ++i) {
      double x = value.floats[i];
      double &r = results[target[i]];
      if (op == "ReduceMax")
        r = std::isnan(x) || x > r ? x : r;
      else if (op == "ReduceMin")
        r = std::isnan(x) || x < r ? x : r;
      else
        r += x;
    }
    if (op == "ReduceMean")
      for (double &r : results)
        r /= groupSize;
    ctx.setOutput(0,
                  HostTensor::fromFloats(data.type, shape, std::move(results)));
    return llvm::Error::success();
  }
  int64_t initial = op == "ReduceMax"   ? std::numeric_limits<int64_t>::min()
                    : op == "ReduceMin" ? std::numeric_limits<int64_t>::max()
                                        : 0;
  std::vector<int64_t> results(count, initial);
  for (size_t i = 0; i < target.size(); ++i) {
    int64_t x = value.ints[i];
    int64_t &r = results[target[i]];
    if (op == "ReduceMax")
      r = std::max(r, x);
    else if (op == "ReduceMin")
      r = std::min(r, x);
    else
      r = wrappingAdd(r, x);
  }
  if (op == "ReduceMean")
    for (int64_t &r : results)
      r /= groupSize;
  ctx.setOutput(0, HostTensor::fromInts(data.type, shape, std::move(results)));
  return llvm::Error::success();
}

llvm::Error inferArgMinMax(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  llvm::Expected<int64_t> axis = readAxis(ctx, rank, 0);
  if (!axis)
    return axis.takeError();
  if (data.shape[*axis] == 0)
    return ctx.error("cannot reduce the empty axis " +
                     std::to_string(ctx.getInt("axis", 0)));
  bool keepDims = ctx.getInt("keepdims", 1) != 0;
  bool selectLast = ctx.getInt("select_last_index", 0) != 0;
  bool isMax = ctx.opType() == "ArgMax";
  std::vector<int64_t> shape = data.shape;
  if (keepDims)
    shape[*axis] = 1;
  else
    shape.erase(shape.begin() + *axis);
  ctx.setOutput(0, ElementType::I64, shape);
  if (!ctx.canFold(shape, {&data}))
    return llvm::Error::success();

  AxisExtents extents = extentsAround(data.shape, *axis);
  std::vector<int64_t> results;
  results.reserve(extents.outer * extents.inner);
  for (int64_t outer = 0; outer < extents.outer; ++outer) {
    for (int64_t inner = 0; inner < extents.inner; ++inner) {
      auto at = [&](int64_t l) {
        return data.value->getDouble(
            (outer * extents.length + l) * extents.inner + inner);
      };
      int64_t best = 0;
      for (int64_t l = 1; l < extents.length; ++l) {
        double x = at(l), current = at(best);
        bool better = isMax ? x > current : x < current;
        if (better || (selectLast && x == current))
          best = l;
      }
      results.push_back(best);
    }
  }
  ctx.setOutput(
      0, HostTensor::fromInts(ElementType::I64, shape, std::move(results)));
  return llvm::Error::success();
}

llvm::Error inferSoftmax(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  bool legacy = ctx.getOpset() < 13;
  llvm::Expected<int64_t> axis = readAxis(ctx, rank, legacy ? 1 : -1);
  if (!axis)
    return axis.takeError();
  if (!elementTypeInfo(data.type).isFloat)
    return ctx.error(std::string("input must be floating-point, got ") +
                     typeName(data.type));
  ctx.setOutput(0, data.type, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return llvm::Error::success();

  // Before opset 13 the input is coerced to 2-D at `axis`: the softmax runs
  // over all trailing dimensions at once.
  AxisExtents extents = extentsAround(data.shape, *axis);
  if (legacy) {
    extents.length *= extents.inner;
    extents.inner = 1;
  }
  bool logarithmic = ctx.opType() == "LogSoftmax";
  std::vector<double> values = data.value->floats;
  for (int64_t outer = 0; outer < extents.outer; ++outer) {
    for (int64_t inner = 0; inner < extents.inner; ++inner) {
      auto at = [&](int64_t l) -> double & {
        return values[(outer * extents.length + l) * extents.inner + inner];
      };
      double maximum = -std::numeric_limits<double>::infinity();
      for (int64_t l = 0; l < extents.length; ++l)
        maximum = std::max(maximum, at(l));
      double sum = 0;
      for (int64_t l = 0; l < extents.length; ++l)
        sum += std::exp(at(l) - maximum);
      for (int64_t l = 0; l < extents.length; ++l)
        at(l) = logarithmic ? at(l) - maximum - std::log(sum)
                            : std::exp(at(l) - maximum) / sum;
    }
  }
  ctx.setOutput(
      0, HostTensor::fromFloats(data.type, data.shape, std::move(values)));
  return llvm::Error::success();
}

llvm::Error inferLayerNormalization(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0), &scale = *ctx.input(1);
  const ValueInfo *bias = ctx.input(2);
  int64_t rank = data.shape.size();
  llvm::Expected<int64_t> axis = readAxis(ctx, rank, -1);
  if (!axis)
    return axis.takeError();
  if (!elementTypeInfo(data.type).isFloat)
    return ctx.error(std::string("input must be floating-point, got ") +
                     typeName(data.type));
  std::vector<int64_t> normalizedShape(data.shape.begin() + *axis,
                                       data.shape.end());
  for (const ValueInfo *parameter : {&scale, bias}) {
    if (!parameter)
      continue;
    if (parameter->type != data.type)
      return typeMismatchError(ctx, data.type, parameter->type);
    std::optional<std::vector<int64_t>> shape =
        broadcastShapes(parameter->shape, normalizedShape);
    if (!shape || *shape != normalizedShape)
      return broadcastError(ctx, parameter->shape, normalizedShape);
  }
  std::optional<ElementType> statisticsType =
      elementTypeFromOnnx(static_cast<int32_t>(ctx.getInt("stash_type", 1)));
  if (!statisticsType || !elementTypeInfo(*statisticsType).isFloat)
    return ctx.error("unsupported stash_type " +
                     std::to_string(ctx.getInt("stash_type", 1)));
  // Mean and InvStdDev keep the normalised dimensions as 1s.
  std::vector<int64_t> statisticsShape = data.shape;
  for (int64_t d = *axis; d < rank; ++d)
    statisticsShape[d] = 1;
  ctx.setOutput(0, data.type, data.shape);
  ctx.setOutput(1, *statisticsType, statisticsShape);
  ctx.setOutput(2, *statisticsType, statisticsShape);
  if (!ctx.canFold(data.shape, {&data, &scale, bias}))
    return llvm::Error::success();

  double epsilon = ctx.getFloat("epsilon", 1e-5);
  AxisExtents extents = extentsAround(data.shape, *axis);
  int64_t length = numElements(normalizedShape);
  std::vector<int64_t> scaleAt = broadcastOffsets(scale.shape, normalizedShape);
  std::vector<int64_t> biasAt;
  if (bias)
    biasAt = broadcastOffsets(bias->shape, normalizedShape);
  std::vector<double> values(data.value->floats.size());
  std::vector<double> means, inverseDeviations;
  for (int64_t row = 0; row < extents.outer; ++row) {
    const double *x = data.value->floats.data() + row * length;
    double mean = 0, variance = 0;
    for (int64_t i = 0; i < length; ++i)
      mean += x[i];
    mean /= length;
    for (int64_t i = 0; i < length; ++i)
      variance += (x[i] - mean) * (x[i] - mean);
    variance /= length;
    double inverseDeviation = 1.0 / std::sqrt(variance + epsilon);
    for (int64_t i = 0; i < length; ++i) {
      double y =
          (x[i] - mean) * inverseDeviation * scale.value->getDouble(scaleAt[i]);
      if (bias)
        y += bias->value->getDouble(biasAt[i]);
      values[row * length + i] = y;
    }
    means.push_back(mean);
    inverseDeviations.push_back(inverseDeviation);
  }
  ctx.setOutput(
      0, HostTensor::fromFloats(data.type, data.shape, std::move(values)));
  ctx.setOutput(1, HostTensor::fromFloats(*statisticsType, statisticsShape,
                                          std::move(means)));
  ctx.setOutput(2, HostTensor::fromFloats(*statisticsType, statisticsShape,
                                          std::move(inverseDeviations)));
  return llvm::Error::success();
}

llvm::Error inferCumSum(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  int64_t rank = data.shape.size();
  int64_t axisValue;
  if (llvm::Error err = getConstantScalar(ctx, 1, "axis", axisValue))
    return err;
  std::optional<int64_t> axis = normalizeAxis(axisValue, rank);
  if (!axis)
    return axisError(ctx, axisValue, rank);
  ctx.setOutput(0, data.type, data.shape);
  if (!ctx.canFold(data.shape, {&data}))
    return llvm::Error::success();

  bool exclusive = ctx.getInt("exclusive", 0) != 0;
  bool reverse = ctx.getInt("reverse", 0) != 0;
  bool floating = elementTypeInfo(data.type).isFloat;
  AxisExtents extents = extentsAround(data.shape, *axis);
  HostTensor result = *data.value;
  for (int64_t outer = 0; outer < extents.outer; ++outer) {
    for (int64_t inner = 0; inner < extents.inner; ++inner) {
      // The runtime accumulates in the element type, one element at a time,
      // so the running sum is rounded after every addition.
      double floatSum = 0;
      int64_t intSum = 0;
      for (int64_t step = 0; step < extents.length; ++step) {
        int64_t l = reverse ? extents.length - 1 - step : step;
        int64_t at = (outer * extents.length + l) * extents.inner + inner;
        if (floating) {
          double x = data.value->floats[at];
          if (!exclusive)
            floatSum = roundToElementType(floatSum + x, data.type);
          result.floats[at] = floatSum;
          if (exclusive)
            floatSum = roundToElementType(floatSum + x, data.type);
        } else {
          int64_t x = data.value->ints[at];
          if (!exclusive)
            intSum = wrappingAdd(intSum, x);
          result.ints[at] = wrapToElementType(intSum, data.type);
          if (exclusive)
            intSum = wrappingAdd(intSum, x);
        }
      }
    }
  }
  ctx.setOutput(0, std::move(result));
  return llvm::Error::success();
}

llvm::Error inferDropout(NodeContext &ctx) {
  const ValueInfo &data = *ctx.input(0);
  // Inference only: the op is the identity and every mask element is true.
  // The ratio is not used, but a ratio that is not a float scalar is an
  // invalid node, not one to run.
  if (const ValueInfo *ratio = ctx.input(1)) {
    if (!elementTypeInfo(ratio->type).isFloat || numElements(ratio->shape) != 1)
      return ctx.error("ratio (input 1) must be a floating-point scalar, "
                       "got " +
                       formatShape(ratio->shape) + " " + typeName(ratio->type));
  }
  if (ctx.getOpset() >= 12 && ctx.input(2)) {
    int64_t training;
    if (llvm::Error err = getConstantScalar(ctx, 2, "training_mode", training))
      return err;
    if (training)
      return ctx.error("training mode is not supported");
  }
  ctx.setOutput(0, data);
  ctx.setOutput(1, ElementType::Bool, data.shape);
  if (ctx.numOutputs() > 1 && ctx.canFold(data.shape, {}))
    ctx.setOutput(1, HostTensor::fromInts(
                         ElementType::Bool, data.shape,
                         std::vector<int64_t>(numElements(data.shape), 1)));
  return llvm::Error::success();
}

} // namespace zplan::onnx_import
