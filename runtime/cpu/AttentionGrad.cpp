//===- AttentionGrad.cpp - attention_grad: dq, dk, dv ---------------------===//
//
// The backward of Attention.cpp, per (batch, head) matrix. The probabilities
// are recomputed exactly as the forward kernel computed them (the same GEMM,
// the mask applied the same way, the same row softmax), then
//   dv = P^T dout,  dP = dout v^T,  dS = P * (dP - rowsum(dP * P)),
//   dq = scale * dS k,  dk = scale * dS^T q,
// where dS is zero at every score a select mask replaced by masked_value
// (the forward's output does not depend on q and k there). An additive mask
// passes the gradient through unchanged (the mask itself gets none). A row
// whose scores are all masked behaves as in the forward: with a finite
// masked_value its probabilities are uniform (dv gets its share, dq and dk
// nothing from it); with -inf they are NaN, and so are the gradients it
// reaches, as the forward's output is. The scratch (P and dP) is
// thread-local and only grows.
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

/// Scores of one row into probabilities, exactly as Attention.cpp's
/// softmaxRow: exp(x - max) / sum, the sum in double, the inverse in f32.
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

/// attention_grad(dout [..., S, Dv], query [..., S, D], key [..., T, D],
/// value [..., T, Dv], mask?; scale, mask_kind, masked_value) -> dquery,
/// dkey, dvalue (the shapes of q, k, v): the gradient of nn.attention with
/// the same operands and attributes (the mask broadcasts to [..., S, T]),
/// f32 only.
Status runAttentionGrad(const KernelCall &call) {
  if (Status status = expectArity(call, 4, 5, 3); !status.ok())
    return status;
  const TensorRef &dout = call.operands[0], &query = call.operands[1],
                  &key = call.operands[2], &value = call.operands[3];
  const char *operandNames[] = {"dout", "query", "key", "value"};
  for (size_t i = 0; i < 4; ++i)
    if (Status status = expectType(call, operandNames[i], call.operands[i],
                                   ElementType::F32);
        !status.ok())
      return status;

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
  if (Status status = expectShape(call, "dout", dout, expected); !status.ok())
    return status;
  const char *resultNames[] = {"dquery", "dkey", "dvalue"};
  for (size_t i = 0; i < 3; ++i) {
    const TensorRef &result = call.results[i], &like = call.operands[i + 1];
    if (Status status =
            expectType(call, resultNames[i], result, ElementType::F32);
        !status.ok())
      return status;
    if (Status status = expectShape(call, resultNames[i], result, like.shape);
        !status.ok())
      return status;
  }

  double scale;
  if (Status status = floatAttribute(call, "scale", scale); !status.ok())
    return status;

  // The mask, broadcast to the scores [..., S, T], read as the forward
  // reads it.
  MaskKind kind = MaskKind::None;
  std::vector<int64_t> maskBatchStrides(batch.size(), 0);
  int64_t maskRowStride = 0, maskColumnStride = 0;
  float maskedValue = 0;
  if (call.operands.size() == 5) {
    const TensorRef &maskRef = call.operands[4];
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
    maskRowStride = strides[rank - 2];
    maskColumnStride = strides[rank - 1];
    maskBatchStrides.assign(strides.begin(), strides.end() - 2);
  }

  const float *q = query.as<float>(), *k = key.as<float>(),
              *v = value.as<float>(), *g = dout.as<float>();
  float *dq = call.results[0].as<float>(), *dk = call.results[1].as<float>(),
        *dvOut = call.results[2].as<float>();
  int64_t entries = product(batch);
  // Nothing reaches an empty dimension's partners: their gradients are 0.
  if (s == 0 || t == 0 || entries == 0) {
    std::fill(dq, dq + entries * s * d, 0.0f);
    std::fill(dk, dk + entries * t * d, 0.0f);
    std::fill(dvOut, dvOut + entries * t * dv, 0.0f);
    return Status::success();
  }
  for (int64_t extent : {s, t, d, dv})
    if (extent > INT_MAX)
      return call.error("extent " + std::to_string(extent) +
                        " exceeds the BLAS integer range");

  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<size_t>(2 * s * t))
    scratch.resize(2 * s * t);
  float *probabilities = scratch.data(),
        *dprobabilities = scratch.data() + s * t;
  const float *additive =
      kind == MaskKind::Additive ? call.operands[4].as<float>() : nullptr;
  const uint8_t *select =
      kind == MaskKind::Select ? call.operands[4].as<uint8_t>() : nullptr;
  int is = static_cast<int>(s), it = static_cast<int>(t),
      id = static_cast<int>(d), idv = static_cast<int>(dv);
  int ldqk = std::max(id, 1), ldv = std::max(idv, 1);
  float floatScale = static_cast<float>(scale);

  forEachRun<1>(
      batch, {maskBatchStrides}, {0},
      [&](int64_t first, const std::array<int64_t, 1> &maskBase,
          const std::array<int64_t, 1> &maskStep, int64_t count) {
        for (int64_t j = 0; j < count; ++j) {
          int64_t entry = first + j;
          int64_t maskOffset = maskBase[0] + j * maskStep[0];
          const float *qe = q + entry * s * d, *ke = k + entry * t * d,
                      *ve = v + entry * t * dv, *ge = g + entry * s * dv;
          // P, as the forward computed it.
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, is, it, id,
                      floatScale, qe, ldqk, ke, ldqk, 0.0f, probabilities, it);
          for (int64_t row = 0; row < s; ++row) {
            float *line = probabilities + row * t;
            int64_t rowMask = maskOffset + row * maskRowStride;
            if (additive) {
              for (int64_t col = 0; col < t; ++col)
                line[col] += additive[rowMask + col * maskColumnStride];
            } else if (select) {
              for (int64_t col = 0; col < t; ++col)
                if (!select[rowMask + col * maskColumnStride])
                  line[col] = maskedValue;
            }
            softmaxRow(line, t);
          }
          // dv[T, Dv] = P^T dout; dP[S, T] = dout v^T.
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, it, idv, is,
                      1.0f, probabilities, it, ge, ldv, 0.0f,
                      dvOut + entry * t * dv, ldv);
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, is, it, idv,
                      1.0f, ge, ldv, ve, ldv, 0.0f, dprobabilities, it);
          // dS = P * (dP - rowsum(dP * P)), overwriting dP; zero where a
          // select mask replaced the score.
          for (int64_t row = 0; row < s; ++row) {
            const float *p = probabilities + row * t;
            float *line = dprobabilities + row * t;
            double dot = 0;
            for (int64_t col = 0; col < t; ++col)
              dot += static_cast<double>(line[col]) * p[col];
            for (int64_t col = 0; col < t; ++col)
              line[col] = static_cast<float>(static_cast<double>(p[col]) *
                                             (line[col] - dot));
            if (select) {
              int64_t rowMask = maskOffset + row * maskRowStride;
              for (int64_t col = 0; col < t; ++col)
                if (!select[rowMask + col * maskColumnStride])
                  line[col] = 0.0f;
            }
          }
          // dq[S, D] = scale dS k; dk[T, D] = scale dS^T q.
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, is, id, it,
                      floatScale, dprobabilities, it, ke, ldqk, 0.0f,
                      dq + entry * s * d, ldqk);
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, it, id, is,
                      floatScale, dprobabilities, it, qe, ldqk, 0.0f,
                      dk + entry * t * d, ldqk);
        }
      });
  return Status::success();
}

} // namespace zplan::cpu::detail
