//===- GenerationState.h - each row's prompt, position and tokens ---------===//
//
// The host side of a generation run (docs/generation.md section 1): what each
// program is fed and what each row has generated. Row b has a prompt of len_b
// tokens (1 <= len_b <= P), right-padded to the plan's prompt length P with id
// 0, and generates at most M tokens. Its token at absolute position p lives in
// cache slot p, so len_b + M <= L (the plan's cache length) must hold.
//
//   prefill:  input_ids[b, s] = prompt[b, s] (0 past len_b),
//             positions[b, s] = s, last_index[b] = len_b - 1;
//             its logits give each row's first token (step 0).
//   decode k: (k >= 1) input_ids[b, 0] = row b's last token, at
//             positions[b, 0] = len_b + k - 1; its logits give step k.
//
// A row finishes when it generates the EOS id (which it keeps) or its M-th
// token. A finished row is still fed, its last token at its last position
// (clamped to L - 1): that rewrites a slot with what it already holds, and
// its logits are ignored. The run ends when every row has finished.
//
// Generation is data parallel (docs/generation.md section 8): each rank
// holds its own B rows, rows [firstRow, firstRow + B) of the global batch,
// and messages and sampling draws name a row by its global index.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_GENERATE_GENERATIONSTATE_H
#define ZPLAN_RUNTIME_GENERATE_GENERATIONSTATE_H

#include "runtime/support/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zplan::generate {

/// The plan's generation shapes (from its programs' bindings).
struct GenerationShape {
  /// B: rows per run.
  uint64_t batch = 1;
  /// P: prefill's tokens per row.
  uint64_t promptLength = 1;
  /// L: cache slots per row.
  uint64_t maxSequenceLength = 2;
  /// V: the logits' last dimension; token ids must be below it.
  uint64_t vocabulary = 1;
};

/// The tokens per row generated when the caller names no maximum: 16, or
/// what the plan leaves room for after its longest prompt (L - P) when that
/// is less.
uint64_t defaultMaxNewTokens(const GenerationShape &shape);

/// The user's request, as read from the files and flags.
struct GenerationRequest {
  /// [B, Pmax] ids, row-major.
  std::vector<int64_t> prompts;
  uint64_t promptColumns = 0;
  /// [B]; empty: every row is promptColumns long.
  std::vector<int64_t> promptLengths;
  /// M; 0: defaultMaxNewTokens(shape).
  uint64_t maxNewTokens = 1;
  std::optional<int64_t> eos;
  /// The global index of row 0 (rank * B on rank `rank`): messages name
  /// global rows, and the sampler draws for (seed, global row, step).
  uint64_t firstRow = 0;
};

class GenerationState {
public:
  /// Checks `request` against `shape` (the batch, every length within
  /// [1, Pmax], Pmax <= P, len_b + M <= L, every prompt id below V) and
  /// builds the state before prefill. Messages name the row and the value;
  /// `promptFile` and `lengthsFile` name the files they came from.
  static Status create(const GenerationShape &shape, GenerationRequest request,
                       const std::string &promptFile,
                       const std::string &lengthsFile, GenerationState &out);

  /// Fills prefill's inputs: input_ids and positions [B, P], last_index [B].
  void fillPrefill(int64_t *inputIds, int64_t *positions,
                   int64_t *lastIndex) const;
  /// Fills the next decode step's inputs: input_ids and positions [B, 1].
  void fillDecode(int64_t *inputIds, int64_t *positions) const;

  /// Records the step's tokens (one per row; finished rows' are ignored)
  /// and finishes the rows that reached EOS or M tokens.
  void acceptStep(const std::vector<int64_t> &tokens);

  /// Steps accepted so far (prefill's is step 0).
  uint64_t steps() const { return stepCount; }
  bool finished(uint64_t row) const { return rows[row].finished; }
  bool allFinished() const;
  /// Tokens row `row` generated so far.
  const std::vector<int64_t> &generated(uint64_t row) const {
    return rows[row].tokens;
  }
  uint64_t promptLength(uint64_t row) const { return rows[row].length; }
  /// Tokens generated over all rows.
  uint64_t generatedTokens() const;

  /// The output [B, M], row-major: each row's tokens; after an EOS the rest
  /// of the row is the EOS id. (A row without EOS has all M.)
  std::vector<int64_t> outputTable() const;

  const GenerationShape &generationShape() const { return shape; }
  uint64_t maxNewTokens() const { return request.maxNewTokens; }
  /// The global index of row 0.
  uint64_t firstRow() const { return request.firstRow; }
  /// Rows not finished yet.
  uint64_t activeRows() const;

private:
  struct Row {
    uint64_t length = 0;
    std::vector<int64_t> tokens;
    bool finished = false;
  };

  GenerationShape shape;
  GenerationRequest request;
  std::vector<Row> rows;
  uint64_t stepCount = 0;
};

} // namespace zplan::generate

#endif // ZPLAN_RUNTIME_GENERATE_GENERATIONSTATE_H
