//===- Npy.cpp - read and write NumPy .npy files --------------------------===//
//
// The .npy header is a Python dict literal ("{'descr': '<f4',
// 'fortran_order': False, 'shape': (2, 16), }") after a magic string, a
// version and a little-endian length. The parser below accepts exactly the
// literals NumPy writes for the dtypes zrun knows (strings, True/False,
// tuples of integers) and names the first thing it does not understand.
//
//===----------------------------------------------------------------------===//

#include "runtime/tooling/Npy.h"

#include "runtime/plan/ReadableFile.h"
#include "runtime/support/ShapeText.h"
#include "runtime/tooling/Files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>

using namespace zplan;
using namespace zplan::npy;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;

struct DtypeName {
  const char *descr;
  plan::DataType type;
};

// What NumPy writes for each type on a little-endian machine; one-byte
// types carry '|' (no byte order).
constexpr DtypeName kDtypes[] = {
    {"<f4", plan::F32}, {"<f8", plan::F64},  {"<i8", plan::I64},
    {"<i4", plan::I32}, {"|b1", plan::BOOL}, {"|i1", plan::I8},
    {"|u1", plan::U8},  {"<f2", plan::F16},
};

//===----------------------------------------------------------------------===//
// Header parsing
//===----------------------------------------------------------------------===//

/// A cursor over the header dict; each method consumes one token or fails.
class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : text(text) {}

  void skipSpace() {
    while (position < text.size() &&
           (text[position] == ' ' || text[position] == '\t' ||
            text[position] == '\n' || text[position] == '\r'))
      ++position;
  }

  bool consume(char expected) {
    skipSpace();
    if (position < text.size() && text[position] == expected) {
      ++position;
      return true;
    }
    return false;
  }

  bool peek(char expected) {
    skipSpace();
    return position < text.size() && text[position] == expected;
  }

  bool parseString(std::string &out) {
    skipSpace();
    if (position >= text.size() ||
        (text[position] != '\'' && text[position] != '"'))
      return false;
    char quote = text[position++];
    size_t end = text.find(quote, position);
    if (end == std::string_view::npos)
      return false;
    out = std::string(text.substr(position, end - position));
    position = end + 1;
    return true;
  }

  bool parseWord(std::string &out) {
    skipSpace();
    size_t start = position;
    while (position < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[position])) ||
            text[position] == '_'))
      ++position;
    out = std::string(text.substr(start, position - start));
    return !out.empty();
  }

  /// A tuple of non-negative integers: "()", "(5,)", "(2, 16)"; NumPy may
  /// write "2L" on Python 2.
  bool parseShape(std::vector<int64_t> &shape) {
    shape.clear();
    if (!consume('('))
      return false;
    while (!consume(')')) {
      skipSpace();
      size_t start = position;
      uint64_t value = 0;
      while (position < text.size() &&
             std::isdigit(static_cast<unsigned char>(text[position]))) {
        unsigned digit = static_cast<unsigned>(text[position] - '0');
        if (value > (static_cast<uint64_t>(INT64_MAX) - digit) / 10)
          return false;
        value = value * 10 + digit;
        ++position;
      }
      if (position == start)
        return false;
      if (position < text.size() && text[position] == 'L')
        ++position;
      shape.push_back(static_cast<int64_t>(value));
      if (!consume(',') && !peek(')'))
        return false;
    }
    return true;
  }

  /// What is left, for messages.
  std::string rest() const {
    std::string_view tail = text.substr(std::min(position, text.size()));
    return std::string(tail.substr(0, 24));
  }

private:
  std::string_view text;
  size_t position = 0;
};

struct Header {
  std::string descr;
  bool fortranOrder = false;
  std::vector<int64_t> shape;
};

Status parseHeader(std::string_view text, const std::string &subject,
                   Header &header) {
  HeaderParser parser(text);
  auto malformed = [&](std::string_view what) {
    return failure(subject, ": malformed header (", what, " near ",
                   inQuotes(parser.rest()), ")");
  };
  if (!parser.consume('{'))
    return malformed("expected '{'");
  bool sawDescr = false, sawOrder = false, sawShape = false;
  while (!parser.consume('}')) {
    std::string key;
    if (!parser.parseString(key))
      return malformed("expected a quoted key");
    if (!parser.consume(':'))
      return malformed("expected ':'");
    if (key == "descr") {
      // A structured dtype is a list: no plan input or output is one.
      if (parser.peek('['))
        return failure(subject, ": structured dtypes are not supported");
      if (!parser.parseString(header.descr))
        return malformed("expected a dtype string");
      sawDescr = true;
    } else if (key == "fortran_order") {
      std::string word;
      if (!parser.parseWord(word) || (word != "True" && word != "False"))
        return malformed("expected True or False");
      header.fortranOrder = word == "True";
      sawOrder = true;
    } else if (key == "shape") {
      if (!parser.parseShape(header.shape))
        return malformed("expected a tuple of non-negative integers");
      sawShape = true;
    } else {
      return failure(subject, ": unexpected header key ", inQuotes(key));
    }
    if (!parser.consume(',') && !parser.peek('}'))
      return malformed("expected ',' or '}'");
  }
  if (!sawDescr || !sawOrder || !sawShape)
    return failure(subject, ": header lacks ",
                   !sawDescr   ? "'descr'"
                   : !sawOrder ? "'fortran_order'"
                               : "'shape'");
  return Status::success();
}

Status dtypeFromDescr(const std::string &descr, const std::string &subject,
                      plan::DataType &type) {
  for (const DtypeName &entry : kDtypes)
    if (descr == entry.descr) {
      type = entry.type;
      return Status::success();
    }
  // NumPy writes '|i1' for int8 but other tools write '<i1'; byte order
  // means nothing for one byte.
  if (descr.size() == 3 && descr[2] == '1' &&
      (descr[0] == '<' || descr[0] == '=' || descr[0] == '>')) {
    std::string oneByte = "|" + descr.substr(1);
    for (const DtypeName &entry : kDtypes)
      if (oneByte == entry.descr) {
        type = entry.type;
        return Status::success();
      }
  }
  if (!descr.empty() && descr[0] == '>')
    return failure(subject, ": big-endian dtype ", inQuotes(descr),
                   " is not supported; save it as little-endian (",
                   "array.astype(array.dtype.newbyteorder('<')))");
  return failure(subject, ": unsupported dtype ", inQuotes(descr),
                 "; zrun reads '<f4', '<f8', '<i8', '<i4', '|b1', '|i1', "
                 "'|u1', '<f2'");
}

} // namespace

//===----------------------------------------------------------------------===//
// Arrays
//===----------------------------------------------------------------------===//

uint64_t Array::numElements() const {
  uint64_t count = 1;
  for (int64_t dimension : shape)
    count *= static_cast<uint64_t>(dimension);
  return count;
}

std::string zplan::npy::descrOf(plan::DataType type) {
  for (const DtypeName &entry : kDtypes)
    if (entry.type == type)
      return entry.descr;
  return "";
}

namespace {

/// The fixed start of a .npy file: magic, version, header length.
constexpr size_t kPreambleBytes = kMagicBytes + 2 + 4;

/// Where the header text lies, from the preamble at the start of `bytes`
/// (which may hold more). Fails for a file that is not .npy or too short to
/// hold its preamble.
Status parsePreamble(std::string_view bytes, const std::string &subject,
                     uint64_t &headerAt, uint64_t &headerLength) {
  if (bytes.size() < kMagicBytes + 2 ||
      bytes.substr(0, kMagicBytes) != std::string_view(kMagic, kMagicBytes))
    return failure(subject, " is not a .npy file (no \\x93NUMPY magic)");
  uint8_t major = static_cast<uint8_t>(bytes[kMagicBytes]);
  uint8_t minor = static_cast<uint8_t>(bytes[kMagicBytes + 1]);
  size_t lengthBytes;
  if (major == 1)
    lengthBytes = 2;
  else if (major == 2 || major == 3)
    lengthBytes = 4;
  else
    return failure(subject, " has .npy format version ", int(major), ".",
                   int(minor), "; zrun reads versions 1.0, 2.0 and 3.0");
  size_t lengthAt = kMagicBytes + 2;
  if (bytes.size() < lengthAt + lengthBytes)
    return failure(subject, " is truncated inside its header");
  headerLength = 0;
  for (size_t i = 0; i < lengthBytes; ++i)
    headerLength |=
        static_cast<uint64_t>(static_cast<uint8_t>(bytes[lengthAt + i]))
        << (8 * i);
  headerAt = lengthAt + lengthBytes;
  return Status::success();
}

/// Parses the header text into `array`'s dtype and shape (its data is left
/// alone) and the number of data bytes they declare.
Status parseDeclaration(std::string_view headerText, const std::string &subject,
                        Array &array, uint64_t &dataBytes) {
  Header header;
  if (Status status = parseHeader(headerText, subject, header); !status.ok())
    return status;
  plan::DataType type;
  if (Status status = dtypeFromDescr(header.descr, subject, type); !status.ok())
    return status;
  // A Fortran-order array of rank < 2 has the same bytes as a C-order one.
  int bigDimensions = 0;
  for (int64_t dimension : header.shape)
    bigDimensions += dimension > 1;
  if (header.fortranOrder && bigDimensions > 1)
    return failure(subject, " is in Fortran order; save it in C order ",
                   "(numpy.ascontiguousarray)");
  uint64_t elements = 1;
  for (int64_t dimension : header.shape)
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dimension),
                               &elements))
      return failure(subject, ": shape ", shapeText(header.shape),
                     " overflows 64 bits");
  if (__builtin_mul_overflow(elements, plan::dataTypeSize(type), &dataBytes))
    return failure(subject, ": shape ", shapeText(header.shape),
                   " overflows 64 bits");
  array.dtype = type;
  array.shape = std::move(header.shape);
  return Status::success();
}

/// The data after the header must be exactly what the header declares.
Status checkDataBytes(const std::string &subject, const Array &declared,
                      uint64_t present, uint64_t needed) {
  if (present == needed)
    return Status::success();
  return failure(subject, " has ", present, " bytes of data after its ",
                 "header, but shape ", shapeText(declared.shape), " of ",
                 inQuotes(descrOf(declared.dtype)), " needs ", needed,
                 present < needed ? " (truncated)" : "");
}

} // namespace

Status zplan::npy::parseNpy(std::string_view bytes, std::string_view sourceName,
                            Array &array) {
  std::string subject = "npy file " + inQuotes(sourceName);
  uint64_t headerAt, headerLength;
  if (Status status = parsePreamble(bytes, subject, headerAt, headerLength);
      !status.ok())
    return status;
  if (headerLength > bytes.size() - headerAt)
    return failure(subject, " is truncated inside its header (header of ",
                   headerLength, " bytes, file of ", bytes.size(), ")");
  Array declared;
  uint64_t dataBytes;
  if (Status status = parseDeclaration(bytes.substr(headerAt, headerLength),
                                       subject, declared, dataBytes);
      !status.ok())
    return status;
  uint64_t dataAt = headerAt + headerLength;
  if (Status status =
          checkDataBytes(subject, declared, bytes.size() - dataAt, dataBytes);
      !status.ok())
    return status;
  declared.data.assign(bytes.begin() + dataAt, bytes.end());
  array = std::move(declared);
  return Status::success();
}

Status zplan::npy::readNpy(const std::string &path, Array &array,
                           const HeaderCheck &checkHeader) {
  plan::ReadableFile file;
  if (Status status = file.open(path, "npy file"); !status.ok())
    return status;
  std::string subject = file.subject();
  // Nothing is read that the header and the file's size do not both
  // declare: the preamble, then a header of bounded length, then exactly
  // the data the header's shape and dtype need.
  std::string preamble(std::min<uint64_t>(file.bytes(), kPreambleBytes), '\0');
  if (Status status = file.read(0, preamble.size(), preamble.data());
      !status.ok())
    return status;
  uint64_t headerAt, headerLength;
  if (Status status = parsePreamble(preamble, subject, headerAt, headerLength);
      !status.ok())
    return status;
  if (headerLength > file.bytes() - headerAt)
    return failure(subject, " is truncated inside its header (header of ",
                   headerLength, " bytes, file of ", file.bytes(), ")");
  if (headerLength > kMaxHeaderBytes)
    return failure(subject, " has a header of ", headerLength,
                   " bytes; zrun reads headers of up to ", kMaxHeaderBytes);
  std::string headerText(headerLength, '\0');
  if (Status status = file.read(headerAt, headerLength, headerText.data());
      !status.ok())
    return status;
  Array declared;
  uint64_t dataBytes;
  if (Status status =
          parseDeclaration(headerText, subject, declared, dataBytes);
      !status.ok())
    return status;
  uint64_t dataAt = headerAt + headerLength;
  if (Status status =
          checkDataBytes(subject, declared, file.bytes() - dataAt, dataBytes);
      !status.ok())
    return status;
  if (checkHeader)
    if (Status status = checkHeader(declared); !status.ok())
      return status;
  declared.data.resize(dataBytes);
  if (Status status = file.read(dataAt, dataBytes, declared.data.data());
      !status.ok())
    return status;
  array = std::move(declared);
  return Status::success();
}

Status zplan::npy::encodeNpy(plan::DataType dtype,
                             const std::vector<int64_t> &shape,
                             const void *data, uint64_t bytes,
                             std::string &out) {
  std::string descr = descrOf(dtype);
  if (descr.empty())
    return failure("cannot write ", plan::DataType_Name(dtype),
                   " data to a .npy file");
  uint64_t elements = 1;
  for (int64_t dimension : shape) {
    if (dimension < 0)
      return failure("cannot write shape ", shapeText(shape),
                     ": negative dimension");
    elements *= static_cast<uint64_t>(dimension);
  }
  if (elements * plan::dataTypeSize(dtype) != bytes)
    return failure("cannot write ", bytes, " bytes as shape ", shapeText(shape),
                   " of ", inQuotes(descr));

  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, " + "'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += (i ? ", " : "") + std::to_string(shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }";

  // Pad with spaces and a final newline so that the data starts on a
  // 64-byte boundary, as NumPy does.
  auto paddedHeader = [&](size_t prefixBytes) {
    size_t unpadded = prefixBytes + dict.size() + 1;
    size_t padded = (unpadded + 63) / 64 * 64;
    return dict + std::string(padded - unpadded, ' ') + "\n";
  };
  std::string header = paddedHeader(kMagicBytes + 2 + 2);
  bool version2 = header.size() > 0xFFFF;
  if (version2)
    header = paddedHeader(kMagicBytes + 2 + 4);

  out.clear();
  out.reserve(kMagicBytes + 6 + header.size() + bytes);
  out.append(kMagic, kMagicBytes);
  out.push_back(static_cast<char>(version2 ? 2 : 1));
  out.push_back(0);
  uint64_t length = header.size();
  for (size_t i = 0; i < (version2 ? 4u : 2u); ++i)
    out.push_back(static_cast<char>((length >> (8 * i)) & 0xFF));
  out += header;
  out.append(static_cast<const char *>(data), bytes);
  return Status::success();
}

Status zplan::npy::writeNpy(const std::string &path, plan::DataType dtype,
                            const std::vector<int64_t> &shape, const void *data,
                            uint64_t bytes) {
  std::string encoded;
  if (Status status = encodeNpy(dtype, shape, data, bytes, encoded);
      !status.ok())
    return status;
  return tooling::writeFileAtomically(path, encoded,
                                      "npy file " + inQuotes(path));
}

Status zplan::npy::writeNpy(const std::string &path, const Array &array) {
  return writeNpy(path, array.dtype, array.shape, array.data.data(),
                  array.data.size());
}
