//===- Loss.cpp - cross_entropy and its gradient --------------------------===//
//
// The training loss of `zcc --mode train` (nn.cross_entropy and
// nn.cross_entropy_grad, dialects/nn/NNOps.td): the
// mean, over the positions whose target is not ignore_index, of
// logsumexp(logits row) - logits[target], and its gradient with respect to
// the logits. Both subtract the row's max before exp (taken in the logits'
// type, as the attention softmax does: an f32 row sixteen lanes at a time,
// VectorMath.h) and keep every sum in double, in a fixed order, rounded
// once: the loss is the same on every run and rank. Rows run on the kernel
// threads (Parallel.h); the loss's terms are summed after, in row order. Every
// target is checked before anything is written: a target outside [0, V) that is
// not ignore_index is an error naming the op, never a read outside the row. The
// other checks are the ops layer's (runtime/ops/LossOps.h), shared with the
// CUDA kernels. bf16 logits (mixed precision) are widened a row at a time and
// computed in f32.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/IndexingSupport.h"
#include "runtime/cpu/Parallel.h"
#include "runtime/cpu/VectorMath.h"
#include "runtime/ops/LossOps.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace zplan::cpu::detail {

namespace {

/// Every target in [0, V) or ignore_index, checked before anything is
/// written; `counted` is the number of rows not ignored.
Status countTargets(const KernelCall &call, const CrossEntropyRows &rows,
                    int64_t &counted) {
  const TensorRef &targets = call.operands[1];
  counted = 0;
  for (int64_t row = 0; row < rows.rows; ++row) {
    int64_t target = indexAt(targets, row);
    if (target == rows.ignoreIndex)
      continue;
    if (target < 0 || target >= rows.classes)
      return call.error(
          "target " + std::to_string(target) + " (element " +
          std::to_string(row) + " of the targets) is out of range for " +
          std::to_string(rows.classes) + " classes (ignore_index " +
          std::to_string(rows.ignoreIndex) + ")");
    ++counted;
  }
  return Status::success();
}

/// The row's maximum, in its own type (VectorMath's for f32).
template <typename T> T rowMaximum(const T *row, int64_t length) {
  if constexpr (std::is_same_v<T, float>) {
    return maxOf(row, length);
  } else {
    T maximum = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < length; ++i)
      maximum = std::max(maximum, row[i]);
    return maximum;
  }
}

/// x[i] = x[i] * factor + addend over the row, in double, rounded once.
template <typename T>
void scaleRow(T *x, int64_t length, double factor, double addend) {
  if constexpr (std::is_same_v<T, float>) {
    scaleInDouble(x, length, factor, addend);
  } else {
    for (int64_t i = 0; i < length; ++i)
      x[i] = static_cast<T>(static_cast<double>(x[i]) * factor + addend);
  }
}

/// sum(exp(x - maximum)) over the row, in double: the log-sum-exp of the
/// loss and the softmax denominator of its gradient. Each exp is taken in
/// the row's own type and, when `exps` is not null, kept there. f32 rows
/// (the usual case) go through VectorMath's exp, sixteen at a time, within
/// an ulp and summed in its fixed lanes; double rows through std::exp.
template <typename T>
double sumShiftedExp(const T *row, int64_t length, T maximum, T *exps) {
  if constexpr (std::is_same_v<T, float>) {
    return expShiftedSum(row, length, maximum, exps);
  } else {
    double sum = 0;
    for (int64_t i = 0; i < length; ++i) {
      T e = softmaxExp(row[i] - maximum);
      if (exps)
        exps[i] = e;
      sum += e;
    }
    return sum;
  }
}

/// fn(row, rowsOf) for each of `rows` rows of `classes` logits, the rows
/// split across the kernel threads (Parallel.h); rowsOf(row) reads the row
/// (widening a bf16 one into the chunk's own scratch).
template <typename T, typename Fn>
void forEachLogitRow(const TensorRef &logits, int64_t rows, int64_t classes,
                     Fn &&fn) {
  parallelFor(rows, grainFor(classes), [&](int64_t begin, int64_t end) {
    WidenedSlabs<T> rowsOf(logits, classes);
    for (int64_t row = begin; row < end; ++row)
      fn(row, rowsOf);
  });
}

} // namespace

/// cross_entropy(logits [..., V], targets [...]) -> loss [] (logits' type):
/// mean over rows whose target != ignore_index (attribute, default -100) of
/// logsumexp(row) - row[target]; 0 when every row is ignored. A target
/// outside [0, V) that is not ignore_index is an error.
Status runCrossEntropy(const KernelCall &call) {
  CrossEntropyRows shape;
  int64_t counted;
  if (Status status = readCrossEntropy(call, shape); !status.ok())
    return status;
  if (Status status = countTargets(call, shape, counted); !status.ok())
    return status;
  int64_t rows = shape.rows, classes = shape.classes,
          ignoreIndex = shape.ignoreIndex;
  const TensorRef &logits = call.operands[0], &targets = call.operands[1],
                  &loss = call.results[0];
  return dispatchFloatType(
      call, "logits", lossComputeType(logits.dtype), [&](auto tag) {
        using T = typename decltype(tag)::type;
        // Each row's term on the kernel threads, then the terms summed
        // one row after another: the same total at any thread count. The
        // caller's scratch only grows (no allocation in a steady state).
        thread_local std::vector<double> scratch;
        scratch.assign(static_cast<size_t>(rows), 0.0);
        double *terms = scratch.data();
        forEachLogitRow<T>(
            logits, rows, classes, [&](int64_t row, WidenedSlabs<T> &rowsOf) {
              int64_t target = indexAt(targets, row);
              if (target == ignoreIndex)
                return;
              const T *x = rowsOf(row);
              T maximum = rowMaximum(x, classes);
              double logSum =
                  std::log(sumShiftedExp<T>(x, classes, maximum, nullptr));
              terms[row] = static_cast<double>(maximum) + logSum -
                           static_cast<double>(x[target]);
            });
        double total = 0;
        for (int64_t row = 0; row < rows; ++row)
          if (indexAt(targets, row) != ignoreIndex)
            total += terms[row];
        *loss.as<T>() = static_cast<T>(
            counted == 0 ? 0.0 : total / static_cast<double>(counted));
        return Status::success();
      });
}

/// cross_entropy_grad(logits [..., V], targets [...], dloss []) -> dlogits
/// [..., V]: dloss * (softmax(row) - onehot(target)) / counted for rows
/// whose target != ignore_index, 0 for ignored rows (all of them 0 when
/// every row is ignored). Targets are checked as cross_entropy checks them.
Status runCrossEntropyGrad(const KernelCall &call) {
  CrossEntropyRows shape;
  int64_t counted;
  if (Status status = readCrossEntropyGrad(call, shape); !status.ok())
    return status;
  if (Status status = countTargets(call, shape, counted); !status.ok())
    return status;
  int64_t rows = shape.rows, classes = shape.classes,
          ignoreIndex = shape.ignoreIndex;
  const TensorRef &logits = call.operands[0], &targets = call.operands[1],
                  &dloss = call.operands[2], &dlogits = call.results[0];
  return dispatchFloatType(
      call, "logits", lossComputeType(logits.dtype), [&](auto tag) {
        using T = typename decltype(tag)::type;
        double scale = counted == 0 ? 0.0
                                    : static_cast<double>(*dloss.as<T>()) /
                                          static_cast<double>(counted);
        forEachLogitRow<T>(
            logits, rows, classes, [&](int64_t row, WidenedSlabs<T> &rowsOf) {
              T *dx = dlogits.as<T>() + row * classes;
              int64_t target = indexAt(targets, row);
              if (target == ignoreIndex) {
                std::fill(dx, dx + classes, T(0));
                return;
              }
              const T *x = rowsOf(row);
              // One exp per element: exp(x - max) parked in dx, then scaled
              // by dloss / (count * sum) and the target's one subtracted.
              double sum =
                  sumShiftedExp(x, classes, rowMaximum(x, classes), dx);
              // The target's one is subtracted before rounding: p - 1 near
              // p = 1 keeps its digits. (x - 0.0 is x + -0.0.)
              double factor = scale / sum;
              double targetExp = static_cast<double>(dx[target]);
              scaleRow(dx, classes, factor, -0.0);
              dx[target] = static_cast<T>(targetExp * factor - scale);
            });
        return Status::success();
      });
}

/// Every target in [0, V) or ignore_index, as countTargets checks them.
static Status checkTargets(const KernelCall &call,
                           const CrossEntropyRows &rows) {
  int64_t counted;
  return countTargets(call, rows, counted);
}

/// token_logprobs(logits [..., V], targets [...]) -> logp [...]: for each
/// row, logits[target] - logsumexp(row) (log_softmax at the target), 0 where
/// the target is ignore_index. Targets are checked as cross_entropy checks
/// them.
Status runTokenLogprobs(const KernelCall &call) {
  CrossEntropyRows shape;
  if (Status status = readTokenLogprobs(call, shape); !status.ok())
    return status;
  if (Status status = checkTargets(call, shape); !status.ok())
    return status;
  const TensorRef &logits = call.operands[0], &targets = call.operands[1],
                  &logp = call.results[0];
  return dispatchFloatType(
      call, "logits", lossComputeType(logits.dtype), [&](auto tag) {
        using T = typename decltype(tag)::type;
        int64_t classes = shape.classes;
        forEachLogitRow<T>(
            logits, shape.rows, classes,
            [&](int64_t row, WidenedSlabs<T> &rowsOf) {
              int64_t target = indexAt(targets, row);
              if (target == shape.ignoreIndex) {
                logp.as<T>()[row] = T(0);
                return;
              }
              const T *x = rowsOf(row);
              T maximum = rowMaximum(x, classes);
              double logSum =
                  std::log(sumShiftedExp<T>(x, classes, maximum, nullptr));
              logp.as<T>()[row] =
                  static_cast<T>(static_cast<double>(x[target]) -
                                 static_cast<double>(maximum) - logSum);
            });
        return Status::success();
      });
}

/// token_logprobs_grad(logits [..., V], targets [...], dlogp [...]) ->
/// dlogits [..., V]: dlogp[row] * (onehot(target) - softmax(row)), 0 for
/// rows whose target is ignore_index.
Status runTokenLogprobsGrad(const KernelCall &call) {
  CrossEntropyRows shape;
  if (Status status = readTokenLogprobsGrad(call, shape); !status.ok())
    return status;
  if (Status status = checkTargets(call, shape); !status.ok())
    return status;
  const TensorRef &logits = call.operands[0], &targets = call.operands[1],
                  &dlogp = call.operands[2], &dlogits = call.results[0];
  return dispatchFloatType(
      call, "logits", lossComputeType(logits.dtype), [&](auto tag) {
        using T = typename decltype(tag)::type;
        int64_t classes = shape.classes;
        forEachLogitRow<T>(
            logits, shape.rows, classes,
            [&](int64_t row, WidenedSlabs<T> &rowsOf) {
              T *dx = dlogits.as<T>() + row * classes;
              int64_t target = indexAt(targets, row);
              double scale = static_cast<double>(dlogp.as<T>()[row]);
              if (target == shape.ignoreIndex || scale == 0) {
                std::fill(dx, dx + classes, T(0));
                return;
              }
              const T *x = rowsOf(row);
              double sum =
                  sumShiftedExp(x, classes, rowMaximum(x, classes), dx);
              // As cross_entropy_grad: the one is added before rounding.
              double factor = -scale / sum;
              double targetExp = static_cast<double>(dx[target]);
              scaleRow(dx, classes, factor, 0.0);
              dx[target] = static_cast<T>(targetExp * factor + scale);
            });
        return Status::success();
      });
}

/// token_entropy(logits [..., V]) -> entropy [...]: -sum p log p of
/// softmax(row), computed as logsumexp(row) - sum p x (no log of a p that
/// underflowed to 0).
Status runTokenEntropy(const KernelCall &call) {
  CrossEntropyRows shape;
  if (Status status = readTokenEntropy(call, shape); !status.ok())
    return status;
  const TensorRef &logits = call.operands[0], &entropy = call.results[0];
  return dispatchFloatType(
      call, "logits", lossComputeType(logits.dtype), [&](auto tag) {
        using T = typename decltype(tag)::type;
        int64_t classes = shape.classes;
        forEachLogitRow<T>(
            logits, shape.rows, classes,
            [&](int64_t row, WidenedSlabs<T> &rowsOf) {
              const T *x = rowsOf(row);
              T maximum = rowMaximum(x, classes);
              thread_local std::vector<T> exps;
              exps.resize(static_cast<size_t>(classes));
              double sum = sumShiftedExp(x, classes, maximum, exps.data());
              double weighted = 0;
              for (int64_t i = 0; i < classes; ++i)
                weighted +=
                    static_cast<double>(exps[i]) *
                    (static_cast<double>(x[i]) - static_cast<double>(maximum));
              // H = log(sum e) - sum(e (x - max)) / sum e, e =
              // exp(x - max).
              entropy.as<T>()[row] =
                  static_cast<T>(std::log(sum) - weighted / sum);
            });
        return Status::success();
      });
}

} // namespace zplan::cpu::detail
