//===- Arrays.cpp - numpy arguments as int64 and float32 arrays -----------===//
//
// See Arrays.h. Tests: test/python/argument-fuzz.test (random arrays through
// the module's calls) and the libFuzzer harness fuzz/ArraysFuzzer.cpp.
//
//===----------------------------------------------------------------------===//

#include "python/Arrays.h"

#include "runtime/support/ShapeText.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace zplan;
using namespace zplan::arrays;

namespace {

/// `array` converted to a C-contiguous, aligned array of T (a copy when its
/// type or layout differs: other integer widths, uint64, strided, read-only
/// or unaligned views); a null array when numpy cannot convert it (its
/// Python error cleared: the caller raises its own, naming the argument).
/// array_t's ensure() without forcecast returns null for any conversion
/// that could lose values, uint64 to int64 among them, which used to be
/// dereferenced. It does not ask numpy for alignment: an array of T that
/// starts one byte into a buffer comes back as it is, and is copied here
/// (fuzz/ArraysFuzzer.cpp found it).
template <typename T>
py::array_t<T, py::array::c_style> converted(const py::array &array) {
  auto out = py::array_t < T,
       py::array::c_style | py::array::forcecast > ::ensure(array);
  if (!out) {
    PyErr_Clear();
    return out;
  }
  // Untyped: a misaligned T* is undefined behaviour even unread.
  const void *bytes = static_cast<const py::array &>(out).data();
  if (reinterpret_cast<uintptr_t>(bytes) % alignof(T) == 0)
    return out;
  std::vector<py::ssize_t> shape(out.shape(), out.shape() + out.ndim());
  py::array_t<T, py::array::c_style> aligned(shape);
  std::memcpy(static_cast<py::array &>(aligned).mutable_data(), bytes,
              out.size() * sizeof(T));
  return aligned;
}

} // namespace

Status zplan::arrays::int64Array(py::handle object, const char *name,
                                 size_t dimensions, Int64Array &out) {
  py::array array = py::array::ensure(object);
  if (!array) {
    PyErr_Clear();
    return failure(name, " is not an array");
  }
  char kind = array.dtype().kind();
  if (kind != 'i' && kind != 'u')
    return failure(name, " holds ", py::str(array.dtype()).cast<std::string>(),
                   ", not integer token ids");
  if (static_cast<size_t>(array.ndim()) != dimensions)
    return failure(name, " has ", array.ndim(), " dimensions, not ",
                   dimensions);
  // uint64 converts by wrapping: refuse what int64 cannot hold. (By the
  // dtype's name, which ignores byte order: this pybind11's
  // array::itemsize() reads 0 under numpy 2.)
  std::string dtypeName =
      py::str(array.dtype().attr("name")).cast<std::string>();
  if (dtypeName == "uint64") {
    py::array_t<uint64_t, py::array::c_style> wide = converted<uint64_t>(array);
    if (!wide)
      return failure(name, " cannot be converted to int64");
    for (py::ssize_t i = 0; i < wide.size(); ++i)
      if (wide.data()[i] > static_cast<uint64_t>(INT64_MAX))
        return failure(name, " holds ", wide.data()[i], " at flat index ", i,
                       ", beyond int64");
  }
  out = converted<int64_t>(array);
  if (!out)
    return failure(name, " cannot be converted to int64");
  return Status::success();
}

std::vector<int64_t> zplan::arrays::shapeOf(const py::array &array) {
  return std::vector<int64_t>(array.shape(), array.shape() + array.ndim());
}

Status zplan::arrays::floatArray(py::handle object, const char *name,
                                 const std::vector<int64_t> &expected,
                                 FloatArray &out) {
  py::array array = py::array::ensure(object);
  if (!array) {
    PyErr_Clear();
    return failure(name, " is not an array");
  }
  char kind = array.dtype().kind();
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b')
    return failure(name, " holds ", py::str(array.dtype()).cast<std::string>(),
                   ", not numbers");
  if (shapeOf(array) != expected)
    return failure(name, " is ", shapeText(shapeOf(array)), "; the plan takes ",
                   shapeText(expected));
  out = converted<float>(array);
  if (!out)
    return failure(name, " cannot be converted to float32");
  return Status::success();
}
