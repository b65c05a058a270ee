//===- BatchSampler.cpp - which token rows each rank reads at each step --===//

#include "runtime/train/BatchSampler.h"

#include "runtime/train/TokenData.h"

using namespace zplan;
using namespace zplan::train;

uint64_t BatchSampler::rowOffset(uint64_t step, uint64_t row) const {
  uint64_t stepKey = splitmix64(seed ^ (0x9E3779B97F4A7C15ull * (step + 1)));
  // TokenData::open guarantees numTokens > rowTokens; the guard keeps a
  // misuse from dividing by zero.
  uint64_t span = numTokens > shape.rowTokens ? numTokens - shape.rowTokens : 1;
  return splitmix64(stepKey + row) % span;
}

std::vector<uint64_t> BatchSampler::rowsFor(uint64_t step, uint64_t micro,
                                            uint64_t rank) const {
  std::vector<uint64_t> offsets;
  offsets.reserve(shape.rows);
  uint64_t first = (micro * shape.ranks + rank) * shape.rows;
  for (uint64_t row = first; row < first + shape.rows; ++row)
    offsets.push_back(rowOffset(step, row));
  return offsets;
}

Status BatchSampler::fill(const TokenData &data, uint64_t step, uint64_t micro,
                          uint64_t rank, int64_t *batch) const {
  if (micro >= shape.microSteps)
    return failure("micro-step ", micro, " is outside the ", shape.microSteps,
                   " micro-steps of an optimizer step");
  if (rank >= shape.ranks)
    return failure("rank ", rank, " is outside the ", shape.ranks, " ranks");
  if (data.size() <= shape.rowTokens || data.size() != numTokens)
    return failure("token file ", inQuotes(data.path()), " holds ", data.size(),
                   " tokens; the sampler was made for ", numTokens,
                   " and rows of ", shape.rowTokens);
  std::vector<uint64_t> offsets = rowsFor(step, micro, rank);
  for (uint64_t row = 0; row < offsets.size(); ++row)
    ZR_RETURN_IF_ERROR(data.readRow(offsets[row], shape.rowTokens,
                                    batch + row * shape.rowTokens));
  return Status::success();
}
