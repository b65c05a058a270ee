//===- Sampler.cpp - the next token of each row, from its logits ----------===//

#include "runtime/generate/Sampler.h"

#include "runtime/train/BatchSampler.h"

#include <algorithm>
#include <cmath>

using namespace zplan;
using namespace zplan::generate;

namespace {

Status nanAt(uint64_t index) { return failure("logit ", index, " is NaN"); }

} // namespace

Status zplan::generate::argmax(const float *logits, uint64_t count,
                               int64_t &token) {
  uint64_t best = 0;
  for (uint64_t i = 0; i < count; ++i) {
    if (std::isnan(logits[i]))
      return nanAt(i);
    // Strictly greater: the lowest id wins a tie.
    if (logits[i] > logits[best])
      best = i;
  }
  token = static_cast<int64_t>(best);
  return Status::success();
}

double zplan::generate::uniformDraw(uint64_t seed, uint64_t row,
                                    uint64_t step) {
  uint64_t rowKey =
      train::splitmix64(seed ^ (0x9E3779B97F4A7C15ull * (row + 1)));
  // The top 53 bits: every double in [0, 1) with this spacing, never 1.
  return static_cast<double>(train::splitmix64(rowKey + step) >> 11) *
         0x1.0p-53;
}

Status Sampler::next(const float *logits, uint64_t vocabulary, uint64_t row,
                     uint64_t step, int64_t &token) {
  if (settings.temperature == 0.0 || vocabulary <= 1)
    return argmax(logits, vocabulary, token);

  candidates.clear();
  for (uint64_t i = 0; i < vocabulary; ++i) {
    if (std::isnan(logits[i]))
      return nanAt(i);
    candidates.emplace_back(logits[i], static_cast<int64_t>(i));
  }
  // Larger logit first; among equal logits the lower id, as greedy.
  auto before = [](const std::pair<float, int64_t> &a,
                   const std::pair<float, int64_t> &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  uint64_t kept = vocabulary;
  if (settings.topK > 0 && settings.topK < vocabulary) {
    kept = settings.topK;
    std::partial_sort(candidates.begin(), candidates.begin() + kept,
                      candidates.end(), before);
    candidates.resize(kept);
  } else {
    std::sort(candidates.begin(), candidates.end(), before);
  }
  if (candidates.front().first == -INFINITY) {
    // Nothing has any probability: the lowest id, as greedy would choose.
    token = 0;
    return Status::success();
  }

  // softmax(logits / T), unnormalised, in double; sorted descending.
  double top = candidates.front().first;
  weights.resize(kept);
  double total = 0;
  for (uint64_t i = 0; i < kept; ++i) {
    weights[i] = std::exp((candidates[i].first - top) / settings.temperature);
    total += weights[i];
  }
  if (settings.topP < 1.0) {
    double running = 0;
    uint64_t nucleus = kept;
    for (uint64_t i = 0; i < kept; ++i) {
      running += weights[i];
      if (running >= settings.topP * total) {
        nucleus = i + 1;
        break;
      }
    }
    kept = nucleus;
    total = running;
  }
  double threshold = uniformDraw(settings.seed, row, step) * total;
  double running = 0;
  for (uint64_t i = 0; i < kept; ++i) {
    running += weights[i];
    if (running > threshold) {
      token = candidates[i].second;
      return Status::success();
    }
  }
  // Rounding left the running sum at or below the threshold: the last kept.
  token = candidates[kept - 1].second;
  return Status::success();
}
