//===- TokenData.h - the flat token file `zrun train --data` reads -------===//
//
// A token stream is one flat array of token ids (`zrun train --data`): a raw
// `.bin` of little-endian uint16 (the default) or uint32 (`--data-dtype
// uint32`), or a 1-D `.npy` of uint16, uint32, int32 or int64 (a 2-D `.npy`
// is rows instead: RowData.h). A run reads a
// few rows of T tokens per micro-step at offsets spread over the whole file, so
// the file is never read whole: open() checks its size and header only, and
// readRow() preads one row. The checks name the file and the offending
// offset: a size that is not a whole number of tokens, fewer than T + 1
// tokens (the sampler draws offsets in [0, count - T)), and, as rows are
// read, a negative token or one outside the vocabulary.
//
// The .npy header is parsed by NpyHeader.h, not by runtime/tooling/Npy:
// that library sits above this one (ZplanTooling links ZplanTrain), reads
// whole files, and knows no unsigned dtypes wider than a byte.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_TOKENDATA_H
#define ZPLAN_RUNTIME_TRAIN_TOKENDATA_H

#include "runtime/plan/ReadableFile.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace zplan::train {

/// How one token is stored in the file.
enum class TokenType { U16, U32, I32, I64 };

/// "uint16", "uint32", "int32", "int64".
std::string_view tokenTypeName(TokenType type);
/// Bytes per token.
uint64_t tokenTypeBytes(TokenType type);
/// The token at `at`, stored little-endian as `type`.
int64_t tokenAt(TokenType type, const uint8_t *at);
/// Parses `--data-dtype`: "uint16" or "uint32" (the raw formats); anything
/// else is an error naming the flag's accepted values.
Status parseRawTokenType(std::string_view text, TokenType &type);

struct TokenDataOptions {
  /// The element type of a raw (non-.npy) file; uint16 when not given. For a
  /// .npy file the header decides, and a given type must agree with it.
  std::optional<TokenType> rawType;
  /// Tokens per row (T, from the compiled input_ids shape); the file must
  /// hold at least T + 1 tokens.
  uint64_t rowTokens = 1;
  /// When non-zero, every token read must be < vocabSize.
  uint64_t vocabSize = 0;
};

/// An open token file. A `.npy` path (by its extension) is parsed as NumPy;
/// any other path is raw tokens.
class TokenData {
public:
  /// Opens and checks `path` (size, header, count >= rowTokens + 1); reads
  /// no token.
  Status open(const std::string &path, const TokenDataOptions &options);

  /// Number of tokens in the file.
  uint64_t size() const { return tokenCount; }
  TokenType type() const { return tokenType; }
  const std::string &path() const { return file.path(); }

  /// Reads tokens [offset, offset + count) into `destination` as int64,
  /// checking each against the vocabulary (and for negative values in a
  /// signed file); the error names the file and the token's offset.
  Status readRow(uint64_t offset, uint64_t count, int64_t *destination) const;

private:
  plan::ReadableFile file;
  TokenDataOptions options;
  TokenType tokenType = TokenType::U16;
  /// Byte offset of token 0 (the .npy header's length; 0 for raw files).
  uint64_t dataOffset = 0;
  uint64_t tokenCount = 0;
};

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_TOKENDATA_H
