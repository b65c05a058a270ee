//===- NpyHeader.cpp - the header of a .npy file `zrun train` reads -------===//

#include "runtime/train/NpyHeader.h"

#include <cctype>
#include <cstring>
#include <string_view>

using namespace zplan;
using namespace zplan::train;

namespace {

/// The text after `'key':` in a .npy header dictionary, with leading spaces
/// skipped, or npos.
size_t valueOf(std::string_view header, std::string_view key) {
  std::string quoted = "'" + std::string(key) + "'";
  size_t at = header.find(quoted);
  if (at == std::string_view::npos)
    return at;
  at += quoted.size();
  while (at < header.size() && header[at] == ' ')
    ++at;
  if (at >= header.size() || header[at] != ':')
    return std::string_view::npos;
  ++at;
  while (at < header.size() && header[at] == ' ')
    ++at;
  return at;
}

} // namespace

Status zplan::train::parseNpyHeader(const plan::ReadableFile &file,
                                    NpyHeader &result) {
  std::string subject = file.subject();
  char preamble[12];
  if (file.bytes() < 10)
    return failure(subject, " is not a .npy file (", file.bytes(),
                   " bytes, shorter than a .npy preamble)");
  ZR_RETURN_IF_ERROR(file.read(0, file.bytes() < 12 ? 10 : 12, preamble));
  if (std::memcmp(preamble, "\x93NUMPY", 6) != 0)
    return failure(subject, " is not a .npy file (no \\x93NUMPY magic)");
  auto byte = [&](int index) {
    return static_cast<uint64_t>(static_cast<uint8_t>(preamble[index]));
  };
  uint64_t major = byte(6), headerStart, headerBytes;
  if (major == 1) {
    headerBytes = byte(8) | byte(9) << 8;
    headerStart = 10;
  } else if (major == 2 || major == 3) {
    if (file.bytes() < 12)
      return failure(subject, " ends inside its .npy preamble");
    headerBytes = byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24;
    headerStart = 12;
  } else {
    return failure(subject, " has .npy format version ", major,
                   "; versions 1, 2 and 3 are read");
  }
  // Token and row headers are a few dozen bytes; a huge one is a broken
  // file.
  if (headerBytes > (1u << 20) || headerStart + headerBytes > file.bytes())
    return failure(subject, " declares a .npy header of ", headerBytes,
                   " bytes, which the file (", file.bytes(),
                   " bytes) does not hold");
  std::string header(headerBytes, '\0');
  ZR_RETURN_IF_ERROR(file.read(headerStart, headerBytes, header.data()));
  result.dataOffset = headerStart + headerBytes;

  size_t at = valueOf(header, "descr");
  if (at == std::string::npos || at >= header.size() || header[at] != '\'')
    return failure(subject, " has no 'descr' in its .npy header");
  size_t close = header.find('\'', at + 1);
  if (close == std::string::npos)
    return failure(subject, " has a malformed 'descr' in its .npy header");
  result.descr = header.substr(at + 1, close - at - 1);

  at = valueOf(header, "fortran_order");
  if (at == std::string::npos)
    return failure(subject, " has no 'fortran_order' in its .npy header");
  if (header.compare(at, 4, "True") == 0)
    return failure(subject,
                   " is in Fortran order; zrun train reads C-order arrays");

  at = valueOf(header, "shape");
  if (at == std::string::npos || at >= header.size() || header[at] != '(')
    return failure(subject, " has no 'shape' in its .npy header");
  close = header.find(')', at);
  if (close == std::string::npos)
    return failure(subject, " has a malformed 'shape' in its .npy header");
  result.shapeInHeader = header.substr(at, close - at + 1);
  const std::string &shape = result.shapeInHeader;
  result.shape.clear();
  size_t position = at + 1;
  while (position < close) {
    while (position < close &&
           (header[position] == ' ' || header[position] == ','))
      ++position;
    if (position >= close)
      break;
    if (!std::isdigit(static_cast<unsigned char>(header[position])))
      return failure(subject, " has a malformed shape ", shape,
                     " in its .npy header");
    uint64_t value = 0;
    while (position < close &&
           std::isdigit(static_cast<unsigned char>(header[position]))) {
      uint64_t digit = static_cast<uint64_t>(header[position] - '0');
      if (value > (UINT64_MAX - digit) / 10)
        return failure(subject, " has a shape ", shape, " past 2^64");
      value = value * 10 + digit;
      ++position;
    }
    result.shape.push_back(value);
  }
  return Status::success();
}

std::string zplan::train::npyTypeName(const std::string &descr) {
  static const char *const kNames[][2] = {{"|b1", "bool"},
                                          {"|i1", "int8"},
                                          {"|u1", "uint8"},
                                          {"<i2", "int16"},
                                          {"<u2", "uint16"},
                                          {"<i4", "int32"},
                                          {"<u4", "uint32"},
                                          {"<i8", "int64"},
                                          {"<u8", "uint64"},
                                          {"<f2", "float16"},
                                          {"<f4", "float32"},
                                          {"<f8", "float64"},
                                          {">i2", "big-endian int16"},
                                          {">i4", "big-endian int32"},
                                          {">i8", "big-endian int64"}};
  for (const auto &[spelled, name] : kNames)
    if (descr == spelled)
      return name;
  return "dtype " + inQuotes(descr);
}

bool zplan::train::isRowFile(const std::string &path) {
  std::string_view name = path;
  if (name.size() < 4 || name.substr(name.size() - 4) != ".npy")
    return false;
  plan::ReadableFile file;
  NpyHeader header;
  return file.open(path, "data file").ok() &&
         parseNpyHeader(file, header).ok() && header.shape.size() == 2;
}
