//===- RowData.cpp - rows of training data: `zrun train --data ROWS.npy` --===//

#include "runtime/train/RowData.h"

#include "runtime/support/ShapeText.h"
#include "runtime/train/NpyHeader.h"

#include <vector>

using namespace zplan;
using namespace zplan::train;

namespace {

/// What one of the two files is and holds, as it was opened.
struct Matrix {
  TokenType type = TokenType::I64;
  std::vector<uint64_t> shape;
  uint64_t dataOffset = 0;
};

/// Opens `path` as a 2-D int32/int64 .npy; `kind` ("row file") names it and
/// `rule` says what it must hold, in messages.
Status openMatrix(plan::ReadableFile &file, const std::string &path,
                  const char *kind, const char *rule, Matrix &matrix) {
  ZR_RETURN_IF_ERROR(file.open(path, kind));
  NpyHeader header;
  ZR_RETURN_IF_ERROR(parseNpyHeader(file, header));
  if (header.shape.size() != 2)
    return failure(file.subject(), " has shape ", shapeText(header.shape), "; ",
                   rule);
  if (header.descr == "<i4")
    matrix.type = TokenType::I32;
  else if (header.descr == "<i8")
    matrix.type = TokenType::I64;
  else
    return failure(file.subject(), " is ", shapeText(header.shape), " ",
                   npyTypeName(header.descr), "; ", rule);
  matrix.shape = header.shape;
  matrix.dataOffset = header.dataOffset;
  uint64_t elements, dataBytes;
  if (__builtin_mul_overflow(header.shape[0], header.shape[1], &elements) ||
      __builtin_mul_overflow(elements, tokenTypeBytes(matrix.type),
                             &dataBytes) ||
      header.dataOffset + dataBytes != file.bytes())
    return failure(file.subject(), " is ", file.bytes(),
                   " bytes, but its header declares ", shapeText(header.shape),
                   " ", tokenTypeName(matrix.type), " after ",
                   header.dataOffset, " header bytes");
  return Status::success();
}

} // namespace

Status RowData::open(const std::string &rowsPath, const std::string &labelsPath,
                     const RowDataOptions &givenOptions) {
  options = givenOptions;
  Matrix rowMatrix;
  ZR_RETURN_IF_ERROR(openMatrix(
      ids, rowsPath, "row file",
      "rows are 2-D int32 or int64 token ids [rows, tokens]", rowMatrix));
  idType = rowMatrix.type;
  idsOffset = rowMatrix.dataOffset;
  rowCount = rowMatrix.shape[0];
  tokensPerRow = rowMatrix.shape[1];
  labelsGiven = !labelsPath.empty();
  if (!labelsGiven)
    return Status::success();
  Matrix labelMatrix;
  ZR_RETURN_IF_ERROR(openMatrix(
      labels, labelsPath, "labels file",
      "labels are 2-D int32 or int64 [rows, tokens], token ids or -100 "
      "(ignored)",
      labelMatrix));
  labelType = labelMatrix.type;
  labelsOffset = labelMatrix.dataOffset;
  if (labelMatrix.shape != rowMatrix.shape)
    return failure(labels.subject(), " is ", shapeText(labelMatrix.shape), " ",
                   tokenTypeName(labelType), "; it must have the shape of ",
                   ids.subject(), ", ", shapeAndType());
  return Status::success();
}

std::string RowData::shapeAndType() const {
  return shapeText({static_cast<int64_t>(rowCount),
                    static_cast<int64_t>(tokensPerRow)}) +
         " " + std::string(tokenTypeName(idType));
}

namespace {

/// Reads row `row` of an [R, T] file of `type` at `dataOffset`.
Status readMatrixRow(const plan::ReadableFile &file, TokenType type,
                     uint64_t dataOffset, uint64_t row, uint64_t tokens,
                     int64_t *destination) {
  uint64_t width = tokenTypeBytes(type);
  std::vector<uint8_t> raw(tokens * width);
  ZR_RETURN_IF_ERROR(
      file.read(dataOffset + row * tokens * width, raw.size(), raw.data()));
  for (uint64_t t = 0; t < tokens; ++t)
    destination[t] = tokenAt(type, raw.data() + t * width);
  return Status::success();
}

} // namespace

Status RowData::readRow(uint64_t row, int64_t *idsOut,
                        int64_t *labelsOut) const {
  if (row >= rowCount)
    return failure("cannot read row ", row, " of ", ids.subject(),
                   ": it holds ", rowCount, " rows");
  ZR_RETURN_IF_ERROR(
      readMatrixRow(ids, idType, idsOffset, row, tokensPerRow, idsOut));
  for (uint64_t t = 0; t < tokensPerRow; ++t) {
    int64_t token = idsOut[t];
    if (token < 0)
      return failure(ids.subject(), ": row ", row, ", token ", t, " is ", token,
                     "; token ids are non-negative");
    if (options.vocabSize != 0 &&
        static_cast<uint64_t>(token) >= options.vocabSize)
      return failure(ids.subject(), ": row ", row, ", token ", t, " is ", token,
                     ", outside the model's vocabulary of ", options.vocabSize);
  }
  if (!labelsGiven)
    return Status::success();
  ZR_RETURN_IF_ERROR(readMatrixRow(labels, labelType, labelsOffset, row,
                                   tokensPerRow, labelsOut));
  for (uint64_t t = 0; t < tokensPerRow; ++t) {
    int64_t label = labelsOut[t];
    if (label == kIgnoredLabel)
      continue;
    if (label < 0 || (options.vocabSize != 0 &&
                      static_cast<uint64_t>(label) >= options.vocabSize))
      return failure(labels.subject(), ": row ", row, ", token ", t, " is ",
                     label, "; a label is a token id",
                     options.vocabSize ? " below the vocabulary of " +
                                             std::to_string(options.vocabSize)
                                       : std::string(),
                     " or -100 (ignored)");
  }
  return Status::success();
}
