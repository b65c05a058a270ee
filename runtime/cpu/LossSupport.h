//===- LossSupport.h - what both backends' cross_entropy kernels read -----===//
//
// cross_entropy and cross_entropy_grad check their operands, results and
// attributes by one set of rules on every backend, without reading an
// element: the CPU kernels (Loss.cpp) then check every target on the host,
// the CUDA kernels (runtime/cuda/Loss.cu) on the device. Defined in
// Loss.cpp; private to the kernels.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_LOSSSUPPORT_H
#define ZPLAN_RUNTIME_CPU_LOSSSUPPORT_H

#include "runtime/cpu/KernelSupport.h"

namespace zplan::cpu::detail {

/// The logits [..., V] seen as `rows` rows of `classes`, and the target
/// value that leaves a row out of the loss (attribute ignore_index, default
/// -100 as PyTorch's and Hugging Face's).
struct CrossEntropyRows {
  int64_t rows = 0, classes = 0, ignoreIndex = 0;
};

/// Checks cross_entropy(logits [..., V] f32|f64, targets [...] i64|i32) ->
/// loss [] (logits' type); reads `rows`.
Status readCrossEntropy(const KernelCall &call, CrossEntropyRows &rows);
/// Checks cross_entropy_grad(logits, targets, dloss []) -> dlogits
/// (logits' type and shape); reads `rows`.
Status readCrossEntropyGrad(const KernelCall &call, CrossEntropyRows &rows);

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_LOSSSUPPORT_H
