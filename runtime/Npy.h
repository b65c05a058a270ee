//===- Npy.h - read and write NumPy .npy files ----------------------------===//
//
// zrun's inputs and outputs are .npy files (DESIGN.md, "Command line"). This
// reads and writes the subset a plan needs: format versions 1.0, 2.0 and
// 3.0, C order, little-endian '<f4', '<f8', '<i8', '<i4', '|b1' (and the
// one-byte '|i1', '|u1'), any rank including 0. Anything else (a Fortran
// array, a big-endian dtype, an object array, a file shorter or longer than
// its header says) is refused with a one-line message that names the file
// and what was wrong, never read half-way. A write goes to a temporary file
// in the same directory that is renamed into place, so an output file is
// complete or absent.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_NPY_H
#define ZPLAN_RUNTIME_NPY_H

#include "runtime/plan/PlanLoader.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace zplan::npy {

/// A dense array: element type, shape (C order) and its little-endian bytes.
struct Array {
  plan::DataType dtype = plan::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  /// Product of the dimensions (1 for a scalar); no overflow check: shapes
  /// come from a parsed header (checked) or a validated plan.
  uint64_t numElements() const;
};

/// The .npy dtype string of `type` ("<f4"), or "" for a type .npy files
/// written here cannot hold (F16 is '<f2'; BF16 has none).
std::string descrOf(plan::DataType type);

/// "[2, 16]", as zrun's messages print shapes.
std::string shapeText(const std::vector<int64_t> &shape);

/// Parses the bytes of a .npy file; `sourceName` only goes into messages.
/// On failure `array` is left as it was.
plan::Status parseNpy(std::string_view bytes, std::string_view sourceName,
                      Array &array);

/// Reads and parses the .npy file at `path`.
plan::Status readNpy(const std::string &path, Array &array);

/// The bytes of a .npy file (version 1.0 unless the header needs 2.0)
/// holding `bytes` bytes at `data` as an array of `dtype` and `shape`.
/// Fails when the dtype has no .npy name or `bytes` does not match the shape.
plan::Status encodeNpy(plan::DataType dtype, const std::vector<int64_t> &shape,
                       const void *data, uint64_t bytes, std::string &out);

/// Writes a .npy file at `path` through a temporary file in the same
/// directory renamed into place: on failure no file (and no temporary) is
/// left and an existing `path` is untouched.
plan::Status writeNpy(const std::string &path, plan::DataType dtype,
                      const std::vector<int64_t> &shape, const void *data,
                      uint64_t bytes);

/// writeNpy() of an Array.
plan::Status writeNpy(const std::string &path, const Array &array);

//===----------------------------------------------------------------------===//
// Files that appear complete or not at all
//===----------------------------------------------------------------------===//

/// A file written in two steps: stage() writes the bytes to a temporary file
/// beside `path`; commit() renames it into place. Destroying a staged,
/// uncommitted file removes the temporary. zrun stages every output before it
/// commits any, so that a failed write leaves none of them half-done.
class StagedFile {
public:
  StagedFile() = default;
  StagedFile(const StagedFile &) = delete;
  StagedFile &operator=(const StagedFile &) = delete;
  StagedFile(StagedFile &&other) noexcept;
  StagedFile &operator=(StagedFile &&other) noexcept;
  ~StagedFile();

  /// Writes `bytes` to a fresh temporary file in the directory of `path`
  /// and flushes it; `what` ("output 'logits'") names it in messages.
  plan::Status stage(const std::string &path, std::string_view bytes,
                     std::string_view what);
  /// Renames the temporary onto the path given to stage().
  plan::Status commit();

private:
  void discard();

  std::string finalPath;
  std::string temporaryPath;
  std::string description;
};

/// stage() and commit() of one file.
plan::Status writeFileAtomically(const std::string &path,
                                 std::string_view bytes, std::string_view what);

} // namespace zplan::npy

#endif // ZPLAN_RUNTIME_NPY_H
