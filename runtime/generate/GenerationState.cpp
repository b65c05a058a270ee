//===- GenerationState.cpp - each row's prompt, position and tokens -------===//

#include "runtime/generate/GenerationState.h"

#include <algorithm>

using namespace zplan;
using namespace zplan::generate;

uint64_t zplan::generate::defaultMaxNewTokens(const GenerationShape &shape) {
  uint64_t room = shape.maxSequenceLength > shape.promptLength
                      ? shape.maxSequenceLength - shape.promptLength
                      : 1;
  return std::min<uint64_t>(16, room);
}

Status GenerationState::create(const GenerationShape &shape,
                               GenerationRequest request,
                               const std::string &promptFile,
                               const std::string &lengthsFile,
                               GenerationState &out) {
  if (request.maxNewTokens == 0)
    request.maxNewTokens = defaultMaxNewTokens(shape);
  uint64_t columns = request.promptColumns;
  if (columns == 0 || request.prompts.size() % columns != 0)
    return failure("prompt file ", inQuotes(promptFile),
                   " holds no token per row");
  uint64_t batch = request.prompts.size() / columns;
  if (batch != shape.batch)
    return failure("prompt file ", inQuotes(promptFile), " has ", batch,
                   " rows; the plan was compiled for --batch ", shape.batch,
                   " (rows per rank)");
  // Messages name the global row, as the user's file numbers it.
  uint64_t first = request.firstRow;
  if (columns > shape.promptLength)
    return failure("prompt file ", inQuotes(promptFile), " has prompts of ",
                   columns, " tokens; the plan was compiled for --prompt-len ",
                   shape.promptLength);
  if (request.promptLengths.empty())
    request.promptLengths.assign(batch, static_cast<int64_t>(columns));
  if (request.promptLengths.size() != batch)
    return failure("prompt lengths file ", inQuotes(lengthsFile), " has ",
                   request.promptLengths.size(), " lengths for ", batch,
                   " prompt rows");
  for (uint64_t row = 0; row < batch; ++row) {
    int64_t length = request.promptLengths[row];
    if (length < 1 || static_cast<uint64_t>(length) > columns)
      return failure("prompt lengths file ", inQuotes(lengthsFile), " row ",
                     first + row, ": length ", length, " is outside [1, ",
                     columns, "] (the prompt file's columns)");
    if (static_cast<uint64_t>(length) + request.maxNewTokens >
        shape.maxSequenceLength)
      return failure("row ", first + row, ": prompt length ", length,
                     " + --max-new-tokens ", request.maxNewTokens, " = ",
                     length + request.maxNewTokens,
                     " exceeds the plan's --max-seq-len ",
                     shape.maxSequenceLength);
    for (int64_t column = 0; column < length; ++column) {
      int64_t id = request.prompts[row * columns + column];
      if (id < 0 || static_cast<uint64_t>(id) >= shape.vocabulary)
        return failure("prompt file ", inQuotes(promptFile), " row ",
                       first + row, " position ", column, ": token id ", id,
                       " is outside the vocabulary [0, ", shape.vocabulary,
                       ")");
    }
  }
  if (request.eos && (*request.eos < 0 ||
                      static_cast<uint64_t>(*request.eos) >= shape.vocabulary))
    return failure("--eos ", *request.eos, " is outside the vocabulary [0, ",
                   shape.vocabulary, ")");

  out.shape = shape;
  out.rows.assign(batch, Row());
  for (uint64_t row = 0; row < batch; ++row) {
    out.rows[row].length = static_cast<uint64_t>(request.promptLengths[row]);
    out.rows[row].tokens.reserve(request.maxNewTokens);
  }
  out.request = std::move(request);
  out.stepCount = 0;
  return Status::success();
}

void GenerationState::fillPrefill(int64_t *inputIds, int64_t *positions,
                                  int64_t *lastIndex) const {
  uint64_t columns = request.promptColumns;
  for (uint64_t row = 0; row < shape.batch; ++row) {
    for (uint64_t slot = 0; slot < shape.promptLength; ++slot) {
      uint64_t at = row * shape.promptLength + slot;
      // Right padding is id 0: docs/generation.md section 1, whatever the file
      // held there.
      inputIds[at] =
          slot < rows[row].length ? request.prompts[row * columns + slot] : 0;
      positions[at] = static_cast<int64_t>(slot);
    }
    lastIndex[row] = static_cast<int64_t>(rows[row].length) - 1;
  }
}

void GenerationState::fillDecode(int64_t *inputIds, int64_t *positions) const {
  for (uint64_t row = 0; row < shape.batch; ++row) {
    const Row &state = rows[row];
    // Every row has a token after prefill; the last one is fed back at the
    // slot after the ones before it (position len_b + count - 1).
    uint64_t position = state.length + state.tokens.size() - 1;
    inputIds[row] = state.tokens.back();
    positions[row] = static_cast<int64_t>(
        std::min<uint64_t>(position, shape.maxSequenceLength - 1));
  }
}

void GenerationState::acceptStep(const std::vector<int64_t> &tokens) {
  for (uint64_t row = 0; row < shape.batch; ++row) {
    Row &state = rows[row];
    if (state.finished)
      continue;
    state.tokens.push_back(tokens[row]);
    state.finished = (request.eos && tokens[row] == *request.eos) ||
                     state.tokens.size() >= request.maxNewTokens;
  }
  ++stepCount;
}

uint64_t GenerationState::activeRows() const {
  return static_cast<uint64_t>(std::count_if(
      rows.begin(), rows.end(), [](const Row &row) { return !row.finished; }));
}

bool GenerationState::allFinished() const {
  return std::all_of(rows.begin(), rows.end(),
                     [](const Row &row) { return row.finished; });
}

uint64_t GenerationState::generatedTokens() const {
  uint64_t total = 0;
  for (const Row &row : rows)
    total += row.tokens.size();
  return total;
}

std::vector<int64_t> GenerationState::outputTable() const {
  uint64_t width = request.maxNewTokens;
  std::vector<int64_t> table(shape.batch * width, 0);
  for (uint64_t row = 0; row < shape.batch; ++row) {
    const std::vector<int64_t> &tokens = rows[row].tokens;
    std::copy(tokens.begin(), tokens.end(), table.begin() + row * width);
    // Only a row that stopped at EOS is short.
    int64_t fill = request.eos ? *request.eos : 0;
    std::fill(table.begin() + row * width + tokens.size(),
              table.begin() + (row + 1) * width, fill);
  }
  return table;
}
