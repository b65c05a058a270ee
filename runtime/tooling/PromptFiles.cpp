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
