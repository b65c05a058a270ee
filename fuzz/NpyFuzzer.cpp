//===- NpyFuzzer.cpp - libFuzzer harness for the .npy reader --------------===//
//
// Bytes -> parseNpy. zrun reads every --input through it, so it must refuse
// any bytes it cannot read with a message and never read past them. An
// accepted array must also survive a round trip: encodeNpy() of it parses
// back to the same dtype, shape and data (when its dtype has a .npy name
// zrun writes); a difference is a finding.
//
//===----------------------------------------------------------------------===//

#include "runtime/tooling/Npy.h"

#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  zplan::npy::Array array;
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  if (!zplan::npy::parseNpy(bytes, "fuzz.npy", array).ok())
    return 0;
  std::string encoded;
  if (!zplan::npy::encodeNpy(array.dtype, array.shape, array.data.data(),
                             array.data.size(), encoded)
           .ok())
    return 0;
  zplan::npy::Array again;
  zplan::Status status = zplan::npy::parseNpy(encoded, "again", again);
  if (!status.ok()) {
    std::fprintf(stderr,
                 "zplan-fuzz-npy: an encoded array does not parse: %s\n",
                 status.message().c_str());
    std::abort();
  }
  if (again.dtype != array.dtype || again.shape != array.shape ||
      again.data != array.data) {
    std::fprintf(stderr, "zplan-fuzz-npy: an array changed in a round trip "
                         "through encodeNpy\n");
    std::abort();
  }
  return 0;
}
