//===- ArraysFuzzer.cpp - libFuzzer harness: numpy arguments --------------===//
//
// The Python module's argument conversion (python/Arrays.h) on objects made
// from the input in an embedded interpreter: the first 8 bytes choose a
// dtype (every kind numpy has, both byte orders), up to 4 extents, a layout
// (C or Fortran order, a strided or reversed view, read-only, unaligned, 0-d,
// or not an array: a list, a scalar, None) and the rank the caller expects;
// the rest are the elements' bytes. Each object goes through int64Array (as
// input_ids) and floatArray (as a mask of its own shape, and of another).
//
// Beyond "no crash", the harness checks what the module promises:
//   - a conversion that succeeds is exact: C-contiguous, aligned, the shape
//     asked for, and every int64 equal to the Python integer numpy holds (so a
//     uint64 beyond int64 must be refused, never wrapped), every float32
//     numpy's own cast of the element;
//   - a refusal names the argument, and leaves no Python error set;
//   - nothing throws: a C++ or Python exception out of the conversion would
//     reach the user as something other than the RuntimeError it raises.
// A broken promise aborts with a line saying which.
//
//===----------------------------------------------------------------------===//

#include "python/Arrays.h"

#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace zplan;

// The embedded interpreter keeps its caches (interned strings, free lists,
// numpy's type objects) to the end: LeakSanitizer would report them all
// after every input. Leaks in the conversion are not what this harness looks
// for; ASan's other checks stay on.
extern "C" const char *__lsan_default_options() { return "detect_leaks=0"; }

namespace {

/// The object maker: make(spec, payload) -> (object, ints or None), where
/// `ints` are the elements as Python integers when numpy makes an integer
/// array of the object (for the exactness check).
const char *kMaker = R"PY(
import numpy as np

DTYPES = ['?', 'i1', 'u1', '<i2', '>i2', '<u2', '>u2', '<i4', '>i4', '<u4',
          '>u4', '<i8', '>i8', '<u8', '>u8', '<f2', '>f2', '<f4', '>f4',
          '<f8', '>f8', 'g', '<c8', '>c16', 'M8[s]', 'm8[ms]', 'U2', 'S3',
          'V4', 'O']

def make(spec, payload):
    dtype = np.dtype(DTYPES[spec[0] % len(DTYPES)])
    ndim = spec[1] % 5
    shape = tuple(spec[2 + i] % 5 for i in range(ndim))
    layout = spec[6]
    count = int(np.prod(shape)) if shape else 1
    # Twice the elements: room for a strided view of the first axis.
    total = 2 * count + 1
    if dtype.kind == 'O':
        values = [int.from_bytes(payload[i % max(1, len(payload)):][:9], 'little')
                  - (1 << 63) for i in range(total)]
        base = np.array(values, dtype=object)
    else:
        raw = bytes(payload) * (total * dtype.itemsize // max(1, len(payload)) + 1)
        raw = raw[:total * dtype.itemsize].ljust(total * dtype.itemsize, b'\0')
        if layout & 0x10:
            # Unaligned: the elements start one byte into the buffer.
            buffer = bytearray(b'\0' + raw)
            base = np.frombuffer(buffer, dtype=dtype, offset=1, count=total)
        else:
            base = np.frombuffer(bytearray(raw), dtype=dtype, count=total)
    if layout & 0x02 and ndim > 0:
        array = base[:2 * count:2]
    else:
        array = base[:count]
    array = array.reshape(shape, order='F' if layout & 0x01 else 'C')
    if layout & 0x04 and ndim > 0:
        array = array[..., ::-1]
    if layout & 0x08:
        array.flags.writeable = False
    kind = (layout >> 5) & 0x03
    if kind == 1:
        obj = array.tolist()
    elif kind == 2:
        obj = array.ravel()[0] if array.size else None
    else:
        obj = array
    # What numpy makes of the object, as the module's conversion sees it.
    seen = np.asarray(obj)
    ints = None
    if seen.dtype.kind in 'iu':
        ints = [int(v) for v in np.ravel(seen, order='C')]
    return obj, ints

def floats(obj, shape):
    return np.ascontiguousarray(np.asarray(obj).astype(np.float32).reshape(shape))
)PY";

py::object maker;
py::object floatsOf;

[[noreturn]] void broken(const std::string &promise) {
  std::fprintf(stderr, "zplan-fuzz-arrays: %s\n", promise.c_str());
  std::fflush(stderr);
  std::abort();
}

/// Whether `array`'s elements start at their type's alignment (the module
/// reads them through T*).
template <typename T>
bool aligned(const py::array_t<T, py::array::c_style> &array) {
  const void *data = static_cast<const py::array &>(array).data();
  return reinterpret_cast<uintptr_t>(data) % alignof(T) == 0;
}

/// A refusal names `name` first and leaves no Python error set.
void checkRefusal(const Status &status, const char *name) {
  if (std::strncmp(status.message().c_str(), name, std::strlen(name)) != 0)
    broken("a refusal does not start with the argument's name '" +
           std::string(name) + "': " + status.message());
  if (PyErr_Occurred())
    broken("a refusal left a Python error set: " + status.message());
}

void checkInt64(py::handle object, const py::object &ints, size_t dimensions) {
  arrays::Int64Array out;
  Status status = arrays::int64Array(object, "input_ids", dimensions, out);
  if (!status.ok())
    return checkRefusal(status, "input_ids");
  if (ints.is_none())
    broken("int64Array accepted an object that is not an integer array");
  if (static_cast<size_t>(out.ndim()) != dimensions)
    broken("int64Array returned " + std::to_string(out.ndim()) +
           " dimensions, not " + std::to_string(dimensions));
  if (!(out.flags() & py::array::c_style))
    broken("int64Array returned an array that is not C-contiguous");
  if (!aligned(out))
    broken("int64Array returned an unaligned array");
  auto values = ints.cast<py::list>();
  if (static_cast<size_t>(out.size()) != values.size())
    broken("int64Array changed the element count");
  for (size_t i = 0; i < values.size(); ++i) {
    py::int_ value = values[i].cast<py::int_>();
    // Exact: the Python integer and the int64 compare as Python integers.
    if (!value.equal(py::int_(out.data()[i])))
      broken("int64Array element " + std::to_string(i) + " is " +
             std::to_string(out.data()[i]) + ", numpy holds " +
             py::str(value).cast<std::string>());
  }
}

void checkFloat(py::handle object, const std::vector<int64_t> &expected,
                bool asNumpyWould) {
  arrays::FloatArray out;
  Status status = arrays::floatArray(object, "mask", expected, out);
  if (!status.ok())
    return checkRefusal(status, "mask");
  if (!(out.flags() & py::array::c_style))
    broken("floatArray returned an array that is not C-contiguous");
  if (!aligned(out))
    broken("floatArray returned an unaligned array");
  if (arrays::shapeOf(out) != expected)
    broken("floatArray returned another shape than the one asked for");
  if (!asNumpyWould)
    return;
  py::array reference = floatsOf(object, py::tuple(py::cast(expected)));
  if (std::memcmp(reference.data(), out.data(), out.size() * sizeof(float)))
    broken("floatArray's values differ from numpy's cast to float32");
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  py::initialize_interpreter();
  py::dict scope;
  py::exec(kMaker, scope);
  maker = scope["make"];
  floatsOf = scope["floats"];
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 8)
    return 0;
  py::object object, ints;
  try {
    py::tuple made =
        maker(py::bytes(reinterpret_cast<const char *>(data), 8),
              py::bytes(reinterpret_cast<const char *>(data) + 8, size - 8));
    object = made[0];
    ints = made[1];
  } catch (const py::error_already_set &) {
    return 0; // numpy could not make this object: not the conversion's input
  }
  size_t dimensions = data[7] % 4;
  try {
    checkInt64(object, ints, dimensions);
    // A mask of the object's own shape, and of one it does not have.
    py::array asArray = py::array::ensure(object);
    PyErr_Clear();
    if (asArray) {
      std::vector<int64_t> shape = arrays::shapeOf(asArray);
      char kind = asArray.dtype().kind();
      bool numeric = kind == 'f' || kind == 'i' || kind == 'u' || kind == 'b';
      checkFloat(object, shape, numeric);
      shape.push_back(data[7] % 3);
      checkFloat(object, shape, false);
    } else {
      checkFloat(object, {2, 2}, false);
    }
  } catch (const std::exception &error) {
    broken(std::string("the conversion threw: ") + error.what());
  }
  return 0;
}
