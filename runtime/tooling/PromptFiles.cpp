//===- PromptFiles.cpp - the prompts of a generation, read from .npy files ===//

#include "runtime/tooling/PromptFiles.h"

#include "runtime/plan/PlanQueries.h"
#include "runtime/support/ShapeText.h"
#include "runtime/tooling/Npy.h"

#include <cstring>

using namespace zplan;
using namespace zplan::tooling;
using plan::typeName;

namespace {

/// Reads an int64 (or int32) .npy file of `rank` dimensions as int64.
Status readIds(const std::string &path, const char *what, size_t rank,
               std::vector<int64_t> &values, std::vector<int64_t> &shape) {
  npy::Array array;
  auto checkHeader = [&](const npy::Array &declared) -> Status {
    if ((declared.dtype != plan::I64 && declared.dtype != plan::I32) ||
        declared.shape.size() != rank)
      return failure(what, " ", inQuotes(path), " is ",
                     shapeText(declared.shape), " ", typeName(declared.dtype),
                     "; generate reads int64 (or "
                     "int32) ",
                     rank == 2 ? "[batch, prompt length]" : "[batch]");
    return Status::success();
  };
  if (Status status = npy::readNpy(path, array, checkHeader); !status.ok()) {
    if (status.message().rfind(what, 0) == 0)
      return status;
    return failure(what, ": ", status.message());
  }
  uint64_t count = array.numElements();
  values.resize(count);
  if (array.dtype == plan::I64) {
    std::memcpy(values.data(), array.data.data(), count * sizeof(int64_t));
  } else {
    for (uint64_t i = 0; i < count; ++i) {
      int32_t value;
      std::memcpy(&value, array.data.data() + i * sizeof(value), sizeof(value));
      values[i] = value;
    }
  }
  shape = array.shape;
  return Status::success();
}

} // namespace

Status
zplan::tooling::readGenerateRequest(const generate::GenerateOptions &options,
                                    session::GenerateRequest &request) {
  generate::GenerationRequest &rows = request.rows;
  std::vector<int64_t> shape;
  ZR_RETURN_IF_ERROR(
      readIds(options.promptPath, "prompt file", 2, rows.prompts, shape));
  rows.promptColumns = static_cast<uint64_t>(shape[1]);
  if (shape[0] == 0 || shape[1] == 0)
    return failure("prompt file ", inQuotes(options.promptPath), " is ",
                   shapeText(shape), ": no prompt to continue");
  if (!options.promptLengthsPath.empty()) {
    std::vector<int64_t> lengthsShape;
    ZR_RETURN_IF_ERROR(readIds(options.promptLengthsPath, "prompt lengths file",
                               1, rows.promptLengths, lengthsShape));
  }
  rows.maxNewTokens = options.maxNewTokens;
  rows.eos = options.eos;
  request.sampling = options.sampling;
  request.promptSource = options.promptPath;
  request.lengthsSource = options.promptLengthsPath;
  return Status::success();
}

Status zplan::tooling::keepRankRows(session::GenerateRequest &request,
                                    const generate::GenerationShape &shape,
                                    uint64_t rank, uint64_t ranks) {
  uint64_t rowsPerRank = shape.batch;
  generate::GenerationRequest &rows = request.rows;
  uint64_t columns = rows.promptColumns;
  uint64_t expected = ranks * rowsPerRank;
  uint64_t found = columns ? rows.prompts.size() / columns : 0;
  // One rank: the batch is the plan's; N ranks: N times it, each its own.
  std::string perRank =
      ranks == 1
          ? "the plan was compiled for --batch " + std::to_string(rowsPerRank)
          : "the plan generates --batch " + std::to_string(rowsPerRank) +
                " rows on each of " + std::to_string(ranks) + " ranks";
  std::string total = ranks == 1 ? "" : ": " + std::to_string(expected);
  if (found != expected)
    return failure("prompt file ", inQuotes(request.promptSource), " has ",
                   found, " rows; ", perRank,
                   total.empty() ? "" : total + " rows");
  if (!rows.promptLengths.empty() && rows.promptLengths.size() != expected)
    return failure("prompt lengths file ", inQuotes(request.lengthsSource),
                   " has ", rows.promptLengths.size(), " lengths for ",
                   expected, " prompt rows");
  // Every rank checks every row, so that a bad row fails on all of them
  // alike and is named by its row in the file.
  generate::GenerationShape global = shape;
  global.batch = expected;
  generate::GenerationState whole;
  ZR_RETURN_IF_ERROR(generate::GenerationState::create(
      global, rows, request.promptSource, request.lengthsSource, whole));
  uint64_t first = rank * rowsPerRank;
  rows.prompts = std::vector<int64_t>(rows.prompts.begin() + first * columns,
                                      rows.prompts.begin() +
                                          (first + rowsPerRank) * columns);
  if (!rows.promptLengths.empty())
    rows.promptLengths =
        std::vector<int64_t>(rows.promptLengths.begin() + first,
                             rows.promptLengths.begin() + first + rowsPerRank);
  rows.firstRow = first;
  return Status::success();
}
