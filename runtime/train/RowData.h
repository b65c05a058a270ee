//===- RowData.h - rows of training data: `zrun train --data ROWS.npy` ----===//
//
// A supervised fine-tuning set is rows: a 2-D `.npy` [R, T] of int32 or
// int64 token ids (`--data`; isRowFile() in NpyHeader.h tells it from a 1-D
// token stream) and, optionally, a labels file of the same shape and types
// (`--labels`), -100 where a token is not scored (prompt, padding), as
// Hugging Face's `model(input_ids, labels=labels)` takes them. Without a
// labels file the labels are the rows themselves. Like TokenData, open()
// reads the headers only, and readRow() preads one row of each file, so
// neither file is ever read whole.
//
// open() checks the form: a 2-D C-order .npy, int32 or int64, a size that
// matches the header, labels of the row file's shape. Whether the rows fit
// the plan (T, and enough rows for one optimizer step) is RowSampler.h's
// checkRowsFit(). readRow() checks the values: ids in [0, vocabulary),
// labels in [0, vocabulary) or -100. Every message names the file, and as
// rows are read the row and the token.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_ROWDATA_H
#define ZPLAN_RUNTIME_TRAIN_ROWDATA_H

#include "runtime/plan/ReadableFile.h"
#include "runtime/support/Status.h"
#include "runtime/train/TokenData.h"

#include <cstdint>
#include <string>

namespace zplan::train {

/// The label that scores nothing (Hugging Face's and torch's ignore_index).
constexpr int64_t kIgnoredLabel = -100;

struct RowDataOptions {
  /// When non-zero, every id read (and every label but -100) must be below
  /// it.
  uint64_t vocabSize = 0;
};

/// An open row file and its optional labels file.
class RowData {
public:
  /// Opens and checks `rowsPath` and, when `labelsPath` is not empty, the
  /// labels file; reads no row.
  Status open(const std::string &rowsPath, const std::string &labelsPath,
              const RowDataOptions &options);

  /// R and T.
  uint64_t rows() const { return rowCount; }
  uint64_t rowTokens() const { return tokensPerRow; }
  bool hasLabels() const { return labelsGiven; }
  TokenType type() const { return idType; }
  TokenType labelsType() const { return labelType; }
  const std::string &path() const { return ids.path(); }
  const std::string &labelsPath() const { return labels.path(); }
  /// "row file 'r.npy'" (the ids) as messages name it.
  std::string subject() const { return ids.subject(); }
  /// "[10, 16] int64".
  std::string shapeAndType() const;

  /// Reads row `row` (T ids) into `idsOut` and, when hasLabels(), its T
  /// labels into `labelsOut` (otherwise left alone; it may be null).
  Status readRow(uint64_t row, int64_t *idsOut, int64_t *labelsOut) const;

private:
  plan::ReadableFile ids;
  plan::ReadableFile labels;
  RowDataOptions options;
  bool labelsGiven = false;
  TokenType idType = TokenType::I64;
  TokenType labelType = TokenType::I64;
  uint64_t idsOffset = 0;
  uint64_t labelsOffset = 0;
  uint64_t rowCount = 0;
  uint64_t tokensPerRow = 0;
};

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_ROWDATA_H
