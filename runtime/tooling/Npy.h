//===- Npy.h - read and write NumPy .npy files ----------------------------===//
//
// zrun's inputs and outputs are .npy files (DESIGN.md, "Command line"). This
// reads and writes the subset a plan needs: format versions 1.0, 2.0 and
// 3.0, C order, little-endian '<f4', '<f8', '<i8', '<i4', '|b1' (and the
// one-byte '|i1', '|u1'), any rank including 0. Anything else (a Fortran
// array, a big-endian dtype, an object array, a file shorter or longer than
// its header says) is refused with a one-line message that names the file
// and what was wrong, never read half-way, and a read never takes more
// memory than the header declares and the file holds. A write goes to a
// temporary file in the same directory that is renamed into place, so an
// output file is complete or absent (runtime/tooling/Files.h).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_NPY_H
#define ZPLAN_RUNTIME_TOOLING_NPY_H

#include "runtime/plan/PlanLoader.h"

#include <cstdint>
#include <functional>
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

/// Parses the bytes of a .npy file; `sourceName` only goes into messages.
/// On failure `array` is left as it was.
Status parseNpy(std::string_view bytes, std::string_view sourceName,
                Array &array);

/// Called with the dtype and shape a .npy header declares (data empty),
/// before any data is read; a failure stops the read.
using HeaderCheck = std::function<Status(const Array &declared)>;

/// The longest header readNpy() reads. NumPy writes headers of a few
/// hundred bytes; the format allows 4 GiB.
inline constexpr uint64_t kMaxHeaderBytes = 1 << 20;

/// Reads the .npy file at `path`: a regular file only, whose size must be
/// exactly its header plus the data the header's shape and dtype declare;
/// `checkHeader` (if any) may refuse the declaration before the data is
/// read. Memory used is bounded by what the header declares and the file
/// holds, whatever `path` is. On failure `array` is left as it was.
Status readNpy(const std::string &path, Array &array,
               const HeaderCheck &checkHeader = nullptr);

/// The bytes of a .npy file (version 1.0 unless the header needs 2.0)
/// holding `bytes` bytes at `data` as an array of `dtype` and `shape`.
/// Fails when the dtype has no .npy name or `bytes` does not match the shape.
Status encodeNpy(plan::DataType dtype, const std::vector<int64_t> &shape,
                 const void *data, uint64_t bytes, std::string &out);

/// Writes a .npy file at `path` through a temporary file in the same
/// directory renamed into place: on failure no file (and no temporary) is
/// left and an existing `path` is untouched.
Status writeNpy(const std::string &path, plan::DataType dtype,
                const std::vector<int64_t> &shape, const void *data,
                uint64_t bytes);

/// writeNpy() of an Array.
Status writeNpy(const std::string &path, const Array &array);

} // namespace zplan::npy

#endif // ZPLAN_RUNTIME_TOOLING_NPY_H
