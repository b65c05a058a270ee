//===- Sampler.h - the next token of each row, from its logits ------------===//
//
// Greedy decoding (temperature 0) takes the argmax of a row's logits, the
// lowest token id among equal maxima, as numpy.argmax does. Sampling
// (temperature T > 0) applies, in this order:
//   1. top-k: keep the K largest logits (ties: lower ids first; K = 0 or
//      K >= V keeps all);
//   2. p = softmax(logits / T) over the kept ids, in double;
//   3. top-p (nucleus): keep the shortest prefix of the kept ids, by
//      decreasing probability, whose probabilities sum to at least P (never
//      fewer than one id; P = 1 keeps all);
//   4. draw u in [0, 1) and take the first id of that prefix at which the
//      running sum of its probabilities exceeds u times their total.
//
// The draws are a pure function of (seed, row, step), so that a run gives
// the same tokens on every rank, for any number of ranks, and a row's tokens
// do not depend on the other rows of the batch:
//
//   rowKey(row)     = splitmix64(seed ^ (0x9E3779B97F4A7C15 * (row + 1)))
//   u(row, step)    = (splitmix64(rowKey(row) + step) >> 11) * 2^-53
//
// with splitmix64 the one of runtime/train/BatchSampler.h (the same
// construction BatchSampler uses for (seed, step, row)). `step` is the
// generation step: 0 for the token after the prompt.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_GENERATE_SAMPLER_H
#define ZPLAN_RUNTIME_GENERATE_SAMPLER_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace zplan::generate {

struct SamplingSettings {
  /// 0: greedy. Above 0: the softmax's temperature.
  double temperature = 0.0;
  /// 0: no top-k filter.
  uint64_t topK = 0;
  /// 1: no nucleus filter; in (0, 1].
  double topP = 1.0;
  uint64_t seed = 0;
};

/// The index of the largest of `count` logits, the lowest among equal
/// maxima; fails on a NaN (which no maximum can be taken over), naming it.
Status argmax(const float *logits, uint64_t count, int64_t &token);

/// The uniform draw in [0, 1) for (seed, row, step) (the file comment's u).
double uniformDraw(uint64_t seed, uint64_t row, uint64_t step);

class Sampler {
public:
  explicit Sampler(SamplingSettings settings) : settings(settings) {}

  /// The token for row `row` at generation step `step` from its
  /// `vocabulary` logits. Fails on a NaN logit, naming its id; a row whose
  /// logits are all -inf gets the lowest id.
  Status next(const float *logits, uint64_t vocabulary, uint64_t row,
              uint64_t step, int64_t &token);

  const SamplingSettings &samplingSettings() const { return settings; }

private:
  SamplingSettings settings;
  /// Scratch: (logit, id) of the candidates, reused across calls.
  std::vector<std::pair<float, int64_t>> candidates;
  std::vector<double> weights;
};

} // namespace zplan::generate

#endif // ZPLAN_RUNTIME_GENERATE_SAMPLER_H
