//===- NpyHeader.h - the header of a .npy file `zrun train` reads ---------===//
//
// `zrun train --data` and `--labels` read .npy files row by row with pread,
// never whole, so they parse only the header here: the magic and version,
// the dtype, C order and the shape, and where the data starts. What the
// dtype and shape must be is the reader's business: a token stream is 1-D
// (TokenData.h), rows are 2-D (RowData.h). isRowFile() is how `--data`
// tells the two apart.
//
// This is not runtime/tooling/Npy: that library sits above this one
// (ZplanTooling links ZplanTrain), reads whole files, and knows no unsigned
// dtypes wider than a byte.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_NPYHEADER_H
#define ZPLAN_RUNTIME_TRAIN_NPYHEADER_H

#include "runtime/plan/ReadableFile.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zplan::train {

struct NpyHeader {
  /// The dtype as the header spells it: "<i8".
  std::string descr;
  std::vector<uint64_t> shape;
  /// The shape as the header spells it: "(2, 16)".
  std::string shapeInHeader;
  /// Byte offset of the first element.
  uint64_t dataOffset = 0;
};

/// Parses the header of `file`: magic, versions 1 to 3, 'descr', C order
/// and 'shape'. It does not check the file's size against the shape.
/// Messages name the file (its ReadableFile subject).
Status parseNpyHeader(const plan::ReadableFile &file, NpyHeader &header);

/// NumPy's name of a dtype descr ("int64" for '<i8', "uint8" for '|u1'), or
/// the descr in quotes when it is not a plain number type.
std::string npyTypeName(const std::string &descr);

/// True when `path` ends in `.npy` and its header parses with a 2-D shape:
/// a row file, which `--data` reads as rows rather than as a token stream.
/// Any failure (no file, no header) answers false and is left to the
/// token stream's reader to report.
bool isRowFile(const std::string &path);

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_NPYHEADER_H
