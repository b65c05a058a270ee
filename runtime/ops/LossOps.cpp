//===- LossOps.cpp - cross_entropy's and its gradient's checks ------------===//
//
// logits [..., V] of a float type (bf16 too), targets [...] (the logits'
// shape without V) of i64 or i32, and a loss (and dloss) scalar of the type
// the logits compute in (lossComputeType: f32 for bf16 logits).
//
//===----------------------------------------------------------------------===//

#include "runtime/ops/LossOps.h"

#include "runtime/ops/Attributes.h"
#include "runtime/ops/Checks.h"
#include "runtime/ops/IndexingOps.h"

#include <vector>

namespace zplan::ops {

namespace {

/// Default of the nn ops' ignore_index (PyTorch's and Hugging Face's).
constexpr int64_t kDefaultIgnoreIndex = -100;

/// Logits of f32, f64 or bf16 (read widened, computed in f32).
Status expectLogitsType(const KernelCall &call, const TensorRef &logits) {
  if (logits.dtype == ElementType::BF16)
    return Status::success();
  return expectFloatType(call, "logits", logits);
}

/// What both ops read: `operands` operands, the first two logits [..., V]
/// of a float type and targets [...] (logits' shape without V) of i64 or
/// i32. Sets `rows` (ignoreIndex included).
Status checkLogitsAndTargets(const KernelCall &call, size_t operands,
                             CrossEntropyRows &rows) {
  if (Status status = expectArity(call, operands, operands); !status.ok())
    return status;
  const TensorRef &logits = call.operands[0], &targets = call.operands[1];
  if (Status status = expectLogitsType(call, logits); !status.ok())
    return status;
  if (Status status = checkIndexType(call, "targets", targets); !status.ok())
    return status;
  if (logits.shape.empty())
    return call.error("logits has shape [], expected rank >= 1 ([..., V])");
  std::vector<int64_t> expected(logits.shape.begin(), logits.shape.end() - 1);
  if (Status status = expectShape(call, "targets", targets, expected);
      !status.ok())
    return status;
  rows.ignoreIndex = intAttributeOr(call, "ignore_index", kDefaultIgnoreIndex);
  rows.classes = logits.shape.back();
  rows.rows = targets.numElements();
  return Status::success();
}

} // namespace

ElementType lossComputeType(ElementType logits) {
  return logits == ElementType::BF16 ? ElementType::F32 : logits;
}

Status readCrossEntropy(const KernelCall &call, CrossEntropyRows &rows) {
  if (Status status = checkLogitsAndTargets(call, /*operands=*/2, rows);
      !status.ok())
    return status;
  const TensorRef &logits = call.operands[0], &loss = call.results[0];
  if (Status status =
          expectType(call, "loss", loss, lossComputeType(logits.dtype));
      !status.ok())
    return status;
  return expectShape(call, "loss", loss, {});
}

Status readCrossEntropyGrad(const KernelCall &call, CrossEntropyRows &rows) {
  if (Status status = checkLogitsAndTargets(call, /*operands=*/3, rows);
      !status.ok())
    return status;
  const TensorRef &logits = call.operands[0], &dloss = call.operands[2],
                  &dlogits = call.results[0];
  if (Status status =
          expectType(call, "dloss", dloss, lossComputeType(logits.dtype));
      !status.ok())
    return status;
  if (Status status = expectShape(call, "dloss", dloss, {}); !status.ok())
    return status;
  if (Status status =
          expectType(call, "dlogits", dlogits, lossComputeType(logits.dtype));
      !status.ok())
    return status;
  return expectShape(call, "dlogits", dlogits, logits.shape);
}

/// The logits' shape without V.
static std::vector<int64_t> rowShape(const TensorRef &logits) {
  return std::vector<int64_t>(logits.shape.begin(), logits.shape.end() - 1);
}

Status readTokenLogprobs(const KernelCall &call, CrossEntropyRows &rows) {
  if (Status status = checkLogitsAndTargets(call, /*operands=*/2, rows);
      !status.ok())
    return status;
  const TensorRef &logits = call.operands[0], &logp = call.results[0];
  if (Status status =
          expectType(call, "logp", logp, lossComputeType(logits.dtype));
      !status.ok())
    return status;
  return expectShape(call, "logp", logp, rowShape(logits));
}

Status readTokenLogprobsGrad(const KernelCall &call, CrossEntropyRows &rows) {
  if (Status status = checkLogitsAndTargets(call, /*operands=*/3, rows);
      !status.ok())
    return status;
  const TensorRef &logits = call.operands[0], &dlogp = call.operands[2],
                  &dlogits = call.results[0];
  if (Status status =
          expectType(call, "dlogp", dlogp, lossComputeType(logits.dtype));
      !status.ok())
    return status;
  if (Status status = expectShape(call, "dlogp", dlogp, rowShape(logits));
      !status.ok())
    return status;
  if (Status status =
          expectType(call, "dlogits", dlogits, lossComputeType(logits.dtype));
      !status.ok())
    return status;
  return expectShape(call, "dlogits", dlogits, logits.shape);
}

Status readTokenEntropy(const KernelCall &call, CrossEntropyRows &rows) {
  if (Status status = expectArity(call, 1, 1); !status.ok())
    return status;
  const TensorRef &logits = call.operands[0], &entropy = call.results[0];
  if (Status status = expectLogitsType(call, logits); !status.ok())
    return status;
  if (logits.shape.empty())
    return call.error("logits has shape [], expected rank >= 1 ([..., V])");
  if (Status status =
          expectType(call, "entropy", entropy, lossComputeType(logits.dtype));
      !status.ok())
    return status;
  if (Status status = expectShape(call, "entropy", entropy, rowShape(logits));
      !status.ok())
    return status;
  rows.classes = logits.shape.back();
  rows.rows = entropy.numElements();
  return Status::success();
}

} // namespace zplan::ops
