//===- TrainDataTest.cpp - token files and batch selection for training --===//
//
// TokenData reads rows of a flat token file (raw uint16/uint32 or a 1-D
// .npy) and refuses, naming the file and offset, what cannot be training
// data; BatchSampler picks rows by BatchSampler.h's formula, whose expected
// values here were computed by an independent Python implementation, so a
// change to the formula breaks this test, not only the Python oracle.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/BatchSampler.h"
#include "runtime/train/TokenData.h"

#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

using namespace zplan;
using namespace zplan::train;
using zplan::testing::contains;
using zplan::testing::errorOf;

namespace {

class TrainData : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/zplan-train-data-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    directory = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(directory); }

  std::string write(const std::string &name, const std::string &bytes) {
    std::string path = directory + "/" + name;
    FILE *file = std::fopen(path.c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), file);
    std::fclose(file);
    return path;
  }

  template <typename T> static std::string bytesOf(const std::vector<T> &v) {
    return std::string(reinterpret_cast<const char *>(v.data()),
                       v.size() * sizeof(T));
  }

  /// A version 1.0 .npy file with `descr`, `shape` text and `data`.
  std::string writeNpy(const std::string &name, const std::string &descr,
                       const std::string &shape, const std::string &data) {
    std::string header = "{'descr': '" + descr +
                         "', 'fortran_order': False, 'shape': " + shape + ", }";
    while ((10 + header.size() + 1) % 64 != 0)
      header += ' ';
    header += '\n';
    std::string bytes = "\x93NUMPY";
    bytes += '\x01';
    bytes += '\x00';
    bytes += static_cast<char>(header.size() & 0xFF);
    bytes += static_cast<char>(header.size() >> 8);
    return write(name, bytes + header + data);
  }

  std::string directory;
};

std::vector<uint16_t> ramp16(size_t count) {
  std::vector<uint16_t> tokens(count);
  for (size_t i = 0; i < count; ++i)
    tokens[i] = static_cast<uint16_t>(i);
  return tokens;
}

TEST_F(TrainData, RawUint16RowsAreReadAtTheirOffset) {
  std::string path = write("tokens.bin", bytesOf(ramp16(100)));
  TokenData data;
  ASSERT_EQ(errorOf(data.open(path, {std::nullopt, 8, 0})), "");
  EXPECT_EQ(data.size(), 100u);
  EXPECT_EQ(data.type(), TokenType::U16);
  std::vector<int64_t> row(8);
  ASSERT_EQ(errorOf(data.readRow(92, 8, row.data())), "");
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(row[i], 92 + i);
  EXPECT_TRUE(contains(errorOf(data.readRow(93, 8, row.data())),
                       "cannot read tokens [93, 101)"));
}

TEST_F(TrainData, RawUint32WhenAskedAndItsValuesAboveSixteenBits) {
  std::vector<uint32_t> tokens = {70000, 1, 2, 3};
  std::string path = write("tokens.bin", bytesOf(tokens));
  TokenData data;
  ASSERT_EQ(errorOf(data.open(path, {TokenType::U32, 2, 0})), "");
  EXPECT_EQ(data.size(), 4u);
  std::vector<int64_t> row(2);
  ASSERT_EQ(errorOf(data.readRow(0, 2, row.data())), "");
  EXPECT_EQ(row[0], 70000);
  EXPECT_EQ(row[1], 1);
}

TEST_F(TrainData, RawSizeNotAWholeNumberOfTokensNamesFileAndByte) {
  std::string path = write("odd.bin", std::string(21, '\0'));
  TokenData data;
  std::string message = errorOf(data.open(path, {std::nullopt, 4, 0}));
  EXPECT_TRUE(contains(message, "token file '" + path + "' is 21 bytes"));
  EXPECT_TRUE(contains(message, "start at byte 20"));
  message = errorOf(data.open(path, {TokenType::U32, 2, 0}));
  EXPECT_TRUE(contains(message, "4 bytes each"));
}

TEST_F(TrainData, FewerThanRowPlusOneTokensIsRefused) {
  std::string path = write("short.bin", bytesOf(ramp16(16)));
  TokenData data;
  EXPECT_TRUE(contains(errorOf(data.open(path, {std::nullopt, 16, 0})),
                       "holds 16 tokens; a row of 16 tokens needs at least "
                       "17"));
  EXPECT_EQ(errorOf(data.open(path, {std::nullopt, 15, 0})), "");
}

TEST_F(TrainData, TokenOutsideTheVocabularyNamesItsOffset) {
  std::vector<uint16_t> tokens = ramp16(64);
  tokens[37] = 50257;
  std::string path = write("vocab.bin", bytesOf(tokens));
  TokenData data;
  ASSERT_EQ(errorOf(data.open(path, {std::nullopt, 8, 50257})), "");
  std::vector<int64_t> row(8);
  EXPECT_EQ(errorOf(data.readRow(0, 8, row.data())), "");
  std::string message = errorOf(data.readRow(32, 8, row.data()));
  EXPECT_TRUE(contains(message, "token file '" + path +
                                    "': token 37 (byte "
                                    "74) is 50257, outside the model's "
                                    "vocabulary of 50257"));
}

TEST_F(TrainData, NpyOfEachIntegerTypeReadsTheSameTokens) {
  std::vector<uint16_t> u16 = {5, 6, 7, 8};
  std::vector<uint32_t> u32 = {5, 6, 7, 8};
  std::vector<int32_t> i32 = {5, 6, 7, 8};
  std::vector<int64_t> i64 = {5, 6, 7, 8};
  struct Case {
    std::string descr, data;
    TokenType type;
  } cases[] = {{"<u2", bytesOf(u16), TokenType::U16},
               {"<u4", bytesOf(u32), TokenType::U32},
               {"<i4", bytesOf(i32), TokenType::I32},
               {"<i8", bytesOf(i64), TokenType::I64}};
  for (const Case &c : cases) {
    std::string path =
        writeNpy("t" + c.descr.substr(1) + ".npy", c.descr, "(4,)", c.data);
    TokenData data;
    ASSERT_EQ(errorOf(data.open(path, {std::nullopt, 3, 9})), "") << c.descr;
    EXPECT_EQ(data.type(), c.type);
    EXPECT_EQ(data.size(), 4u);
    std::vector<int64_t> row(3);
    ASSERT_EQ(errorOf(data.readRow(1, 3, row.data())), "") << c.descr;
    EXPECT_EQ(row, (std::vector<int64_t>{6, 7, 8})) << c.descr;
  }
}

TEST_F(TrainData, NpyThatIsNotOneDimensionalIntegerTokensIsRefused) {
  TokenData data;
  std::string path = writeNpy("two.npy", "<i8", "(2, 2)",
                              bytesOf(std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(contains(errorOf(data.open(path, {std::nullopt, 1, 0})),
                       "has shape (2, 2); a token file is a 1-D array"));
  path =
      writeNpy("float.npy", "<f4", "(2,)", bytesOf(std::vector<float>{1, 2}));
  EXPECT_TRUE(contains(errorOf(data.open(path, {std::nullopt, 1, 0})),
                       "holds dtype '<f4'"));
  path = writeNpy("short.npy", "<u2", "(5,)", bytesOf(ramp16(4)));
  EXPECT_TRUE(contains(errorOf(data.open(path, {std::nullopt, 1, 0})),
                       "declares 5 tokens of uint16"));
  path = writeNpy("mismatch.npy", "<u2", "(4,)", bytesOf(ramp16(4)));
  EXPECT_TRUE(contains(errorOf(data.open(path, {TokenType::U32, 1, 0})),
                       "holds uint16 tokens, but --data-dtype says uint32"));
  path = write("garbage.npy", "not a numpy file");
  EXPECT_TRUE(contains(errorOf(data.open(path, {std::nullopt, 1, 0})),
                       "is not a .npy file"));
}

TEST_F(TrainData, NegativeTokenInASignedNpyIsRefused) {
  std::string path = writeNpy("neg.npy", "<i8", "(4,)",
                              bytesOf(std::vector<int64_t>{0, 1, -1, 3}));
  TokenData data;
  ASSERT_EQ(errorOf(data.open(path, {std::nullopt, 2, 0})), "");
  std::vector<int64_t> row(2);
  EXPECT_TRUE(contains(errorOf(data.readRow(1, 2, row.data())),
                       "token 2 (byte 144) is -1; token ids are "
                       "non-negative"));
}

TEST_F(TrainData, NonRegularFilesAreRefused) {
  TokenData data;
  EXPECT_TRUE(contains(errorOf(data.open("/dev/zero", {std::nullopt, 1, 0})),
                       "is not a regular file"));
  EXPECT_TRUE(contains(
      errorOf(data.open(directory + "/missing.bin", {std::nullopt, 1, 0})),
      "cannot open token file"));
}

long maxResidentKiB() {
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

TEST_F(TrainData, AHugeFileIsReadRowByRowNotWhole) {
  // 4 GiB of uint16 tokens, sparse: reading it whole would take 4 GiB of
  // memory (or fail); reading a row takes a page.
  std::string path = directory + "/huge.bin";
  FILE *file = std::fopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr);
  ASSERT_EQ(::ftruncate(fileno(file), 4ll << 30), 0);
  uint16_t marker = 4242;
  ASSERT_EQ(std::fseek(file, (1ll << 31) + 2 * 7, SEEK_SET), 0);
  std::fwrite(&marker, 2, 1, file);
  std::fclose(file);
  long before = maxResidentKiB();
  TokenData data;
  ASSERT_EQ(errorOf(data.open(path, {std::nullopt, 16, 0})), "");
  EXPECT_EQ(data.size(), 2ull << 30);
  std::vector<int64_t> row(16);
  ASSERT_EQ(errorOf(data.readRow((1ull << 30), 16, row.data())), "");
  EXPECT_EQ(row[7], 4242);
  EXPECT_EQ(row[6], 0);
  EXPECT_LT(maxResidentKiB() - before, 64 * 1024);
}

//===----------------------------------------------------------------------===//
// BatchSampler
//===----------------------------------------------------------------------===//

TEST(TrainBatchSampler, SplitMix64IsVignasGenerator) {
  // The first outputs of Vigna's splitmix64.c seeded with 0, and two more
  // states, computed in Python.
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64(1), 0x910a2dec89025cc1ull);
  EXPECT_EQ(splitmix64(12345), 0x22118258a9d111a0ull);
}

TEST(TrainBatchSampler, OffsetsFollowTheSpecFormula) {
  // Python: splitmix64(splitmix64(seed ^ (G * (s + 1))) + q) % (n - T).
  BatchSampler first(0, 1000, {4, 16, 1, 1});
  EXPECT_EQ(first.rowsFor(0, 0, 0), (std::vector<uint64_t>{680, 32, 279, 590}));
  BatchSampler second(7, 1000003, {6, 128, 1, 1});
  EXPECT_EQ(
      second.rowsFor(3, 0, 0),
      (std::vector<uint64_t>{836446, 894051, 152888, 228106, 86650, 452647}));
}

TEST(TrainBatchSampler, RowsDoNotDependOnRanksOrMicroSteps) {
  uint64_t tokens = 5000, T = 32;
  BatchSampler whole(11, tokens, {8, T, 1, 1});
  BatchSampler accumulated(11, tokens, {2, T, 1, 4});
  BatchSampler sharded(11, tokens, {4, T, 2, 1});
  BatchSampler both(11, tokens, {2, T, 2, 2});
  for (uint64_t step = 0; step < 3; ++step) {
    std::vector<uint64_t> expected = whole.rowsFor(step, 0, 0);
    std::vector<uint64_t> got;
    for (uint64_t k = 0; k < 4; ++k)
      for (uint64_t row : accumulated.rowsFor(step, k, 0))
        got.push_back(row);
    EXPECT_EQ(got, expected) << "K=4, step " << step;
    got.clear();
    for (uint64_t r = 0; r < 2; ++r)
      for (uint64_t row : sharded.rowsFor(step, 0, r))
        got.push_back(row);
    EXPECT_EQ(got, expected) << "N=2, step " << step;
    got.clear();
    // Micro-step k of rank r takes rows [(k N + r) B, ...): k outer.
    for (uint64_t k = 0; k < 2; ++k)
      for (uint64_t r = 0; r < 2; ++r)
        for (uint64_t row : both.rowsFor(step, k, r))
          got.push_back(row);
    EXPECT_EQ(got, expected) << "N=2 K=2, step " << step;
    for (uint64_t offset : expected)
      EXPECT_LT(offset, tokens - T);
  }
  EXPECT_NE(whole.rowsFor(0, 0, 0), whole.rowsFor(1, 0, 0));
  EXPECT_NE(whole.rowsFor(0, 0, 0),
            BatchSampler(12, tokens, {8, T, 1, 1}).rowsFor(0, 0, 0));
}

TEST_F(TrainData, FillReadsTheSampledRowsIntoTheBatch) {
  std::string path = write("ramp.bin", bytesOf(ramp16(3000)));
  TokenData data;
  ASSERT_EQ(errorOf(data.open(path, {std::nullopt, 10, 0})), "");
  BatchSampler sampler(3, data.size(), {3, 10, 2, 2});
  std::vector<int64_t> batch(30, -7);
  ASSERT_EQ(errorOf(sampler.fill(data, 5, 1, 1, batch.data())), "");
  std::vector<uint64_t> offsets = sampler.rowsFor(5, 1, 1);
  for (int row = 0; row < 3; ++row)
    for (int t = 0; t < 10; ++t)
      EXPECT_EQ(batch[row * 10 + t], static_cast<int64_t>(offsets[row] + t));
  EXPECT_TRUE(contains(errorOf(sampler.fill(data, 5, 2, 0, batch.data())),
                       "micro-step 2 is outside the 2 micro-steps"));
  EXPECT_TRUE(contains(errorOf(sampler.fill(data, 5, 0, 2, batch.data())),
                       "rank 2 is outside the 2 ranks"));
}

} // namespace
