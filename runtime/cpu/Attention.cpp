//===- Attention.cpp - nn.attention: softmax(mask(q k^T * scale)) v -------===//
//
// Per (batch, head) matrix -- every leading dimension of the query -- two
// GEMMs around a row softmax: scores[S, T] = scale * q[S, D] k[T, D]^T, the
// mask applied (added, or `masked_value` where a bool mask is false), each
// row turned into probabilities (max subtracted, the sum kept in double),
// then result[S, Dv] = scores[S, T] v[T, Dv]. The scores live in one
// thread-local scratch buffer that only grows, so a steady-state call does
// not allocate.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <limits>

namespace zplan::cpu::detail {

namespace {

enum class MaskKind { None, Additive, Select };

/// Where the mask element for (batch entry, s, t) lives: the batch entry's
/// base offset comes from forEachRun over the leading dimensions, s and t
/// step with these strides (0 where the mask broadcasts).
struct MaskLayout {
  std::vector<int64_t> batchStrides;
  int64_t rowStride = 0, columnStride = 0;
};

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

Status runAttention(const KernelCall &call) {
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
  if (query.shape.size() < 2)
    return call.error("query has shape " + formatShape(query.shape) +
                      ", expected rank >= 2 ([..., S, D])");
  size_t rank = query.shape.size();
  std::vector<int64_t> batch(query.shape.begin(), query.shape.end() - 2);
  int64_t s = query.shape[rank - 2], d = query.shape[rank - 1];
  int64_t t = key.shape.size() == rank ? key.shape[rank - 2] : 0;
  int64_t dv = value.shape.empty() ? 0 : value.shape.back();
  std::vector<int64_t> expected = batch;
  expected.insert(expected.end(), {t, d});
  if (Status status = expectShape(call, "key", key, expected); !status.ok())
    return status;
  expected.back() = dv;
  if (Status status = expectShape(call, "value", value, expected); !status.ok())
    return status;
  expected[rank - 2] = s;
  if (Status status = expectShape(call, "result", result, expected);
      !status.ok())
    return status;

  double scale;
  if (Status status = floatAttribute(call, "scale", scale); !status.ok())
    return status;

  // The mask, broadcast to the scores [..., S, T].
  MaskKind kind = MaskKind::None;
  MaskLayout mask;
  float maskedValue = 0;
  if (call.operands.size() == 4) {
    const TensorRef &maskRef = call.operands[3];
    std::string kindText = textAttributeOr(call, "mask_kind", "additive");
    if (kindText == "additive") {
      kind = MaskKind::Additive;
      if (Status status =
              expectType(call, "additive mask", maskRef, ElementType::F32);
          !status.ok())
        return status;
    } else if (kindText == "select") {
      kind = MaskKind::Select;
      if (Status status =
              expectType(call, "select mask", maskRef, ElementType::Bool);
          !status.ok())
        return status;
      double masked;
      if (Status status = floatAttribute(call, "masked_value", masked);
          !status.ok())
        return status;
      maskedValue = static_cast<float>(masked);
    } else {
      return call.error("mask_kind is \"" + kindText +
                        "\", expected \"additive\" or \"select\"");
    }
    std::vector<int64_t> scores = batch;
    scores.insert(scores.end(), {s, t});
    std::vector<int64_t> strides;
    if (!broadcastStrides(maskRef.shape, scores, strides))
      return call.error("mask of shape " + formatShape(maskRef.shape) +
                        " does not broadcast to the scores " +
                        formatShape(scores));
    mask.rowStride = strides[rank - 2];
    mask.columnStride = strides[rank - 1];
    mask.batchStrides.assign(strides.begin(), strides.end() - 2);
  } else {
    mask.batchStrides.assign(batch.size(), 0);
  }

  if (s == 0 || dv == 0 || product(batch) == 0)
    return Status::success();
  for (int64_t extent : {s, t, d, dv})
    if (extent > INT_MAX)
      return call.error("extent " + std::to_string(extent) +
                        " exceeds the BLAS integer range");

  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(s * t))
    scratch.resize(s * t);
  float *scores = scratch.data();
  const float *q = query.as<float>(), *k = key.as<float>(),
              *v = value.as<float>();
  float *out = result.as<float>();
  const float *additive =
      kind == MaskKind::Additive ? call.operands[3].as<float>() : nullptr;
  const uint8_t *select =
      kind == MaskKind::Select ? call.operands[3].as<uint8_t>() : nullptr;
  // Leading dimensions are at least 1 even for an empty contraction.
  int is = static_cast<int>(s), it = static_cast<int>(t),
      id = static_cast<int>(d), idv = static_cast<int>(dv);
  int ldq = std::max(id, 1);

  // Every leading index is one independent (batch, head) matrix; only the
  // mask may broadcast across them.
  forEachRun<1>(
      batch, {mask.batchStrides}, {0},
      [&](int64_t first, const std::array<int64_t, 1> &maskBase,
          const std::array<int64_t, 1> &maskStep, int64_t count) {
        for (int64_t j = 0; j < count; ++j) {
          int64_t entry = first + j;
          int64_t maskOffset = maskBase[0] + j * maskStep[0];
          if (t == 0) { // softmax over nothing: the empty sum of values
            std::fill(out + entry * s * dv, out + (entry + 1) * s * dv, 0.0f);
            continue;
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, is, it, id,
                      static_cast<float>(scale), q + entry * s * d, ldq,
                      k + entry * t * d, ldq, 0.0f, scores, it);
          for (int64_t row = 0; row < s; ++row) {
            float *line = scores + row * t;
            int64_t rowMask = maskOffset + row * mask.rowStride;
            if (additive) {
              for (int64_t col = 0; col < t; ++col)
                line[col] += additive[rowMask + col * mask.columnStride];
            } else if (select) {
              for (int64_t col = 0; col < t; ++col)
                if (!select[rowMask + col * mask.columnStride])
                  line[col] = maskedValue;
            }
            softmaxRow(line, t);
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, is, idv, it,
                      1.0f, scores, it, v + entry * t * dv, idv, 0.0f,
                      out + entry * s * dv, idv);
        }
      });
  return Status::success();
}

} // namespace zplan::cpu::detail
