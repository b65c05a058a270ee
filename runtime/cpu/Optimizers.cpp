//===- Optimizers.cpp - adamw and sgd, in place ---------------------------===//
//
// The optimizer updates of the optimizer_step program: one instruction per
// parameter group, over its shard (or its whole persistent buffer) and the
// group's STATE buffers. They have no results: the parameter and the
// optimizer state are updated in place, and the accumulated gradient is set
// to zero for the next step's micro-steps. The hyper-parameters come in an
// f32[8] tensor zrun writes each step (runtime/train/OptimizerHyper.h: lr,
// beta1 or momentum, beta2, eps, weight_decay, grad_scale, 1 - beta1^t,
// 1 - beta2^t). Each element is updated on its own, in double, with
// torch.optim's formulas and order, and rounded once to f32: the same on
// every run and rank, and at any thread count (the elements are split
// across the kernel threads, Parallel.h). The checks and the element updates
// are the ops layer's (runtime/ops/OptimizerOps.h), shared with the CUDA
// kernels.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"
#include "runtime/ops/OptimizerOps.h"

#include <algorithm>
#include <cmath>

namespace zplan::cpu::detail {

/// adamw(param, grad, m, v, hyper f32[8]) -> (): torch.optim.AdamW
/// (foreach=False) on each element, g = grad * grad_scale:
///   p *= 1 - lr * wd; m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
///   p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps); grad = 0.
/// param, grad, m, v: f32 of one shape, updated in place. bc1 and bc2 must
/// be in (0, 1] (t >= 1).
namespace {

/// adamwUpdate over `count` elements. The update is computed in double;
/// the default x86-64 target (SSE2) runs its sqrt and divide two lanes at a
/// time, so the loop is also compiled for AVX2 and AVX-512 and the loader
/// picks the widest the CPU has (GCC's target_clones). Each lane computes
/// exactly what the scalar code does: the result is the same on every path.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
void adamwLoop(const AdamWStep &step, float *param, const float *grad,
               float *m, float *v, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    adamwUpdate(step, param[i], grad[i], m[i], v[i]);
}

} // namespace

Status runAdamW(const KernelCall &call) {
  if (Status status = checkOptimizerOperands(call, {"param", "grad", "m", "v"});
      !status.ok())
    return status;
  const float *hyper = call.operands[4].as<float>();
  AdamWStep step = adamwStep(hyper);
  if (!step.valid)
    return call.error(
        "hyper bias corrections [" +
        std::to_string(plan::HYPER_BIAS_CORRECTION1) +
        "] = " + std::to_string(hyper[plan::HYPER_BIAS_CORRECTION1]) +
        " and [" + std::to_string(plan::HYPER_BIAS_CORRECTION2) +
        "] = " + std::to_string(hyper[plan::HYPER_BIAS_CORRECTION2]) +
        " must be in (0, 1] (1 - beta^t, t >= 1)");
  float *param = call.operands[0].as<float>(),
        *grad = call.operands[1].as<float>(), *m = call.operands[2].as<float>(),
        *v = call.operands[3].as<float>();
  int64_t count = call.operands[0].numElements();
  parallelFor(count, grainFor(4), [&](int64_t begin, int64_t end) {
    adamwLoop(step, param + begin, grad + begin, m + begin, v + begin,
              end - begin);
    std::fill(grad + begin, grad + end, 0.0f);
  });
  return Status::success();
}

/// sgd(param, grad, momentum_buffer, hyper f32[8]) -> (): torch.optim.SGD
/// (dampening 0, no nesterov) on each element:
///   g = grad * grad_scale + wd * p; if momentum != 0 { buf = momentum buf
///   + g; g = buf }; p -= lr g; grad = 0.
/// The buffer starts at zero (a STATE buffer), so the first step's buf is
/// g, as torch's. param, grad, momentum_buffer: f32 of one shape, in place.
Status runSgd(const KernelCall &call) {
  if (Status status =
          checkOptimizerOperands(call, {"param", "grad", "momentum_buffer"});
      !status.ok())
    return status;
  SgdStep step = sgdStep(call.operands[3].as<float>());
  float *param = call.operands[0].as<float>(),
        *grad = call.operands[1].as<float>(),
        *buffer = call.operands[2].as<float>();
  int64_t count = call.operands[0].numElements();
  parallelFor(count, grainFor(2), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      sgdUpdate(step, param[i], grad[i], buffer[i]);
    std::fill(grad + begin, grad + end, 0.0f);
  });
  return Status::success();
}

} // namespace zplan::cpu::detail
