//===- Attention.cpp - nn.attention: softmax(mask(q k^T * scale)) v -------===//
//
// Per (batch, head) matrix -- every leading dimension of the query -- two
// GEMMs around a row softmax: scores[S, T] = scale * q[S, D] k[T, D]^T, the
// mask applied (added, or `masked_value` where a bool mask is false), each
// row turned into probabilities (max subtracted, the sum kept in double),
// then result[S, Dv] = scores[S, T] v[T, Dv]. The scores live in one
// thread-local scratch buffer that only grows, so a steady-state call does
// not allocate. The shape and mask rules and the probabilities are the
// functions AttentionSupport.h declares, which attention_grad calls too.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/AttentionSupport.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

namespace zplan::cpu::detail {

namespace {

/// Scores of one row into probabilities: exp(x - max) / sum, summed in
/// double. A row that is -inf throughout becomes NaN, as in onnxruntime.
void softmaxRow(float *row, int64_t length) {
  float maximum = -std::numeric_limits<float>::infinity();
  for (int64_t t = 0; t < length; ++t)
    maximum = std::max(maximum, row[t]);
  double sum = 0;
  for (int64_t t = 0; t < length; ++t) {
    row[t] = std::exp(row[t] - maximum);
    sum += row[t];
  }
  float inverse = static_cast<float>(1.0 / sum);
  for (int64_t t = 0; t < length; ++t)
    row[t] *= inverse;
}

} // namespace

std::vector<int64_t> AttentionShape::outputShape() const {
  std::vector<int64_t> shape = batch;
  shape.insert(shape.end(), {s, dv});
  return shape;
}

Status checkAttentionShapes(const KernelCall &call, const TensorRef &query,
                            const TensorRef &key, const TensorRef &value,
                            const char *outputName, const TensorRef &output,
                            AttentionShape &shape) {
  if (query.shape.size() < 2)
    return call.error("query has shape " + formatShape(query.shape) +
                      ", expected rank >= 2 ([..., S, D])");
  size_t rank = query.shape.size();
  shape.batch.assign(query.shape.begin(), query.shape.end() - 2);
  shape.s = query.shape[rank - 2];
  shape.d = query.shape[rank - 1];
  shape.t = key.shape.size() == rank ? key.shape[rank - 2] : 0;
  shape.dv = value.shape.empty() ? 0 : value.shape.back();
  std::vector<int64_t> expected = shape.batch;
  expected.insert(expected.end(), {shape.t, shape.d});
  if (Status status = expectShape(call, "key", key, expected); !status.ok())
    return status;
  expected.back() = shape.dv;
  if (Status status = expectShape(call, "value", value, expected); !status.ok())
    return status;
  return expectShape(call, outputName, output, shape.outputShape());
}

Status checkBlasRange(const KernelCall &call, const AttentionShape &shape) {
  for (int64_t extent : {shape.s, shape.t, shape.d, shape.dv})
    if (extent > INT_MAX)
      return call.error("extent " + std::to_string(extent) +
                        " exceeds the BLAS integer range");
  return Status::success();
}

Status readAttentionAttributes(const KernelCall &call,
                               const TensorRef *maskOperand,
                               const AttentionShape &shape, float &scale,
                               AttentionMask &mask) {
  double scaleValue;
  if (Status status = floatAttribute(call, "scale", scaleValue); !status.ok())
    return status;
  scale = static_cast<float>(scaleValue);
  mask = AttentionMask();
  if (!maskOperand) {
    mask.batchStrides.assign(shape.batch.size(), 0);
    return Status::success();
  }
  std::string kindText = textAttributeOr(call, "mask_kind", "additive");
  if (kindText == "additive") {
    if (Status status =
            expectType(call, "additive mask", *maskOperand, ElementType::F32);
        !status.ok())
      return status;
    mask.additive = maskOperand->as<float>();
  } else if (kindText == "select") {
    if (Status status =
            expectType(call, "select mask", *maskOperand, ElementType::Bool);
        !status.ok())
      return status;
    double masked;
    if (Status status = floatAttribute(call, "masked_value", masked);
        !status.ok())
      return status;
    mask.maskedValue = static_cast<float>(masked);
    mask.select = maskOperand->as<uint8_t>();
  } else {
    return call.error("mask_kind is \"" + kindText +
                      "\", expected \"additive\" or \"select\"");
  }
  std::vector<int64_t> scores = shape.batch;
  scores.insert(scores.end(), {shape.s, shape.t});
  std::vector<int64_t> strides;
  if (!broadcastStrides(maskOperand->shape, scores, strides))
    return call.error("mask of shape " + formatShape(maskOperand->shape) +
                      " does not broadcast to the scores " +
                      formatShape(scores));
  size_t rank = scores.size();
  mask.rowStride = strides[rank - 2];
  mask.columnStride = strides[rank - 1];
  mask.batchStrides.assign(strides.begin(), strides.end() - 2);
  return Status::success();
}

void attentionProbabilities(const float *q, const float *k, float scale,
                            const AttentionShape &shape,
                            const AttentionMask &mask, int64_t maskOffset,
                            float *probabilities) {
  int64_t s = shape.s, t = shape.t;
  int is = static_cast<int>(s), it = static_cast<int>(t),
      id = static_cast<int>(shape.d);
  // Leading dimensions are at least 1 even for an empty contraction.
  int ldqk = std::max(id, 1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, is, it, id, scale, q,
              ldqk, k, ldqk, 0.0f, probabilities, it);
  for (int64_t row = 0; row < s; ++row) {
    float *line = probabilities + row * t;
    int64_t rowMask = maskOffset + row * mask.rowStride;
    if (mask.additive) {
      for (int64_t col = 0; col < t; ++col)
        line[col] += mask.additive[rowMask + col * mask.columnStride];
    } else if (mask.select) {
      for (int64_t col = 0; col < t; ++col)
        if (!mask.select[rowMask + col * mask.columnStride])
          line[col] = mask.maskedValue;
    }
    softmaxRow(line, t);
  }
}

Status checkAttention(const KernelCall &call, AttentionShape &shape,
                      float &scale, AttentionMask &mask) {
  if (Status status = expectArity(call, 3, 4); !status.ok())
    return status;
  const TensorRef &query = call.operands[0], &key = call.operands[1],
                  &value = call.operands[2], &result = call.results[0];
  const char *names[] = {"key", "value"};
  for (size_t i = 1; i < 3; ++i)
    if (Status status =
            expectType(call, names[i - 1], call.operands[i], ElementType::F32);
        !status.ok())
      return status;
  if (Status status = expectType(call, "query", query, ElementType::F32);
      !status.ok())
    return status;
  if (Status status = expectType(call, "result", result, ElementType::F32);
      !status.ok())
    return status;

  // Shapes: query [..., S, D], key [..., T, D], value [..., T, Dv].
  if (Status status = checkAttentionShapes(call, query, key, value, "result",
                                           result, shape);
      !status.ok())
    return status;
  // The scale, and the mask broadcast to the scores [..., S, T].
  return readAttentionAttributes(
      call, call.operands.size() == 4 ? &call.operands[3] : nullptr, shape,
      scale, mask);
}

Status runAttention(const KernelCall &call) {
  AttentionShape shape;
  float scale;
  AttentionMask mask;
  if (Status status = checkAttention(call, shape, scale, mask); !status.ok())
    return status;
  const TensorRef &query = call.operands[0], &key = call.operands[1],
                  &value = call.operands[2], &result = call.results[0];
  const std::vector<int64_t> &batch = shape.batch;
  int64_t s = shape.s, d = shape.d, t = shape.t, dv = shape.dv;

  if (s == 0 || dv == 0 || product(batch) == 0)
    return Status::success();
  if (Status status = checkBlasRange(call, shape); !status.ok())
    return status;

  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(s * t))
    scratch.resize(s * t);
  float *scores = scratch.data();
  const float *q = query.as<float>(), *k = key.as<float>(),
              *v = value.as<float>();
  float *out = result.as<float>();
  int is = static_cast<int>(s), it = static_cast<int>(t),
      idv = static_cast<int>(dv);

  // Every leading index is one independent (batch, head) matrix; only the
  // mask may broadcast across them.
  forEachAttentionEntry(shape, mask, [&](int64_t entry, int64_t maskOffset) {
    if (t == 0) { // softmax over nothing: the empty sum of values
      std::fill(out + entry * s * dv, out + (entry + 1) * s * dv, 0.0f);
      return;
    }
    attentionProbabilities(q + entry * s * d, k + entry * t * d, scale, shape,
                           mask, maskOffset, scores);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, is, idv, it, 1.0f,
                scores, it, v + entry * t * dv, idv, 0.0f, out + entry * s * dv,
                idv);
  });
  return Status::success();
}

} // namespace zplan::cpu::detail
