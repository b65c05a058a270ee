//===- RowSampler.h - which rows of a row file each rank reads at a step --===//
//
// Rows (RowData.h) are read in epochs, as a DataLoader with drop_last reads
// them. One optimizer step reads a global batch of G = K*N*B rows (K
// micro-steps, N ranks, B rows per micro-batch); an epoch is E = R / G
// steps (R rows, integer division), and the R - E*G rows left over at the
// end of an epoch's order are not read in that epoch (a last partial batch
// is dropped). With fewer than G rows there is no step at all, which
// checkRowsFit() refuses. The formula, which the Python test oracle
// (test/train/batches.py) re-implements, is exactly:
//
//   epoch e = s / E, position p = s % E for optimizer step s (0-based);
//   global row q in [0, G) of step s is file row order_e[p*G + q];
//   micro-step k on rank r takes q in [(k*N + r)*B, (k*N + r + 1)*B), in
//   that order, as BatchSampler.h splits a token stream's rows.
//
//   order_e is 0, 1, ..., R-1 (the file's order), and with --shuffle a
//   permutation that depends on the seed and e only (the same on every
//   rank): starting from the file's order, Fisher-Yates from the end with
//   splitmix64 (BatchSampler.h) as the generator,
//     key = splitmix64(seed ^ (0x9E3779B97F4A7C15 * (e + 1)))
//     for i = R-1 down to 1:
//       j = splitmix64(key + i) % (i + 1); swap(order[i], order[j])
//   (all arithmetic modulo 2^64; the modulo's bias is below R / 2^64).
//
// So the rows of step s do not depend on how G is split into K, N and B,
// and each rank reads only its own B rows per micro-step.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_ROWSAMPLER_H
#define ZPLAN_RUNTIME_TRAIN_ROWSAMPLER_H

#include "runtime/support/Status.h"
#include "runtime/train/BatchSampler.h"

#include <cstdint>
#include <vector>

namespace zplan::train {

class RowData;

/// Fails unless `data` fits `shape`: rows of shape.rowTokens tokens (the
/// plan's input_ids [B, T]), and at least one global batch (K*N*B rows).
/// The messages name the file and both shapes.
Status checkRowsFit(const RowData &data, const BatchShape &shape);

class RowSampler {
public:
  /// `numRows` is R; it must be at least shape's K*N*B (checkRowsFit).
  RowSampler(uint64_t seed, bool shuffle, uint64_t numRows, BatchShape shape);

  /// G = K*N*B: the rows of one optimizer step.
  uint64_t globalRows() const;
  /// E = R / G: optimizer steps per epoch.
  uint64_t stepsPerEpoch() const;
  /// R - E*G: the rows an epoch does not read.
  uint64_t droppedPerEpoch() const;

  /// order_e: the file rows of epoch `epoch`, in reading order.
  std::vector<uint64_t> epochOrder(uint64_t epoch) const;

  /// The file rows micro-step `micro` of rank `rank` reads at optimizer step
  /// `step` (0-based), in batch order.
  std::vector<uint64_t> rowsFor(uint64_t step, uint64_t micro, uint64_t rank);

  /// Fills `ids` (and, when `data` has labels, `labels`), int64 [B, T]
  /// buffers, with the rows of rowsFor(step, micro, rank). Fails for a
  /// micro-step or rank outside the shape, or when `data` refuses a value.
  Status fill(const RowData &data, uint64_t step, uint64_t micro, uint64_t rank,
              int64_t *ids, int64_t *labels);

private:
  uint64_t seed;
  bool shuffle;
  uint64_t numRows;
  BatchShape shape;
  /// The last epoch's order when shuffling (steps go forward, so one epoch
  /// is kept).
  uint64_t orderEpoch = UINT64_MAX;
  std::vector<uint64_t> order;
};

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_ROWSAMPLER_H
