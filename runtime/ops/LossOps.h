//===- LossOps.h - cross_entropy's and its gradient's checks --------------===//
//
// Shared validation for every backend to call: cross_entropy and
// cross_entropy_grad (and the RL ops token_logprobs, token_logprobs_grad,
// token_entropy) check their operands, results and attributes by one
// set of rules on every backend, without reading an element. The CPU
// kernels then check every target on the host (runtime/cpu/Loss.cpp), the
// CUDA kernels on the device (runtime/cuda/Loss.cu).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_OPS_LOSSOPS_H
#define ZPLAN_RUNTIME_OPS_LOSSOPS_H

#include "runtime/ops/KernelCall.h"

#include <cstdint>

namespace zplan::ops {

/// The logits [..., V] seen as `rows` rows of `classes`, and the target
/// value that leaves a row out of the loss (attribute ignore_index, default
/// -100 as PyTorch's and Hugging Face's).
struct CrossEntropyRows {
  int64_t rows = 0, classes = 0, ignoreIndex = 0;
};

/// The type the loss ops compute in and return for logits of `logits`:
/// bf16 logits (mixed precision's LM head, docs/mixed-precision.md) are
/// widened exactly as they are read and computed in f32, as the f32 kernel
/// computes from an f32 cast of them; f32 and f64 compute in their own type.
ElementType lossComputeType(ElementType logits);

/// Checks cross_entropy(logits [..., V] f32|f64|bf16, targets [...]
/// i64|i32) -> loss [] (lossComputeType); reads `rows`. The "logits' type"
/// of the results below is lossComputeType's too.
Status readCrossEntropy(const KernelCall &call, CrossEntropyRows &rows);
/// Checks cross_entropy_grad(logits, targets, dloss []) -> dlogits
/// (logits' type and shape); reads `rows`.
Status readCrossEntropyGrad(const KernelCall &call, CrossEntropyRows &rows);

/// Checks token_logprobs(logits [..., V], targets [...]) -> logp [...]
/// (logits' type); reads `rows`.
Status readTokenLogprobs(const KernelCall &call, CrossEntropyRows &rows);
/// Checks token_logprobs_grad(logits, targets, dlogp [...]) -> dlogits
/// (logits' type and shape); reads `rows`.
Status readTokenLogprobsGrad(const KernelCall &call, CrossEntropyRows &rows);
/// Checks token_entropy(logits [..., V]) -> entropy [...] (logits' type);
/// reads `rows` (ignoreIndex unused).
Status readTokenEntropy(const KernelCall &call, CrossEntropyRows &rows);

} // namespace zplan::ops

#endif // ZPLAN_RUNTIME_OPS_LOSSOPS_H
