//===- Arrays.h - numpy arguments as int64 and float32 arrays -------------===//
//
// The conversion every array argument of the module goes through: token ids
// (train_step's input_ids and labels, generate's prompts and lengths) as
// C-contiguous int64, masks and advantages as C-contiguous float32. Any
// object numpy can hand over -- every dtype, byte order, layout, stride,
// read-only or 0-d view, or not an array at all -- is converted exactly or
// refused with a Status that names the argument; none is dereferenced
// unconverted, and no Python error is left set. Apart from the module, so
// that a libFuzzer harness (fuzz/ArraysFuzzer.cpp) can call it on arrays
// made from its input in an embedded interpreter.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_PYTHON_ARRAYS_H
#define ZPLAN_PYTHON_ARRAYS_H

#include "runtime/support/Status.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <vector>

namespace zplan::arrays {

using Int64Array = pybind11::array_t<int64_t, pybind11::array::c_style>;
using FloatArray = pybind11::array_t<float, pybind11::array::c_style>;

/// `object` as a C-contiguous int64 array of `dimensions` dimensions (a
/// copy when it is another integer type or layout); fails, naming `name`,
/// for anything that is not an integer array of that rank, and for
/// unsigned values beyond int64.
Status int64Array(pybind11::handle object, const char *name, size_t dimensions,
                  Int64Array &out);

/// `object` as a C-contiguous float32 array of shape `expected` (numbers
/// and bools convert; a mask of ints or bools is fine); a failure names
/// `name`.
Status floatArray(pybind11::handle object, const char *name,
                  const std::vector<int64_t> &expected, FloatArray &out);

/// The extents of `array`.
std::vector<int64_t> shapeOf(const pybind11::array &array);

} // namespace zplan::arrays

#endif // ZPLAN_PYTHON_ARRAYS_H
