//===- TrainDataTest.cpp - token files and batch selection for training --===//
//
// TokenData reads rows of a flat token file (raw uint16/uint32 or a 1-D
// .npy) and refuses, naming the file and offset, what cannot be training
// data; BatchSampler picks rows by BatchSampler.h's formula, whose expected
// values here were computed by an independent Python implementation, so a
// change to the formula breaks this test, not only the Python oracle.
// RowData reads the rows and labels of 2-D .npy files, and RowSampler
// orders them in epochs (RowSampler.h), its expected orders again from the
// Python oracle (test/train/batches.py).
//
//===----------------------------------------------------------------------===//

#include "runtime/train/BatchSampler.h"
#include "runtime/train/NpyHeader.h"
#include "runtime/train/RowData.h"
#include "runtime/train/RowSampler.h"
#include "runtime/train/TokenData.h"

#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
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
  std::string path = writeNpy("three.npy", "<i8", "(2, 2, 1)",
                              bytesOf(std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_TRUE(contains(errorOf(data.open(path, {std::nullopt, 1, 0})),
                       "has shape (2, 2, 1); a token stream is a 1-D array"));
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

//===----------------------------------------------------------------------===//
// RowData and RowSampler
//===----------------------------------------------------------------------===//

/// Rows r*100 + t: row r, token t, easy to recognise in a batch.
std::vector<int64_t> numberedRows(uint64_t rows, uint64_t tokens) {
  std::vector<int64_t> values(rows * tokens);
  for (uint64_t r = 0; r < rows; ++r)
    for (uint64_t t = 0; t < tokens; ++t)
      values[r * tokens + t] = static_cast<int64_t>(r * 100 + t);
  return values;
}

TEST_F(TrainData, ATwoDimensionalNpyIsARowFile) {
  std::string rows =
      writeNpy("rows.npy", "<i8", "(3, 4)", bytesOf(numberedRows(3, 4)));
  std::string stream =
      writeNpy("stream.npy", "<i8", "(12,)", bytesOf(numberedRows(3, 4)));
  std::string renamed = write("rows.bin", bytesOf(numberedRows(3, 4)));
  EXPECT_TRUE(isRowFile(rows));
  EXPECT_FALSE(isRowFile(stream));
  EXPECT_FALSE(isRowFile(renamed));
  EXPECT_FALSE(isRowFile(directory + "/missing.npy"));
  EXPECT_FALSE(isRowFile(write("junk.npy", "not numpy")));
}

TEST_F(TrainData, RowsAndLabelsOfEitherIntegerTypeAreRead) {
  std::vector<int64_t> ids64 = numberedRows(3, 4);
  std::vector<int32_t> ids32(ids64.begin(), ids64.end());
  std::vector<int32_t> labels32(ids32);
  labels32[4] = labels32[5] = -100;
  std::string rows64 = writeNpy("r64.npy", "<i8", "(3, 4)", bytesOf(ids64));
  std::string rows32 = writeNpy("r32.npy", "<i4", "(3, 4)", bytesOf(ids32));
  std::string labels =
      writeNpy("labels.npy", "<i4", "(3, 4)", bytesOf(labels32));
  for (const std::string &path : {rows64, rows32}) {
    RowData data;
    ASSERT_EQ(errorOf(data.open(path, labels, {0})), "") << path;
    EXPECT_EQ(data.rows(), 3u);
    EXPECT_EQ(data.rowTokens(), 4u);
    EXPECT_TRUE(data.hasLabels());
    EXPECT_EQ(data.labelsType(), TokenType::I32);
    std::vector<int64_t> ids(4), rowLabels(4);
    ASSERT_EQ(errorOf(data.readRow(1, ids.data(), rowLabels.data())), "");
    EXPECT_EQ(ids, (std::vector<int64_t>{100, 101, 102, 103})) << path;
    EXPECT_EQ(rowLabels, (std::vector<int64_t>{-100, -100, 102, 103}));
    EXPECT_TRUE(contains(errorOf(data.readRow(3, ids.data(), nullptr)),
                         "cannot read row 3 of row file '" + path +
                             "': it holds 3 rows"));
  }
  RowData unlabelled;
  ASSERT_EQ(errorOf(unlabelled.open(rows64, "", {0})), "");
  EXPECT_FALSE(unlabelled.hasLabels());
  EXPECT_EQ(unlabelled.shapeAndType(), "[3, 4] int64");
}

TEST_F(TrainData, RowFilesOfAnotherTypeRankOrSizeAreRefused) {
  RowData data;
  std::string path = writeNpy("f.npy", "<f4", "(2, 2)",
                              bytesOf(std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(errorOf(data.open(path, "", {0})),
            "row file '" + path +
                "' is [2, 2] float32; rows are 2-D int32 or int64 token ids "
                "[rows, tokens]");
  path = writeNpy("u8.npy", "|u1", "(2, 2)", "abcd");
  EXPECT_EQ(errorOf(data.open(path, "", {0})),
            "row file '" + path +
                "' is [2, 2] uint8; rows are 2-D int32 or int64 token ids "
                "[rows, tokens]");
  path = writeNpy("u2.npy", "<u2", "(2, 2)", bytesOf(ramp16(4)));
  EXPECT_TRUE(contains(errorOf(data.open(path, "", {0})), "is [2, 2] uint16"));
  path = writeNpy("flat.npy", "<i8", "(4,)", bytesOf(numberedRows(1, 4)));
  EXPECT_EQ(errorOf(data.open(path, "", {0})),
            "row file '" + path +
                "' has shape [4]; rows are 2-D int32 or int64 token ids "
                "[rows, tokens]");
  path = writeNpy("short.npy", "<i8", "(2, 3)", bytesOf(numberedRows(1, 4)));
  EXPECT_TRUE(contains(errorOf(data.open(path, "", {0})),
                       "but its header declares [2, 3] int64"));
}

TEST_F(TrainData, LabelsOfAnotherShapeOrTypeAreRefused) {
  std::string rows =
      writeNpy("rows.npy", "<i8", "(3, 4)", bytesOf(numberedRows(3, 4)));
  std::string shorter =
      writeNpy("l34.npy", "<i8", "(3, 3)", bytesOf(numberedRows(3, 3)));
  RowData data;
  EXPECT_EQ(errorOf(data.open(rows, shorter, {0})),
            "labels file '" + shorter +
                "' is [3, 3] int64; it must have the shape of row file '" +
                rows + "', [3, 4] int64");
  std::string flat =
      writeNpy("l12.npy", "<i8", "(12,)", bytesOf(numberedRows(3, 4)));
  EXPECT_TRUE(contains(errorOf(data.open(rows, flat, {0})),
                       "labels file '" + flat + "' has shape [12]"));
  std::string floats = writeNpy("lf.npy", "<f8", "(3, 4)",
                                bytesOf(std::vector<double>(12, 1.0)));
  EXPECT_EQ(errorOf(data.open(rows, floats, {0})),
            "labels file '" + floats +
                "' is [3, 4] float64; labels are 2-D int32 or int64 [rows, "
                "tokens], token ids or -100 (ignored)");
  EXPECT_TRUE(contains(errorOf(data.open(rows, directory + "/none.npy", {0})),
                       "cannot open labels file"));
}

TEST_F(TrainData, RowValuesAreCheckedAsTheyAreRead) {
  std::vector<int64_t> ids = numberedRows(2, 4);
  ids[6] = 300; // row 1, token 2
  std::vector<int64_t> labels(8, -100);
  labels[1] = 5;
  labels[7] = -1; // row 1, token 3
  std::string rows = writeNpy("rows.npy", "<i8", "(2, 4)", bytesOf(ids));
  std::string labelFile =
      writeNpy("labels.npy", "<i8", "(2, 4)", bytesOf(labels));
  RowData data;
  ASSERT_EQ(errorOf(data.open(rows, labelFile, {256})), "");
  std::vector<int64_t> row(4), rowLabels(4);
  EXPECT_EQ(errorOf(data.readRow(0, row.data(), rowLabels.data())), "");
  EXPECT_EQ(errorOf(data.readRow(1, row.data(), rowLabels.data())),
            "row file '" + rows +
                "': row 1, token 2 is 300, outside the model's vocabulary of "
                "256");
  ids[6] = 6;
  rows = writeNpy("rows2.npy", "<i8", "(2, 4)", bytesOf(ids));
  ASSERT_EQ(errorOf(data.open(rows, labelFile, {256})), "");
  EXPECT_EQ(errorOf(data.readRow(1, row.data(), rowLabels.data())),
            "labels file '" + labelFile +
                "': row 1, token 3 is -1; a label is a token id below the "
                "vocabulary of 256 or -100 (ignored)");
}

/// The file rows of the whole global batch of `step`, read through rowsFor
/// micro-step by micro-step and rank by rank.
std::vector<uint64_t> globalBatch(RowSampler &sampler, uint64_t step,
                                  uint64_t microSteps, uint64_t ranks) {
  std::vector<uint64_t> rows;
  for (uint64_t k = 0; k < microSteps; ++k)
    for (uint64_t r = 0; r < ranks; ++r)
      for (uint64_t row : sampler.rowsFor(step, k, r))
        rows.push_back(row);
  return rows;
}

TEST(TrainRowSampler, RowsAreReadInOrderEpochAfterEpochDroppingTheRest) {
  // 10 rows, 4 a step: steps 0 and 1 read rows 0-7, rows 8 and 9 are
  // dropped, step 2 starts the next epoch at row 0.
  RowSampler sampler(0, false, 10, {2, 16, 2, 1});
  EXPECT_EQ(sampler.globalRows(), 4u);
  EXPECT_EQ(sampler.stepsPerEpoch(), 2u);
  EXPECT_EQ(sampler.droppedPerEpoch(), 2u);
  EXPECT_EQ(sampler.rowsFor(0, 0, 0), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(sampler.rowsFor(0, 0, 1), (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(sampler.rowsFor(1, 0, 1), (std::vector<uint64_t>{6, 7}));
  EXPECT_EQ(sampler.rowsFor(2, 0, 0), (std::vector<uint64_t>{0, 1}));
  EXPECT_EQ(sampler.rowsFor(5, 0, 1), (std::vector<uint64_t>{6, 7}));
  RowSampler exact(0, false, 8, {4, 16, 1, 1});
  EXPECT_EQ(exact.droppedPerEpoch(), 0u);
}

TEST(TrainRowSampler, ShuffledEpochsFollowThePythonOracle) {
  // test/train/batches.py: epoch_order(5, e, 10, True) for e = 0, 1 and
  // epoch_order(7, 3, 6, True).
  RowSampler sampler(5, true, 10, {4, 16, 1, 1});
  EXPECT_EQ(sampler.epochOrder(0),
            (std::vector<uint64_t>{7, 0, 9, 3, 2, 1, 6, 5, 8, 4}));
  EXPECT_EQ(sampler.epochOrder(1),
            (std::vector<uint64_t>{7, 8, 0, 4, 9, 2, 3, 5, 1, 6}));
  EXPECT_EQ(RowSampler(7, true, 6, {1, 1, 1, 1}).epochOrder(3),
            (std::vector<uint64_t>{2, 4, 5, 1, 0, 3}));
  // Steps: epoch 0 is steps 0 and 1, epoch 1 steps 2 and 3.
  EXPECT_EQ(sampler.rowsFor(0, 0, 0), (std::vector<uint64_t>{7, 0, 9, 3}));
  EXPECT_EQ(sampler.rowsFor(1, 0, 0), (std::vector<uint64_t>{2, 1, 6, 5}));
  EXPECT_EQ(sampler.rowsFor(3, 0, 0), (std::vector<uint64_t>{9, 2, 3, 5}));
  // Back to an earlier step after a later epoch: the same rows.
  EXPECT_EQ(sampler.rowsFor(0, 0, 0), (std::vector<uint64_t>{7, 0, 9, 3}));
  EXPECT_EQ(RowSampler(5, false, 10, {4, 16, 1, 1}).epochOrder(0),
            (std::vector<uint64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
}

TEST(TrainRowSampler, EveryEpochIsAPermutationAndSeedsDiffer) {
  RowSampler sampler(11, true, 37, {1, 1, 1, 1});
  std::vector<uint64_t> identity(37);
  std::iota(identity.begin(), identity.end(), 0);
  for (uint64_t epoch = 0; epoch < 4; ++epoch) {
    std::vector<uint64_t> order = sampler.epochOrder(epoch);
    EXPECT_NE(order, identity) << "epoch " << epoch;
    std::sort(order.begin(), order.end());
    EXPECT_EQ(order, identity) << "epoch " << epoch;
  }
  EXPECT_NE(sampler.epochOrder(0), sampler.epochOrder(1));
  EXPECT_NE(sampler.epochOrder(0),
            RowSampler(12, true, 37, {1, 1, 1, 1}).epochOrder(0));
}

TEST(TrainRowSampler, RowsDoNotDependOnRanksOrMicroSteps) {
  // G = 8 rows a step split as (B, K, N) = (8,1,1), (2,4,1), (4,1,2),
  // (2,2,2): the same rows of every step, in the same order.
  for (bool shuffle : {false, true}) {
    RowSampler whole(3, shuffle, 21, {8, 5, 1, 1});
    RowSampler accumulated(3, shuffle, 21, {2, 5, 1, 4});
    RowSampler sharded(3, shuffle, 21, {4, 5, 2, 1});
    RowSampler both(3, shuffle, 21, {2, 5, 2, 2});
    for (uint64_t step = 0; step < 7; ++step) {
      std::vector<uint64_t> expected = whole.rowsFor(step, 0, 0);
      EXPECT_EQ(globalBatch(accumulated, step, 4, 1), expected);
      EXPECT_EQ(globalBatch(sharded, step, 1, 2), expected);
      EXPECT_EQ(globalBatch(both, step, 2, 2), expected);
    }
  }
}

TEST_F(TrainData, RowsMustFitTheProgramAndOneStep) {
  std::string path =
      writeNpy("rows.npy", "<i8", "(5, 16)", bytesOf(numberedRows(5, 16)));
  RowData data;
  ASSERT_EQ(errorOf(data.open(path, "", {0})), "");
  EXPECT_EQ(errorOf(checkRowsFit(data, {2, 16, 2, 1})), "");
  EXPECT_EQ(errorOf(checkRowsFit(data, {2, 12, 2, 1})),
            "row file '" + path +
                "' is [5, 16] int64, but program 'train_micro_step' takes "
                "input_ids [2, 12]: its rows must hold 12 tokens");
  EXPECT_EQ(errorOf(checkRowsFit(data, {2, 16, 2, 2})),
            "row file '" + path +
                "' holds 5 rows ([5, 16] int64); one optimizer step reads 8 "
                "(2 ranks x 2 micro-steps x 2 rows; program "
                "'train_micro_step' takes input_ids [2, 16])");
}

TEST_F(TrainData, RowFillReadsEachRanksRowsAndLabels) {
  std::vector<int64_t> labels = numberedRows(6, 3);
  for (int64_t &label : labels)
    if (label % 100 == 0)
      label = -100;
  std::string rows =
      writeNpy("rows.npy", "<i8", "(6, 3)", bytesOf(numberedRows(6, 3)));
  std::string labelFile =
      writeNpy("labels.npy", "<i8", "(6, 3)", bytesOf(labels));
  RowData data;
  ASSERT_EQ(errorOf(data.open(rows, labelFile, {0})), "");
  RowSampler sampler(0, false, 6, {1, 3, 2, 2});
  std::vector<int64_t> ids(3, -7), batchLabels(3, -7);
  // Micro-step 1 of rank 0 reads global row (1*2 + 0)*1 = 2.
  ASSERT_EQ(
      errorOf(sampler.fill(data, 0, 1, 0, ids.data(), batchLabels.data())), "");
  EXPECT_EQ(ids, (std::vector<int64_t>{200, 201, 202}));
  EXPECT_EQ(batchLabels, (std::vector<int64_t>{-100, 201, 202}));
  // Step 1 is the second epoch (6 rows, 4 a step): row 3 again.
  ASSERT_EQ(
      errorOf(sampler.fill(data, 1, 1, 1, ids.data(), batchLabels.data())), "");
  EXPECT_EQ(ids, (std::vector<int64_t>{300, 301, 302}));
  EXPECT_TRUE(
      contains(errorOf(sampler.fill(data, 0, 0, 0, ids.data(), nullptr)),
               "have labels, but no buffer was given for them"));
  EXPECT_TRUE(contains(
      errorOf(sampler.fill(data, 0, 2, 0, ids.data(), batchLabels.data())),
      "micro-step 2 is outside the 2 micro-steps"));
}

} // namespace
