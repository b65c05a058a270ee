//===- Npy.cpp - read and write NumPy .npy files --------------------------===//
//
// The .npy header is a Python dict literal ("{'descr': '<f4',
// 'fortran_order': False, 'shape': (2, 16), }") after a magic string, a
// version and a little-endian length. The parser below accepts exactly the
// literals NumPy writes for the dtypes zrun knows (strings, True/False,
// tuples of integers) and names the first thing it does not understand.
//
//===----------------------------------------------------------------------===//

#include "runtime/Npy.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace zplan;
using namespace zplan::npy;
using plan::Status;
using plan::failure;
using plan::inQuotes;

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

std::string zplan::npy::shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

Status zplan::npy::parseNpy(std::string_view bytes, std::string_view sourceName,
                            Array &array) {
  std::string subject = "npy file " + inQuotes(sourceName);
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
  uint64_t headerLength = 0;
  for (size_t i = 0; i < lengthBytes; ++i)
    headerLength |=
        static_cast<uint64_t>(static_cast<uint8_t>(bytes[lengthAt + i]))
        << (8 * i);
  size_t dataAt = lengthAt + lengthBytes;
  if (headerLength > bytes.size() - dataAt)
    return failure(subject, " is truncated inside its header (header of ",
                   headerLength, " bytes, file of ", bytes.size(), ")");
  std::string_view headerText = bytes.substr(dataAt, headerLength);
  dataAt += headerLength;

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
  uint64_t dataBytes;
  if (__builtin_mul_overflow(elements, plan::dataTypeSize(type), &dataBytes))
    return failure(subject, ": shape ", shapeText(header.shape),
                   " overflows 64 bits");
  uint64_t present = bytes.size() - dataAt;
  if (present != dataBytes)
    return failure(subject, " has ", present, " bytes of data after its ",
                   "header, but shape ", shapeText(header.shape), " of ",
                   inQuotes(header.descr), " needs ", dataBytes,
                   present < dataBytes ? " (truncated)" : "");

  array.dtype = type;
  array.shape = std::move(header.shape);
  array.data.assign(bytes.begin() + dataAt, bytes.end());
  return Status::success();
}

Status zplan::npy::readNpy(const std::string &path, Array &array) {
  std::error_code error;
  if (std::filesystem::is_directory(path, error))
    return failure("npy file ", inQuotes(path), " is a directory");
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return failure("cannot open npy file ", inQuotes(path), ": ",
                   std::strerror(errno));
  std::ostringstream contents;
  contents << file.rdbuf();
  if (file.bad())
    return failure("cannot read npy file ", inQuotes(path));
  std::string bytes = contents.str();
  return parseNpy(bytes, path, array);
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
  return writeFileAtomically(path, encoded, "npy file " + inQuotes(path));
}

Status zplan::npy::writeNpy(const std::string &path, const Array &array) {
  return writeNpy(path, array.dtype, array.shape, array.data.data(),
                  array.data.size());
}

//===----------------------------------------------------------------------===//
// Staged files
//===----------------------------------------------------------------------===//

StagedFile::StagedFile(StagedFile &&other) noexcept
    : finalPath(std::move(other.finalPath)),
      temporaryPath(std::move(other.temporaryPath)),
      description(std::move(other.description)) {
  other.temporaryPath.clear();
}

StagedFile &StagedFile::operator=(StagedFile &&other) noexcept {
  if (this != &other) {
    discard();
    finalPath = std::move(other.finalPath);
    temporaryPath = std::move(other.temporaryPath);
    description = std::move(other.description);
    other.temporaryPath.clear();
  }
  return *this;
}

StagedFile::~StagedFile() { discard(); }

void StagedFile::discard() {
  if (!temporaryPath.empty())
    ::unlink(temporaryPath.c_str());
  temporaryPath.clear();
}

Status StagedFile::stage(const std::string &path, std::string_view bytes,
                         std::string_view what) {
  discard();
  finalPath = path;
  description = std::string(what);
  std::filesystem::path target(path);
  std::filesystem::path directory = target.parent_path();
  // A hidden name in the same directory: rename() is atomic only within
  // one file system.
  static std::atomic<unsigned> counter{0};
  std::string name = "." + target.filename().string() + ".zrun-" +
                     std::to_string(::getpid()) + "-" +
                     std::to_string(counter++) + ".tmp";
  std::string temporary = (directory / name).string();
  int descriptor =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (descriptor < 0)
    return failure("cannot write ", description, ": cannot create ",
                   inQuotes(temporary), ": ", std::strerror(errno));
  temporaryPath = temporary;
  const char *cursor = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t written = ::write(descriptor, cursor, left);
    if (written < 0 && errno == EINTR)
      continue;
    if (written < 0) {
      int code = errno;
      ::close(descriptor);
      discard();
      return failure("cannot write ", description, ": ", std::strerror(code));
    }
    cursor += written;
    left -= static_cast<size_t>(written);
  }
  if (::fsync(descriptor) != 0 || ::close(descriptor) != 0) {
    int code = errno;
    discard();
    return failure("cannot write ", description, ": ", std::strerror(code));
  }
  return Status::success();
}

Status StagedFile::commit() {
  if (temporaryPath.empty())
    return failure("cannot write ", description, ": nothing was staged");
  if (::rename(temporaryPath.c_str(), finalPath.c_str()) != 0) {
    int code = errno;
    discard();
    return failure("cannot write ", description, ": cannot rename onto ",
                   inQuotes(finalPath), ": ", std::strerror(code));
  }
  temporaryPath.clear();
  return Status::success();
}

Status zplan::npy::writeFileAtomically(const std::string &path,
                                       std::string_view bytes,
                                       std::string_view what) {
  StagedFile file;
  if (Status status = file.stage(path, bytes, what); !status.ok())
    return status;
  return file.commit();
}
