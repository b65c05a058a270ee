//===- DriverTest.cpp - zcc option parsing --------------------------------===//
//
// The command-line values zcc parses itself: byte sizes, --input-shape, and
// the combinations validateOptions rejects before any work.
//
//===----------------------------------------------------------------------===//

#include "compiler/Driver.h"
#include "compiler/import/OnnxImporter.h"

#include <gtest/gtest.h>

using namespace zplan;

namespace {

std::string errorText(llvm::Error error) {
  return error ? llvm::toString(std::move(error)) : "";
}

TEST(ParseByteSize, BinaryAndDecimalUnits) {
  EXPECT_EQ(*parseByteSize("4096"), 4096u);
  EXPECT_EQ(*parseByteSize("64MiB"), 64ull << 20);
  EXPECT_EQ(*parseByteSize("16GiB"), 16ull << 30);
  EXPECT_EQ(*parseByteSize("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*parseByteSize("2GB"), 2000000000ull);
  EXPECT_EQ(*parseByteSize("512kib"), 512ull << 10);
}

TEST(ParseByteSize, RejectsMalformed) {
  for (const char *bad : {"", "GiB", "12XB", "-1MiB", "1..2GiB"}) {
    llvm::Expected<uint64_t> size = parseByteSize(bad);
    ASSERT_FALSE(static_cast<bool>(size)) << bad;
    EXPECT_NE(errorText(size.takeError()).find("malformed byte size"),
              std::string::npos);
  }
}

TEST(ParseInputShape, BindsNamedShapes) {
  ImportOptions options;
  ASSERT_EQ(errorText(parseInputShape("input_ids=2x16", options)), "");
  ASSERT_EQ(errorText(parseInputShape("scale=", options)), "");
  EXPECT_EQ(options.inputShapes["input_ids"], (std::vector<int64_t>{2, 16}));
  EXPECT_TRUE(options.inputShapes["scale"].empty());
}

TEST(ParseInputShape, RejectsMalformed) {
  ImportOptions options;
  EXPECT_NE(errorText(parseInputShape("input_ids", options)).find("NAME=D0xD1"),
            std::string::npos);
  EXPECT_NE(errorText(parseInputShape("=2x16", options)).find("malformed"),
            std::string::npos);
  EXPECT_NE(errorText(parseInputShape("ids=2x0", options)).find("'0'"),
            std::string::npos);
  EXPECT_NE(errorText(parseInputShape("ids=2xq", options)).find("'q'"),
            std::string::npos);
  ASSERT_EQ(errorText(parseInputShape("ids=2", options)), "");
  EXPECT_NE(errorText(parseInputShape("ids=3", options)).find("twice"),
            std::string::npos);
}

TEST(ValidateOptions, RejectsBadValues) {
  CompileOptions options;
  EXPECT_EQ(errorText(validateOptions(options)), "");
  options.worldSize = 0;
  EXPECT_NE(errorText(validateOptions(options)).find("--world-size"),
            std::string::npos);
  options.worldSize = 8;
  options.hardware = "tpu";
  EXPECT_NE(errorText(validateOptions(options)).find("unknown --hardware 'tpu'"),
            std::string::npos);
  options.hardware = "h200";
  options.dumps = {"ir", "everything"};
  EXPECT_NE(errorText(validateOptions(options)).find("unknown --dump 'everything'"),
            std::string::npos);
  options.dumps = {"ir"};
  options.mode = "serve";
  EXPECT_NE(errorText(validateOptions(options)).find("unknown --mode 'serve'"),
            std::string::npos);
}

} // namespace
