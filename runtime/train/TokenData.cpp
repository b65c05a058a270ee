//===- TokenData.cpp - the flat token file `zrun train --data` reads -----===//

#include "runtime/train/TokenData.h"

#include <cctype>
#include <cstring>
#include <vector>

using namespace zplan;
using namespace zplan::train;

std::string_view zplan::train::tokenTypeName(TokenType type) {
  switch (type) {
  case TokenType::U16:
    return "uint16";
  case TokenType::U32:
    return "uint32";
  case TokenType::I32:
    return "int32";
  case TokenType::I64:
    return "int64";
  }
  return "?";
}

uint64_t zplan::train::tokenTypeBytes(TokenType type) {
  switch (type) {
  case TokenType::U16:
    return 2;
  case TokenType::U32:
  case TokenType::I32:
    return 4;
  case TokenType::I64:
    return 8;
  }
  return 0;
}

Status zplan::train::parseRawTokenType(std::string_view text, TokenType &type) {
  if (text == "uint16")
    type = TokenType::U16;
  else if (text == "uint32")
    type = TokenType::U32;
  else
    return failure("--data-dtype takes uint16 or uint32, got ", inQuotes(text));
  return Status::success();
}

namespace {

bool endsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() &&
         text.substr(text.size() - suffix.size()) == suffix;
}

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

/// Parses the header of a 1-D .npy token array: its dtype, length and the
/// byte offset of its data.
Status parseNpyHeader(const plan::ReadableFile &file, TokenType &type,
                      uint64_t &count, uint64_t &dataOffset) {
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
  // Token headers are a few dozen bytes; a huge one is a broken file.
  if (headerBytes > (1u << 20) || headerStart + headerBytes > file.bytes())
    return failure(subject, " declares a .npy header of ", headerBytes,
                   " bytes, which the file (", file.bytes(),
                   " bytes) does not hold");
  std::string header(headerBytes, '\0');
  ZR_RETURN_IF_ERROR(file.read(headerStart, headerBytes, header.data()));
  dataOffset = headerStart + headerBytes;

  size_t at = valueOf(header, "descr");
  if (at == std::string::npos || at >= header.size() || header[at] != '\'')
    return failure(subject, " has no 'descr' in its .npy header");
  size_t close = header.find('\'', at + 1);
  if (close == std::string::npos)
    return failure(subject, " has a malformed 'descr' in its .npy header");
  std::string descr = header.substr(at + 1, close - at - 1);
  if (descr == "<u2")
    type = TokenType::U16;
  else if (descr == "<u4")
    type = TokenType::U32;
  else if (descr == "<i4")
    type = TokenType::I32;
  else if (descr == "<i8")
    type = TokenType::I64;
  else
    return failure(subject, " holds dtype ", inQuotes(descr),
                   "; token files are uint16, uint32, int32 or int64 "
                   "(little-endian)");

  at = valueOf(header, "fortran_order");
  if (at == std::string::npos)
    return failure(subject, " has no 'fortran_order' in its .npy header");
  if (header.compare(at, 4, "True") == 0)
    return failure(subject, " is in Fortran order; token files are C order");

  at = valueOf(header, "shape");
  if (at == std::string::npos || at >= header.size() || header[at] != '(')
    return failure(subject, " has no 'shape' in its .npy header");
  close = header.find(')', at);
  if (close == std::string::npos)
    return failure(subject, " has a malformed 'shape' in its .npy header");
  std::string shape = header.substr(at, close - at + 1);
  std::vector<uint64_t> dimensions;
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
    dimensions.push_back(value);
  }
  if (dimensions.size() != 1)
    return failure(subject, " has shape ", shape,
                   "; a token file is a 1-D array");
  count = dimensions[0];
  uint64_t dataBytes;
  if (__builtin_mul_overflow(count, tokenTypeBytes(type), &dataBytes) ||
      dataOffset + dataBytes != file.bytes())
    return failure(subject, " is ", file.bytes(), " bytes, but its header ",
                   "declares ", count, " tokens of ", tokenTypeName(type),
                   " after ", dataOffset, " header bytes");
  return Status::success();
}

} // namespace

Status TokenData::open(const std::string &path,
                       const TokenDataOptions &givenOptions) {
  options = givenOptions;
  bool npy = endsWith(path, ".npy");
  ZR_RETURN_IF_ERROR(file.open(path, "token file"));
  if (npy) {
    ZR_RETURN_IF_ERROR(parseNpyHeader(file, tokenType, tokenCount, dataOffset));
    if (options.rawType && *options.rawType != tokenType)
      return failure(file.subject(), " holds ", tokenTypeName(tokenType),
                     " tokens, but --data-dtype says ",
                     tokenTypeName(*options.rawType));
  } else {
    tokenType = options.rawType.value_or(TokenType::U16);
    dataOffset = 0;
    uint64_t width = tokenTypeBytes(tokenType);
    if (file.bytes() % width != 0)
      return failure(file.subject(), " is ", file.bytes(),
                     " bytes, not a whole number of ", tokenTypeName(tokenType),
                     " tokens (", width, " bytes each); its last ",
                     file.bytes() % width, " bytes start at byte ",
                     file.bytes() - file.bytes() % width);
    tokenCount = file.bytes() / width;
  }
  if (options.rowTokens == 0)
    return failure("a row of training data needs at least one token");
  if (tokenCount < options.rowTokens + 1)
    return failure(file.subject(), " holds ", tokenCount, " tokens; a row of ",
                   options.rowTokens, " tokens needs at least ",
                   options.rowTokens + 1);
  return Status::success();
}

Status TokenData::readRow(uint64_t offset, uint64_t count,
                          int64_t *destination) const {
  uint64_t end;
  if (__builtin_add_overflow(offset, count, &end) || end > tokenCount)
    return failure("cannot read tokens [", offset, ", ", offset + count,
                   ") of ", file.subject(), ": it holds ", tokenCount,
                   " tokens");
  uint64_t width = tokenTypeBytes(tokenType);
  std::vector<uint8_t> raw(count * width);
  ZR_RETURN_IF_ERROR(
      file.read(dataOffset + offset * width, raw.size(), raw.data()));
  for (uint64_t i = 0; i < count; ++i) {
    const uint8_t *at = raw.data() + i * width;
    int64_t token = 0;
    switch (tokenType) {
    case TokenType::U16: {
      uint16_t value;
      std::memcpy(&value, at, 2);
      token = value;
      break;
    }
    case TokenType::U32: {
      uint32_t value;
      std::memcpy(&value, at, 4);
      token = value;
      break;
    }
    case TokenType::I32: {
      int32_t value;
      std::memcpy(&value, at, 4);
      token = value;
      break;
    }
    case TokenType::I64:
      std::memcpy(&token, at, 8);
      break;
    }
    if (token < 0)
      return failure(file.subject(), ": token ", offset + i, " (byte ",
                     dataOffset + (offset + i) * width, ") is ", token,
                     "; token ids are non-negative");
    if (options.vocabSize != 0 &&
        static_cast<uint64_t>(token) >= options.vocabSize)
      return failure(file.subject(), ": token ", offset + i, " (byte ",
                     dataOffset + (offset + i) * width, ") is ", token,
                     ", outside the model's vocabulary of ", options.vocabSize);
    destination[i] = token;
  }
  return Status::success();
}
