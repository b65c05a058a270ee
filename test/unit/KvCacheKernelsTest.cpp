//===- KvCacheKernelsTest.cpp - cache_append and cached_attention ---------===//
//
// The two kernels of generation's static KV cache (runtime/cpu/KvCache.cpp)
// run through runKernel, as the executor calls them, against references
// written here as plain loops in double. Positions differ per row and reach
// both ends of the cache (0 and L-1); the slots a query may not see are
// filled with NaN, so a kernel that reads them at all shows it in its
// result. The error paths name the position, its row and the cache size.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"

#include "test/unit/KernelTestSupport.h"
#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace zplan;
using namespace zplan::testing;

namespace {

std::mt19937 &rng() {
  static std::mt19937 generator(9009);
  return generator;
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// A cache [B, H, L, D] whose every element is NaN: nothing written yet.
Tensor poisonedCache(std::vector<int64_t> shape) {
  Tensor cache(std::move(shape));
  for (int64_t i = 0; i < cache.size(); ++i)
    cache.floats()[i] = kNaN;
  return cache;
}

//===----------------------------------------------------------------------===//
// cache_append
//===----------------------------------------------------------------------===//

TEST(KvCacheKernels, CacheAppendWritesEachRowAtItsPositions) {
  // B = 3 rows, H = 2, L = 6 slots, D = 4; two new tokens per row, at
  // positions that differ per row and touch both ends of the cache.
  const int64_t batch = 3, heads = 2, slots = 6, width = 4, sequence = 2;
  Tensor cache = poisonedCache({batch, heads, slots, width});
  Tensor entries = randomFloats(rng(), {batch, heads, sequence, width});
  const std::vector<int64_t> where = {0, 1, 4, 5, 2, 3};
  Tensor positions = make<int64_t>({batch, sequence}, where);
  runOk(Op("cache_append"), {&cache, &entries, &positions}, cache);

  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t slot = 0; slot < slots; ++slot) {
        int64_t source = -1;
        for (int64_t s = 0; s < sequence; ++s)
          if (where[b * sequence + s] == slot)
            source = s;
        for (int64_t d = 0; d < width; ++d) {
          float got =
              cache.floats()[((b * heads + h) * slots + slot) * width + d];
          if (source < 0)
            EXPECT_TRUE(std::isnan(got))
                << "slot " << slot << " of row " << b << " was written";
          else
            EXPECT_EQ(
                got,
                entries.floats()[((b * heads + h) * sequence + source) * width +
                                 d])
                << "row " << b << " head " << h << " slot " << slot;
        }
      }
}

TEST(KvCacheKernels, CacheAppendTakesI32PositionsAndKeepsEarlierSlots) {
  // A decode step after a prefill: one token per row at its own position;
  // what the earlier append wrote stays.
  Tensor cache = poisonedCache({2, 1, 4, 3});
  Tensor first = randomFloats(rng(), {2, 1, 1, 3});
  Tensor second = randomFloats(rng(), {2, 1, 1, 3});
  Tensor at0 = make<int32_t>({2, 1}, {0, 3});
  Tensor at1 = make<int32_t>({2, 1}, {1, 2});
  runOk(Op("cache_append"), {&cache, &first, &at0}, cache);
  runOk(Op("cache_append"), {&cache, &second, &at1}, cache);
  const float *c = cache.floats();
  for (int64_t d = 0; d < 3; ++d) {
    EXPECT_EQ(c[0 * 3 + d], first.floats()[d]);
    EXPECT_EQ(c[1 * 3 + d], second.floats()[d]);
    EXPECT_TRUE(std::isnan(c[2 * 3 + d]));
    EXPECT_EQ(c[4 * 3 + 3 * 3 + d], first.floats()[3 + d]);
    EXPECT_EQ(c[4 * 3 + 2 * 3 + d], second.floats()[3 + d]);
    EXPECT_TRUE(std::isnan(c[4 * 3 + 0 * 3 + d]));
  }
}

TEST(KvCacheKernels, CacheAppendRefusesPositionsOutsideTheCache) {
  Tensor cache({2, 1, 4, 2});
  Tensor entries = randomFloats(rng(), {2, 1, 1, 2});
  Tensor past = make<int64_t>({2, 1}, {1, 4});
  EXPECT_TRUE(contains(
      runError(Op("cache_append"), {&cache, &entries, &past}, cache),
      "cache_append: position 4 of row 1, token 0 is outside the cache's 4 "
      "slots [0, 4)"));
  Tensor negative = make<int64_t>({2, 1}, {-1, 0});
  EXPECT_TRUE(contains(
      runError(Op("cache_append"), {&cache, &entries, &negative}, cache),
      "position -1 of row 0"));
  // Nothing was written before the refusal.
  for (float value : cache.values<float>())
    EXPECT_EQ(value, 0.0f);
}

TEST(KvCacheKernels, CacheAppendErrors) {
  Tensor cache({2, 1, 4, 2});
  Tensor entries = randomFloats(rng(), {2, 1, 1, 2});
  Tensor positions = make<int64_t>({2, 1}, {0, 0});
  Tensor elsewhere({2, 1, 4, 2});
  EXPECT_TRUE(contains(
      runError(Op("cache_append"), {&cache, &entries, &positions}, elsewhere),
      "cache_append: the result is not the cache itself"));
  Tensor wrongWidth = randomFloats(rng(), {2, 1, 1, 3});
  EXPECT_TRUE(contains(
      runError(Op("cache_append"), {&cache, &wrongWidth, &positions}, cache),
      "cache_append: new has shape [2, 1, 1, 3], expected [2, 1, 1, 2]"));
  Tensor rowsMissing = make<int64_t>({1, 1}, {0});
  EXPECT_TRUE(contains(
      runError(Op("cache_append"), {&cache, &entries, &rowsMissing}, cache),
      "cache_append: positions has shape [1, 1], expected [2, 1]"));
  Tensor floatPositions({2, 1});
  EXPECT_TRUE(contains(
      runError(Op("cache_append"), {&cache, &entries, &floatPositions}, cache),
      "positions"));
}

//===----------------------------------------------------------------------===//
// cached_attention
//===----------------------------------------------------------------------===//

/// softmax(q k^T * scale) v per (b, h, s) over slots 0..positions[b, s]
/// only, in double.
std::vector<double> cachedAttentionReference(Tensor &q, Tensor &k, Tensor &v,
                                             const std::vector<int64_t> &where,
                                             double scale) {
  int64_t batch = q.shape[0], heads = q.shape[1], sequence = q.shape[2],
          width = q.shape[3], slots = k.shape[2], valueWidth = v.shape[3];
  std::vector<double> out;
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t s = 0; s < sequence; ++s) {
        int64_t visible = where[b * sequence + s] + 1;
        std::vector<double> row(visible);
        double maximum = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < width; ++d)
            dot +=
                double(
                    q.floats()[((b * heads + h) * sequence + s) * width + d]) *
                k.floats()[((b * heads + h) * slots + j) * width + d];
          row[j] = dot * scale;
          maximum = std::max(maximum, row[j]);
        }
        double sum = 0;
        for (double &value : row)
          sum += value = std::exp(value - maximum);
        for (int64_t c = 0; c < valueWidth; ++c) {
          double acc = 0;
          for (int64_t j = 0; j < visible; ++j)
            acc += row[j] / sum *
                   v.floats()[((b * heads + h) * slots + j) * valueWidth + c];
          out.push_back(acc);
        }
      }
  return out;
}

/// Random keys and values in the slots some query may see, NaN in the rest
/// (past every row's largest position).
void fillVisible(Tensor &cache, const std::vector<int64_t> &where,
                 int64_t sequence) {
  int64_t batch = cache.shape[0], heads = cache.shape[1],
          slots = cache.shape[2], width = cache.shape[3];
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t last = 0;
    for (int64_t s = 0; s < sequence; ++s)
      last = std::max(last, where[b * sequence + s]);
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t slot = 0; slot < slots; ++slot)
        for (int64_t d = 0; d < width; ++d)
          cache.floats()[((b * heads + h) * slots + slot) * width + d] =
              slot <= last ? dist(rng()) : kNaN;
  }
}

void expectClose(const std::vector<float> &actual,
                 const std::vector<double> &expected) {
  ASSERT_EQ(actual.size(), expected.size());
  int failures = 0;
  for (size_t i = 0; i < actual.size() && failures < 5; ++i) {
    double error = std::abs(double(actual[i]) - expected[i]);
    if (!(error <= 1e-5 * std::abs(expected[i]) + 1e-6)) {
      ADD_FAILURE() << "element " << i << ": got " << actual[i] << ", expected "
                    << expected[i];
      ++failures;
    }
  }
}

TEST(KvCacheKernels, CachedAttentionDecodeSeesOnlyItsPrefix) {
  // Decode: one query per row, rows at positions 0, L-1 and between; the
  // slots past each row's position are NaN and must not be read.
  const int64_t slots = 9;
  std::vector<int64_t> where = {0, slots - 1, 4};
  Tensor q = randomFloats(rng(), {3, 2, 1, 8});
  Tensor k = poisonedCache({3, 2, slots, 8}),
         v = poisonedCache({3, 2, slots, 5});
  fillVisible(k, where, 1);
  fillVisible(v, where, 1);
  Tensor positions = make<int64_t>({3, 1}, where);
  Tensor y({3, 2, 1, 5});
  runOk(Op("cached_attention").real("scale", 0.3), {&q, &k, &v, &positions}, y);
  expectClose(y.values<float>(), cachedAttentionReference(q, k, v, where, 0.3));
  // At position 0 a query sees one slot: the result is that slot's value.
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t c = 0; c < 5; ++c)
      EXPECT_FLOAT_EQ(y.floats()[h * 5 + c], v.floats()[h * slots * 5 + c]);
}

TEST(KvCacheKernels, CachedAttentionPrefillIsCausalPerRow) {
  // Prefill: S = 5 queries per row at positions s (right-padded prompts
  // included), i32 positions: causal within the prompt, and the cache's
  // slots past the prompt (NaN) are never read.
  const int64_t sequence = 5, slots = 12, heads = 3, width = 4;
  std::vector<int64_t> where;
  std::vector<int32_t> where32;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t s = 0; s < sequence; ++s) {
      where.push_back(s);
      where32.push_back(static_cast<int32_t>(s));
    }
  Tensor q = randomFloats(rng(), {2, heads, sequence, width});
  Tensor k = poisonedCache({2, heads, slots, width}),
         v = poisonedCache({2, heads, slots, width});
  fillVisible(k, where, sequence);
  fillVisible(v, where, sequence);
  Tensor positions = make<int32_t>({2, sequence}, where32);
  Tensor y({2, heads, sequence, width});
  runOk(Op("cached_attention").real("scale", 0.5), {&q, &k, &v, &positions}, y);
  expectClose(y.values<float>(), cachedAttentionReference(q, k, v, where, 0.5));
  for (float value : y.values<float>())
    ASSERT_TRUE(std::isfinite(value));
}

TEST(KvCacheKernels, CachedAttentionDifferentPositionsPerQuery) {
  // Several queries per row at unrelated positions (a row resumed after
  // others): each sees its own prefix.
  std::vector<int64_t> where = {3, 0, 6, 6, 1, 2};
  Tensor q = randomFloats(rng(), {2, 2, 3, 4});
  Tensor k = poisonedCache({2, 2, 7, 4}), v = poisonedCache({2, 2, 7, 2});
  fillVisible(k, where, 3);
  fillVisible(v, where, 3);
  Tensor positions = make<int64_t>({2, 3}, where);
  Tensor y({2, 2, 3, 2});
  runOk(Op("cached_attention").real("scale", 1.0), {&q, &k, &v, &positions}, y);
  expectClose(y.values<float>(), cachedAttentionReference(q, k, v, where, 1.0));
}

TEST(KvCacheKernels, CachedAttentionErrors) {
  Tensor q = randomFloats(rng(), {2, 1, 1, 4});
  Tensor k = randomFloats(rng(), {2, 1, 6, 4}),
         v = randomFloats(rng(), {2, 1, 6, 4});
  Tensor y({2, 1, 1, 4});
  Tensor past = make<int64_t>({2, 1}, {2, 6});
  EXPECT_TRUE(contains(
      runError(Op("cached_attention").real("scale", 1), {&q, &k, &v, &past}, y),
      "cached_attention: position 6 of row 1, token 0 is outside the cache's "
      "6 slots [0, 6)"));
  Tensor positions = make<int64_t>({2, 1}, {0, 1});
  EXPECT_TRUE(
      contains(runError(Op("cached_attention"), {&q, &k, &v, &positions}, y),
               "cached_attention: missing attribute 'scale'"));
  Tensor shortKeys = randomFloats(rng(), {2, 1, 5, 4});
  EXPECT_TRUE(contains(runError(Op("cached_attention").real("scale", 1),
                                {&q, &shortKeys, &v, &positions}, y),
                       "cached_attention: value has shape [2, 1, 6, 4], "
                       "expected [2, 1, 5, 4]"));
  Tensor flat = randomFloats(rng(), {2, 4});
  EXPECT_TRUE(contains(runError(Op("cached_attention").real("scale", 1),
                                {&flat, &k, &v, &positions}, y),
                       "cached_attention: query has shape [2, 4], expected "
                       "rank 4"));
}

} // namespace
