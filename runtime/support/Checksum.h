//===- Checksum.h - the one checksum of plans, weights and --check --------===//
//
// zcc's writer stamps the plan body, every weights section and every constant
// with this checksum; zrun's loader recomputes it over the bytes it has just
// read, and --check over shards and constants between instructions. One
// implementation serves all three, so that a file written by one is
// verified by the other bit for bit (test/zrun/plan_file.py mirrors it for
// the tests that rewrite plans).
//
// The sum is position-sensitive: each little-endian 8-byte word is mixed with
// its index, so a changed, swapped or zeroed word changes it. Every step
// that a single flipped bit passes through is a bijection (xor, multiply by
// an odd constant, xor-shift), so any single-bit change, and any change
// confined to one word, always changes the sum. It is not cryptographic: it
// finds corruption and mix-ups, not forgery.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SUPPORT_CHECKSUM_H
#define ZPLAN_RUNTIME_SUPPORT_CHECKSUM_H

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace zplan {

/// The checksum of a byte stream fed in pieces of any size; the result does
/// not depend on how the stream was cut.
class Checksum {
public:
  /// Adds `bytes` bytes at `data` to the stream.
  void update(const void *data, uint64_t bytes) {
    const auto *cursor = static_cast<const uint8_t *>(data);
    total += bytes;
    // Complete a word left over from the last piece.
    if (pendingBytes > 0) {
      uint64_t take = 8 - pendingBytes < bytes ? 8 - pendingBytes : bytes;
      std::memcpy(pending + pendingBytes, cursor, take);
      pendingBytes += take;
      cursor += take;
      bytes -= take;
      if (pendingBytes < 8)
        return;
      addWord(pending);
      pendingBytes = 0;
    }
    for (; bytes >= 8; bytes -= 8, cursor += 8)
      addWord(cursor);
    std::memcpy(pending, cursor, bytes);
    pendingBytes = bytes;
  }

  /// The checksum of everything added so far.
  uint64_t value() const {
    uint64_t result = sum + total * kMultiplier;
    for (uint64_t i = 0; i < pendingBytes; ++i)
      result = (result ^ pending[i]) * 0x100000001B3ull;
    return result;
  }

private:
  static constexpr uint64_t kMultiplier = 0x9E3779B97F4A7C15ull;

  void addWord(const uint8_t *bytes) {
    uint64_t word;
    std::memcpy(&word, bytes, 8);
    uint64_t mixed = (word ^ (words++ * kMultiplier)) * 0xBF58476D1CE4E5B9ull;
    sum += mixed ^ (mixed >> 31);
  }

  uint64_t sum = 0;
  uint64_t words = 0;
  uint64_t total = 0;
  uint8_t pending[8] = {};
  uint64_t pendingBytes = 0;
};

/// The checksum of `bytes` bytes at `data`, in one call.
inline uint64_t checksum(const void *data, uint64_t bytes) {
  Checksum sum;
  sum.update(data, bytes);
  return sum.value();
}

/// "0x0123456789abcdef", as messages print checksums and plan identities.
inline std::string checksumText(uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof(text), "0x%016llx",
                static_cast<unsigned long long>(value));
  return text;
}

} // namespace zplan

#endif // ZPLAN_RUNTIME_SUPPORT_CHECKSUM_H
