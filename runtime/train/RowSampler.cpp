//===- RowSampler.cpp - which rows of a row file each rank reads at a step ===//

#include "runtime/train/RowSampler.h"

#include "runtime/support/ShapeText.h"
#include "runtime/train/RowData.h"

#include <algorithm>
#include <numeric>
#include <utility>

using namespace zplan;
using namespace zplan::train;

Status zplan::train::checkRowsFit(const RowData &data,
                                  const BatchShape &shape) {
  std::string program = "program 'train_micro_step' takes input_ids " +
                        shapeText({static_cast<int64_t>(shape.rows),
                                   static_cast<int64_t>(shape.rowTokens)});
  if (data.rowTokens() != shape.rowTokens)
    return failure(data.subject(), " is ", data.shapeAndType(), ", but ",
                   program, ": its rows must hold ", shape.rowTokens,
                   " tokens");
  uint64_t global = shape.rows * shape.ranks * shape.microSteps;
  if (data.rows() < global)
    return failure(data.subject(), " holds ", data.rows(), " rows (",
                   data.shapeAndType(), "); one optimizer step reads ", global,
                   " (", shape.ranks, " ranks x ", shape.microSteps,
                   " micro-steps x ", shape.rows, " rows; ", program, ")");
  return Status::success();
}

RowSampler::RowSampler(uint64_t seed, bool shuffle, uint64_t numRows,
                       BatchShape shape)
    : seed(seed), shuffle(shuffle), numRows(numRows), shape(shape) {}

uint64_t RowSampler::globalRows() const {
  return shape.rows * shape.ranks * shape.microSteps;
}

uint64_t RowSampler::stepsPerEpoch() const {
  // checkRowsFit guarantees R >= G > 0; the guard keeps a misuse from
  // dividing by zero.
  uint64_t global = globalRows();
  return global && numRows >= global ? numRows / global : 1;
}

uint64_t RowSampler::droppedPerEpoch() const {
  return numRows - std::min(numRows, stepsPerEpoch() * globalRows());
}

std::vector<uint64_t> RowSampler::epochOrder(uint64_t epoch) const {
  std::vector<uint64_t> result(numRows);
  std::iota(result.begin(), result.end(), 0);
  if (!shuffle)
    return result;
  uint64_t key = splitmix64(seed ^ (0x9E3779B97F4A7C15ull * (epoch + 1)));
  for (uint64_t i = numRows; i-- > 1;) {
    uint64_t j = splitmix64(key + i) % (i + 1);
    std::swap(result[i], result[j]);
  }
  return result;
}

std::vector<uint64_t> RowSampler::rowsFor(uint64_t step, uint64_t micro,
                                          uint64_t rank) {
  uint64_t epoch = step / stepsPerEpoch();
  uint64_t first = (step % stepsPerEpoch()) * globalRows() +
                   (micro * shape.ranks + rank) * shape.rows;
  if (shuffle && orderEpoch != epoch) {
    order = epochOrder(epoch);
    orderEpoch = epoch;
  }
  std::vector<uint64_t> rows;
  rows.reserve(shape.rows);
  for (uint64_t position = first; position < first + shape.rows; ++position)
    rows.push_back(shuffle ? order[position] : position);
  return rows;
}

Status RowSampler::fill(const RowData &data, uint64_t step, uint64_t micro,
                        uint64_t rank, int64_t *ids, int64_t *labels) {
  if (micro >= shape.microSteps)
    return failure("micro-step ", micro, " is outside the ", shape.microSteps,
                   " micro-steps of an optimizer step");
  if (rank >= shape.ranks)
    return failure("rank ", rank, " is outside the ", shape.ranks, " ranks");
  if (data.rows() != numRows || data.rowTokens() != shape.rowTokens ||
      numRows < globalRows())
    return failure(data.subject(), " is ", data.shapeAndType(),
                   "; the sampler was made for ", numRows, " rows of ",
                   shape.rowTokens, " tokens and ", globalRows(),
                   " rows per step");
  if (data.hasLabels() && !labels)
    return failure("the rows of ", data.subject(),
                   " have labels, but no buffer was given for them");
  std::vector<uint64_t> rows = rowsFor(step, micro, rank);
  for (uint64_t row = 0; row < rows.size(); ++row)
    ZR_RETURN_IF_ERROR(data.readRow(
        rows[row], ids + row * shape.rowTokens,
        data.hasLabels() ? labels + row * shape.rowTokens : nullptr));
  return Status::success();
}
