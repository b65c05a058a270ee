//===- TokenData.cpp - the flat token file `zrun train --data` reads -----===//

#include "runtime/train/TokenData.h"
#include "runtime/train/NpyHeader.h"

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

int64_t zplan::train::tokenAt(TokenType type, const uint8_t *at) {
  switch (type) {
  case TokenType::U16: {
    uint16_t value;
    std::memcpy(&value, at, 2);
    return value;
  }
  case TokenType::U32: {
    uint32_t value;
    std::memcpy(&value, at, 4);
    return value;
  }
  case TokenType::I32: {
    int32_t value;
    std::memcpy(&value, at, 4);
    return value;
  }
  case TokenType::I64: {
    int64_t value;
    std::memcpy(&value, at, 8);
    return value;
  }
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

/// The type, length and data offset of a 1-D .npy token array.
Status parseTokenHeader(const plan::ReadableFile &file, TokenType &type,
                        uint64_t &count, uint64_t &dataOffset) {
  std::string subject = file.subject();
  NpyHeader header;
  ZR_RETURN_IF_ERROR(parseNpyHeader(file, header));
  dataOffset = header.dataOffset;
  const std::string &descr = header.descr;
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
  if (header.shape.size() != 1)
    return failure(subject, " has shape ", header.shapeInHeader,
                   "; a token stream is a 1-D array (and rows a 2-D one, "
                   "[rows, tokens])");
  count = header.shape[0];
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
    ZR_RETURN_IF_ERROR(
        parseTokenHeader(file, tokenType, tokenCount, dataOffset));
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
    int64_t token = tokenAt(tokenType, raw.data() + i * width);
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
