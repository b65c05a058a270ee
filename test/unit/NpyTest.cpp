//===- NpyTest.cpp - .npy files: round trips and refusals -----------------===//
//
// Round trips every dtype zrun reads through encodeNpy/parseNpy and through
// files, checks the bytes NumPy itself writes for a small array, and breaks
// files one way at a time (magic, version, dtype, order, truncation, extra
// bytes, header syntax) to check that each refusal names the file and what
// is wrong. Writes check that a failed write leaves nothing behind.
//
//===----------------------------------------------------------------------===//

#include "runtime/tooling/Npy.h"
#include "runtime/tooling/Files.h"

#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace zplan;
using namespace zplan::npy;
using zplan::tooling::FileIdentity;
using zplan::tooling::StagedFile;
using zplan::tooling::StagedFiles;

using zplan::testing::contains;
using zplan::testing::errorOf;

namespace {

/// A .npy file as NumPy 1.x/2.x writes it (version 1.0, header padded with
/// spaces and '\n' to a multiple of 64 bytes), from a header dict and data.
std::string npyBytes(const std::string &dict, const std::string &data,
                     uint8_t major = 1) {
  size_t lengthBytes = major == 1 ? 2 : 4;
  size_t unpadded = 8 + lengthBytes + dict.size() + 1;
  std::string header =
      dict + std::string((64 - unpadded % 64) % 64, ' ') + "\n";
  std::string bytes = std::string("\x93NUMPY", 6);
  bytes.push_back(static_cast<char>(major));
  bytes.push_back(0);
  for (size_t i = 0; i < lengthBytes; ++i)
    bytes.push_back(static_cast<char>((header.size() >> (8 * i)) & 0xFF));
  return bytes + header + data;
}

template <typename T> std::string rawBytes(std::initializer_list<T> values) {
  std::string bytes;
  for (T value : values)
    bytes.append(reinterpret_cast<const char *>(&value), sizeof(T));
  return bytes;
}

class NpyFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    directory =
        std::filesystem::temp_directory_path() /
        ("zplan-npy-test-" + std::to_string(::getpid()) + "-" +
         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(directory);
    std::filesystem::create_directories(directory);
  }
  void TearDown() override { std::filesystem::remove_all(directory); }

  std::string path(const std::string &name) const {
    return (directory / name).string();
  }
  void writeRaw(const std::string &name, const std::string &bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  size_t fileCount() const {
    size_t count = 0;
    for ([[maybe_unused]] const auto &entry :
         std::filesystem::directory_iterator(directory))
      ++count;
    return count;
  }

  std::filesystem::path directory;
};

//===----------------------------------------------------------------------===//
// Reading what NumPy writes
//===----------------------------------------------------------------------===//

TEST(NpyTest, ParsesNumpyFloat32Matrix) {
  std::string bytes =
      npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
               rawBytes<float>({1, 2, 3, 4, 5, 6}));
  Array array;
  ASSERT_EQ(errorOf(parseNpy(bytes, "a.npy", array)), "");
  EXPECT_EQ(array.dtype, plan::F32);
  EXPECT_EQ(array.shape, (std::vector<int64_t>{2, 3}));
  ASSERT_EQ(array.data.size(), 24u);
  float values[6];
  std::memcpy(values, array.data.data(), 24);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[5], 6.0f);
}

TEST(NpyTest, ParsesScalarOneDimensionalAndEmptyShapes) {
  Array scalar, vector, empty;
  ASSERT_EQ(
      errorOf(parseNpy(npyBytes("{'descr': '<i8', 'fortran_order': False, "
                                "'shape': (), }",
                                rawBytes<int64_t>({42})),
                       "s.npy", scalar)),
      "");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.numElements(), 1u);
  ASSERT_EQ(
      errorOf(parseNpy(npyBytes("{'descr': '<i4', 'fortran_order': False, "
                                "'shape': (3,), }",
                                rawBytes<int32_t>({7, 8, 9})),
                       "v.npy", vector)),
      "");
  EXPECT_EQ(vector.shape, (std::vector<int64_t>{3}));
  ASSERT_EQ(
      errorOf(parseNpy(npyBytes("{'descr': '<f4', 'fortran_order': False, "
                                "'shape': (0, 4), }",
                                ""),
                       "e.npy", empty)),
      "");
  EXPECT_EQ(empty.numElements(), 0u);
}

TEST(NpyTest, ParsesVersion2AndKeysInAnyOrder) {
  Array array;
  ASSERT_EQ(
      errorOf(parseNpy(npyBytes("{\"shape\": (2,), \"fortran_order\": False, "
                                "\"descr\": \"|b1\"}",
                                std::string("\x01\x00", 2), /*major=*/2),
                       "b.npy", array)),
      "");
  EXPECT_EQ(array.dtype, plan::BOOL);
  EXPECT_EQ(array.shape, (std::vector<int64_t>{2}));
}

TEST(NpyTest, FortranOrderOfOneDimensionIsCOrder) {
  Array array;
  EXPECT_EQ(errorOf(parseNpy(npyBytes("{'descr': '<f8', 'fortran_order': True, "
                                      "'shape': (1, 2), }",
                                      rawBytes<double>({1, 2})),
                             "f.npy", array)),
            "");
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST(NpyTest, RoundTripsEveryDtype) {
  struct Case {
    plan::DataType type;
    const char *descr;
  };
  for (Case c :
       {Case{plan::F32, "<f4"}, Case{plan::F64, "<f8"}, Case{plan::I64, "<i8"},
        Case{plan::I32, "<i4"}, Case{plan::BOOL, "|b1"}, Case{plan::I8, "|i1"},
        Case{plan::U8, "|u1"}, Case{plan::F16, "<f2"}}) {
    SCOPED_TRACE(c.descr);
    EXPECT_EQ(descrOf(c.type), c.descr);
    std::vector<int64_t> shape = {2, 1, 3};
    std::vector<uint8_t> data(6 * plan::dataTypeSize(c.type));
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = static_cast<uint8_t>(c.type == plan::BOOL ? i % 2 : i * 37);
    std::string encoded;
    ASSERT_EQ(
        errorOf(encodeNpy(c.type, shape, data.data(), data.size(), encoded)),
        "");
    // Data starts on a 64-byte boundary, as NumPy writes it.
    EXPECT_EQ((encoded.size() - data.size()) % 64, 0u);
    EXPECT_TRUE(contains(encoded, std::string("'descr': '") + c.descr + "'"));
    Array decoded;
    ASSERT_EQ(errorOf(parseNpy(encoded, "x.npy", decoded)), "");
    EXPECT_EQ(decoded.dtype, c.type);
    EXPECT_EQ(decoded.shape, shape);
    EXPECT_EQ(decoded.data, data);
  }
}

TEST(NpyTest, EncodesShapesAsPythonTuples) {
  std::string encoded;
  float value = 1;
  ASSERT_EQ(errorOf(encodeNpy(plan::F32, {}, &value, 4, encoded)), "");
  EXPECT_TRUE(contains(encoded, "'shape': ()"));
  ASSERT_EQ(errorOf(encodeNpy(plan::F32, {1}, &value, 4, encoded)), "");
  EXPECT_TRUE(contains(encoded, "'shape': (1,)"));
}

TEST(NpyTest, RefusesToEncodeMismatchedOrUnnamedData) {
  std::string encoded;
  float values[4] = {};
  EXPECT_TRUE(
      contains(errorOf(encodeNpy(plan::F32, {2, 3}, values, 16, encoded)),
               "cannot write 16 bytes as shape [2, 3] of '<f4'"));
  EXPECT_TRUE(contains(errorOf(encodeNpy(plan::BF16, {2}, values, 4, encoded)),
                       "BF16"));
}

TEST_F(NpyFileTest, WritesAndReadsBackThroughFiles) {
  std::vector<int64_t> values = {0, -1, 255, INT64_MAX};
  ASSERT_EQ(
      errorOf(writeNpy(path("ids.npy"), plan::I64, {2, 2}, values.data(), 32)),
      "");
  Array array;
  ASSERT_EQ(errorOf(readNpy(path("ids.npy"), array)), "");
  EXPECT_EQ(array.dtype, plan::I64);
  EXPECT_EQ(array.shape, (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(array.data.size(), 32u);
  EXPECT_EQ(std::memcmp(array.data.data(), values.data(), 32), 0);
  // No temporary is left beside the file.
  EXPECT_EQ(fileCount(), 1u);
  // Overwriting goes through a rename too.
  ASSERT_EQ(errorOf(writeNpy(path("ids.npy"), array)), "");
  EXPECT_EQ(fileCount(), 1u);
}

TEST_F(NpyFileTest, FailedWriteLeavesNothing) {
  float value = 0;
  std::string target = path("missing/out.npy");
  EXPECT_TRUE(contains(errorOf(writeNpy(target, plan::F32, {1}, &value, 4)),
                       "cannot write npy file '" + target + "'"));
  EXPECT_FALSE(std::filesystem::exists(target));
  EXPECT_EQ(fileCount(), 0u);
}

TEST_F(NpyFileTest, StagedFilesAppearOnlyOnCommit) {
  {
    StagedFile staged;
    ASSERT_EQ(errorOf(staged.stage(path("a.npy"), "abc", "output 'a'")), "");
    EXPECT_FALSE(std::filesystem::exists(path("a.npy")));
    EXPECT_EQ(fileCount(), 1u); // the temporary
  }
  // Dropped without commit: the temporary is gone, nothing was written.
  EXPECT_EQ(fileCount(), 0u);
  StagedFile staged;
  ASSERT_EQ(errorOf(staged.stage(path("b.npy"), "abc", "output 'b'")), "");
  ASSERT_EQ(errorOf(staged.commit()), "");
  EXPECT_TRUE(std::filesystem::exists(path("b.npy")));
  EXPECT_EQ(fileCount(), 1u);
}

//===----------------------------------------------------------------------===//
// Refusals
//===----------------------------------------------------------------------===//

std::string parseError(const std::string &bytes) {
  Array array;
  array.shape = {99};
  Status status = parseNpy(bytes, "in.npy", array);
  // A failed parse leaves the array as it was.
  EXPECT_EQ(array.shape, (std::vector<int64_t>{99}));
  return errorOf(status);
}

TEST(NpyTest, RefusesWhatIsNotNpy) {
  EXPECT_TRUE(contains(parseError("PK\x03\x04 a zip file"),
                       "npy file 'in.npy' is not a .npy file"));
  EXPECT_TRUE(contains(parseError(""), "is not a .npy file"));
}

TEST(NpyTest, RefusesUnknownVersions) {
  std::string bytes =
      npyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
               rawBytes<float>({1}));
  bytes[6] = 4;
  EXPECT_TRUE(contains(parseError(bytes), "format version 4.0"));
}

TEST(NpyTest, RefusesUnsupportedDtypes) {
  auto withDescr = [](const std::string &descr, const std::string &data) {
    return npyBytes("{'descr': '" + descr +
                        "', 'fortran_order': False, 'shape': (1,), }",
                    data);
  };
  EXPECT_TRUE(contains(parseError(withDescr(">f4", rawBytes<float>({1}))),
                       "big-endian dtype '>f4' is not supported"));
  EXPECT_TRUE(contains(parseError(withDescr("<c8", std::string(8, '\0'))),
                       "unsupported dtype '<c8'"));
  EXPECT_TRUE(contains(parseError(withDescr("|O", std::string(8, '\0'))),
                       "unsupported dtype '|O'"));
  EXPECT_TRUE(contains(
      parseError(npyBytes("{'descr': [('a', '<f4')], 'fortran_order': False, "
                          "'shape': (1,), }",
                          rawBytes<float>({1}))),
      "structured dtypes are not supported"));
}

TEST(NpyTest, RefusesFortranOrder) {
  EXPECT_TRUE(
      contains(parseError(npyBytes("{'descr': '<f4', 'fortran_order': True, "
                                   "'shape': (2, 2), }",
                                   rawBytes<float>({1, 2, 3, 4}))),
               "is in Fortran order"));
}

TEST(NpyTest, RefusesTruncatedAndOverlongData) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, "
                     "'shape': (2, 2), }";
  EXPECT_TRUE(contains(parseError(npyBytes(dict, rawBytes<float>({1, 2, 3}))),
                       "has 12 bytes of data after its header, but shape "
                       "[2, 2] of '<f4' needs 16 (truncated)"));
  EXPECT_TRUE(
      contains(parseError(npyBytes(dict, rawBytes<float>({1, 2, 3, 4, 5}))),
               "has 20 bytes of data after its header"));
  std::string whole = npyBytes(dict, rawBytes<float>({1, 2, 3, 4}));
  EXPECT_TRUE(
      contains(parseError(whole.substr(0, 9)), "truncated inside its header"));
  EXPECT_TRUE(
      contains(parseError(whole.substr(0, 40)), "truncated inside its header"));
}

TEST(NpyTest, RefusesMalformedHeaders) {
  EXPECT_TRUE(contains(parseError(npyBytes("{'descr': '<f4', 'shape': (1,), }",
                                           rawBytes<float>({1}))),
                       "header lacks 'fortran_order'"));
  EXPECT_TRUE(
      contains(parseError(npyBytes("{'descr': '<f4', 'fortran_order': False, "
                                   "'shape': (-1,), }",
                                   "")),
               "malformed header (expected a tuple of non-negative integers"));
  EXPECT_TRUE(
      contains(parseError(npyBytes("{'descr': '<f4', 'fortran_order': maybe, "
                                   "'shape': (1,), }",
                                   rawBytes<float>({1}))),
               "expected True or False"));
  EXPECT_TRUE(
      contains(parseError(npyBytes("{'descr': '<f4', 'fortran_order': False, "
                                   "'shape': (1,), 'extra': 1}",
                                   rawBytes<float>({1}))),
               "unexpected header key 'extra'"));
  EXPECT_TRUE(
      contains(parseError(npyBytes("['descr', '<f4']", rawBytes<float>({1}))),
               "malformed header (expected '{'"));
  EXPECT_TRUE(
      contains(parseError(npyBytes("{'descr': '<f4', 'fortran_order': False, "
                                   "'shape': (99999999999, 99999999999), }",
                                   "")),
               "overflows 64 bits"));
}

TEST_F(NpyFileTest, ReadNamesMissingFilesAndDirectories) {
  Array array;
  EXPECT_TRUE(contains(errorOf(readNpy(path("nope.npy"), array)),
                       "cannot open npy file '" + path("nope.npy") +
                           "': No such file or directory"));
  EXPECT_TRUE(
      contains(errorOf(readNpy(directory.string(), array)), "is a directory"));
  writeRaw("bad.npy", "not numpy");
  EXPECT_TRUE(
      contains(errorOf(readNpy(path("bad.npy"), array)),
               "npy file '" + path("bad.npy") + "' is not a .npy file"));
}

//===----------------------------------------------------------------------===//
// Bounded reads, file identity, all-or-nothing writes
//===----------------------------------------------------------------------===//

TEST_F(NpyFileTest, ReadsOnlyRegularFiles) {
  Array array;
  // /dev/zero would grow memory without limit if it were read to its end.
  EXPECT_EQ(errorOf(readNpy("/dev/zero", array)),
            "npy file '/dev/zero' is not a regular file");
  ASSERT_EQ(::mkfifo(path("fifo.npy").c_str(), 0600), 0);
  EXPECT_TRUE(contains(errorOf(readNpy(path("fifo.npy"), array)),
                       "is not a regular file"));
}

TEST_F(NpyFileTest, HeaderIsCheckedBeforeTheData) {
  writeRaw("ids.npy",
           npyBytes("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }",
                    rawBytes<int64_t>({7, 8})));
  Array array;
  array.shape = {99};
  bool called = false;
  Status status = readNpy(path("ids.npy"), array, [&](const Array &declared) {
    called = true;
    EXPECT_EQ(declared.shape, std::vector<int64_t>{2});
    EXPECT_EQ(declared.dtype, plan::I64);
    EXPECT_TRUE(declared.data.empty());
    return zplan::failure("not this one");
  });
  EXPECT_TRUE(called);
  EXPECT_EQ(errorOf(status), "not this one");
  EXPECT_EQ(array.shape, std::vector<int64_t>{99}); // untouched

  // A header declaring more than the file holds fails before any read.
  writeRaw("huge.npy", npyBytes("{'descr': '<i8', 'fortran_order': False, "
                                "'shape': (1099511627776,), }",
                                rawBytes<int64_t>({7, 8})));
  EXPECT_TRUE(contains(errorOf(readNpy(path("huge.npy"), array)),
                       "has 16 bytes of data after its header, but shape "
                       "[1099511627776] of '<i8' needs 8796093022208"));
}

TEST_F(NpyFileTest, FileIdentityFollowsLinksAndSpellings) {
  writeRaw("a.npy", "a");
  std::filesystem::create_hard_link(path("a.npy"), path("b.npy"));
  std::filesystem::create_directories(directory / "sub");
  FileIdentity a = FileIdentity::of(path("a.npy"));
  EXPECT_TRUE(a.sameAs(FileIdentity::of(path("b.npy"))));
  EXPECT_TRUE(a.sameAs(FileIdentity::of(path("sub/../a.npy"))));
  writeRaw("c.npy", "c");
  EXPECT_FALSE(a.sameAs(FileIdentity::of(path("c.npy"))));
  // Files that do not exist yet are the same when their paths are.
  EXPECT_TRUE(FileIdentity::of(path("new.npy"))
                  .sameAs(FileIdentity::of(path("sub/../new.npy"))));
  EXPECT_FALSE(FileIdentity::of(path("new.npy"))
                   .sameAs(FileIdentity::of(path("other.npy"))));
}

TEST_F(NpyFileTest, StagedFilesAreAllOrNone) {
  {
    StagedFiles files;
    ASSERT_EQ(errorOf(files.stage(path("a.npy"), "a", "output 'a'")), "");
    // The second cannot be staged: the first's temporary goes too.
    EXPECT_TRUE(
        contains(errorOf(files.stage(path("nodir/b.npy"), "b", "output 'b'")),
                 "cannot write output 'b'"));
    EXPECT_EQ(fileCount(), 0u);
  }
  {
    StagedFiles files;
    ASSERT_EQ(errorOf(files.stage(path("a.npy"), "a", "output 'a'")), "");
    ASSERT_EQ(errorOf(files.stage(path("b.npy"), "b", "output 'b'")), "");
    EXPECT_EQ(fileCount(), 2u); // two temporaries, no output yet
    EXPECT_FALSE(std::filesystem::exists(path("a.npy")));
  }
  EXPECT_EQ(fileCount(), 0u); // dropped uncommitted: nothing left
  StagedFiles files;
  ASSERT_EQ(errorOf(files.stage(path("a.npy"), "a", "output 'a'")), "");
  ASSERT_EQ(errorOf(files.stage(path("b.npy"), "b", "output 'b'")), "");
  ASSERT_EQ(errorOf(files.commitAll()), "");
  EXPECT_TRUE(std::filesystem::exists(path("a.npy")));
  EXPECT_TRUE(std::filesystem::exists(path("b.npy")));
  EXPECT_EQ(fileCount(), 2u);
}

} // namespace
