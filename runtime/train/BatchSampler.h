//===- BatchSampler.h - which token rows each rank reads at each step ----===//
//
// Batch selection is a pure function of the seed, the step and the row
// number (the formula below), so that it does not depend on the number of ranks
// N or of micro-steps K: K = 2 micro-steps of B = 2 rows read the rows that K =
// 1 of B = 4 reads, and N = 1 with B = 4 what N = 2 with B = 2 read. The
// formula, which the Python test oracle re-implements, is exactly:
//
//   splitmix64(x), the output of Vigna's SplitMix64 (Java's
//   SplittableRandom) for state x; all arithmetic modulo 2^64:
//     z = x + 0x9E3779B97F4A7C15
//     z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9
//     z = (z ^ (z >> 27)) * 0x94D049BB133111EB
//     return z ^ (z >> 31)
//
//   stepKey(s)   = splitmix64(seed ^ (0x9E3779B97F4A7C15 * (s + 1)))
//   offset(s, q) = splitmix64(stepKey(s) + q) % (numTokens - T)
//
// for optimizer step s (0-based) and row q in [0, K*N*B). Row q holds tokens
// [offset, offset + T). Micro-step k (0-based) on rank r takes rows
// q in [(k*N + r)*B, (k*N + r + 1)*B), in that order. The multiplication
// binds tighter than the xor, as in C and Python.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_BATCHSAMPLER_H
#define ZPLAN_RUNTIME_TRAIN_BATCHSAMPLER_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <vector>

namespace zplan::train {

class TokenData;

/// SplitMix64's output for state `x` (the formula above); the one
/// implementation every part of zrun uses.
constexpr uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct BatchShape {
  /// Rows per micro-step per rank (input_ids' first dimension).
  uint64_t rows = 1;
  /// Tokens per row (input_ids' second dimension).
  uint64_t rowTokens = 1;
  /// Ranks (N) and micro-steps per optimizer step (K).
  uint64_t ranks = 1;
  uint64_t microSteps = 1;
};

class BatchSampler {
public:
  /// `numTokens` is the token file's size; it must exceed shape.rowTokens
  /// (TokenData::open checks that).
  BatchSampler(uint64_t seed, uint64_t numTokens, BatchShape shape)
      : seed(seed), numTokens(numTokens), shape(shape) {}

  /// The token offset of row `row` of optimizer step `step` (0-based).
  uint64_t rowOffset(uint64_t step, uint64_t row) const;

  /// The offsets of the B rows micro-step `micro` of rank `rank` reads at
  /// optimizer step `step`, in batch order.
  std::vector<uint64_t> rowsFor(uint64_t step, uint64_t micro,
                                uint64_t rank) const;

  /// Fills `batch`, an int64 [B, T] buffer (B * T elements), with the rows
  /// of rowsFor(step, micro, rank) read from `data`. Fails for a micro-step
  /// or rank outside the shape, or when `data` refuses a token.
  Status fill(const TokenData &data, uint64_t step, uint64_t micro,
              uint64_t rank, int64_t *batch) const;

private:
  uint64_t seed;
  uint64_t numTokens;
  BatchShape shape;
};

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_BATCHSAMPLER_H
