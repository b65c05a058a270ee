//===- PlanLoaderTest.cpp - reading and validating plans ------------------===//
//
// Builds a small valid plan in code (two ranks, a sharded group, a persistent
// group, a view, a constant, one program on both queues), then breaks it one
// field at a time and checks that loadPlan, validatePlan and the weights
// readers refuse it with a message that names what is wrong. Files go to a
// fresh temporary directory per test.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanLoader.h"

#include "runtime/plan/Opcodes.h"
#include "runtime/plan/ReadableFile.h"
#include "runtime/support/Checksum.h"

#include "test/unit/PlanBuilder.h"
#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace zplan::plan;
using zplan::Status;

using zplan::testing::addInstruction;
using zplan::testing::contains;
using zplan::testing::errorOf;

namespace {

std::string validationError(const Plan &plan, uint32_t worldSize = 2) {
  return errorOf(validatePlan(plan, worldSize));
}

Buffer *addBuffer(Plan &plan, const std::string &name, Buffer::Kind kind,
                  std::initializer_list<int64_t> shape, uint64_t bytes) {
  Buffer *buffer = plan.add_buffers();
  buffer->set_id(plan.buffers_size()); // ids start at 1
  buffer->set_name(name);
  buffer->set_kind(kind);
  buffer->set_dtype(F32);
  for (int64_t dimension : shape)
    buffer->add_shape(dimension);
  buffer->set_bytes(bytes);
  return buffer;
}

/// A valid plan for 2 ranks: y = (x @ w) * scale, with w gathered from
/// group 0 'layer0' (w: 3x2 and b: 2, padded to 8 elements, 4 per rank) and
/// group 1 'norms' persistent. Weights file: 2 rank sections of 16 bytes,
/// then the 16-byte persistent section at 32; 48 bytes in all.
Plan makeValidPlan() {
  Plan plan;
  plan.set_version(kPlanVersion);
  plan.set_world_size(2);
  plan.set_hardware("cpu");
  plan.set_model("tiny.onnx");

  auto addParameter = [&](const std::string &name,
                          std::initializer_list<int64_t> shape, uint32_t group,
                          uint64_t offset, uint64_t elements) {
    Parameter *parameter = plan.add_parameters();
    parameter->set_name(name);
    for (int64_t dimension : shape)
      parameter->add_shape(dimension);
    parameter->set_dtype(F32);
    parameter->set_group(group);
    parameter->set_offset_elements(offset);
    parameter->set_num_elements(elements);
  };
  addParameter("w", {3, 2}, 0, 0, 6);
  addParameter("b", {2}, 0, 6, 2);
  addParameter("ln", {4}, 1, 0, 4);

  Group *layer = plan.add_groups();
  layer->set_name("layer0");
  layer->set_padded_elements(8);
  layer->set_dtype(F32);
  layer->add_parameters(0);
  layer->add_parameters(1);
  layer->set_weights_offset(0);
  Group *norms = plan.add_groups();
  norms->set_name("norms");
  norms->set_padded_elements(4);
  norms->set_dtype(F32);
  norms->add_parameters(2);
  norms->set_persistent(true);
  norms->set_weights_offset(0);

  addBuffer(plan, "layer0.shard", Buffer::SHARD, {4}, 16)->set_group(0);
  addBuffer(plan, "norms", Buffer::PERSISTENT, {4}, 16)->set_group(1);
  addBuffer(plan, "layer0.gathered", Buffer::ARENA, {8}, 32)->set_group(0);
  Buffer *w = addBuffer(plan, "w", Buffer::ARENA, {3, 2}, 24);
  w->set_view_of(3);
  w->set_view_offset(0);
  addBuffer(plan, "x", Buffer::ARENA, {1, 3}, 12)->set_offset(32);
  addBuffer(plan, "y", Buffer::ARENA, {1, 2}, 8)->set_offset(48);
  addBuffer(plan, "scale", Buffer::CONSTANT, {}, 4)->set_constant(0);
  plan.add_constants()->set_data(std::string("\0\0\x80\x3f", 4)); // 1.0f

  Program *program = plan.add_programs();
  program->set_name("infer");
  program->set_kind(PROGRAM_KIND_INFER);
  addInstruction(*program, OPCODE_ALL_GATHER, {1}, {3})->set_group(0);
  addInstruction(*program, OPCODE_MATMUL, {5, 4}, {6}, {0})
      ->set_location("/MatMul");
  addInstruction(*program, OPCODE_MUL, {6, 7}, {6});
  addInstruction(*program, OPCODE_RELEASE, {3}, {}, {1})->set_group(0);
  Binding *input = program->add_inputs();
  input->set_name("x");
  input->set_buffer(5);
  input->set_role(BINDING_ROLE_DATA);
  Binding *output = program->add_outputs();
  output->set_name("y");
  output->set_buffer(6);
  output->set_role(BINDING_ROLE_DATA);
  program->set_peak_arena_bytes(56);

  plan.set_arena_bytes(64);
  plan.set_weights_file("model.weights");
  plan.set_weights_bytes_per_rank(16);
  plan.set_persistent_weights_offset(32);
  plan.set_memory_budget(1 << 20);
  stampConstantChecksums(plan);
  return plan;
}

class PlanLoaderTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern =
        (std::filesystem::path(::testing::TempDir()) / "zplan-plan-XXXXXX")
            .string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    directory = pattern;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(directory, ignored);
  }

  std::string pathOf(const std::string &name) const {
    return (std::filesystem::path(directory) / name).string();
  }

  std::string writeFile(const std::string &name, const std::string &bytes) {
    std::string path = pathOf(name);
    std::filesystem::create_directories(
        std::filesystem::path(path).parent_path());
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    EXPECT_TRUE(out.good()) << path;
    return path;
  }

  /// Writes `plan` as zcc does and gives it the identity loading it would
  /// (body_checksum), so that weights written next can name it.
  std::string writePlan(Plan &plan, const std::string &name = "model.zplan") {
    uint64_t identity;
    std::string path = writeFile(name, serializePlan(plan, &identity));
    plan.set_body_checksum(identity);
    return path;
  }

  std::string loadError(const std::string &path) {
    Plan plan;
    return errorOf(loadPlan(path, plan));
  }

  /// The valid plan's weights file: its header naming `plan`, then 48
  /// bytes of data (byte i holds i; `dataBytes` to cut it or add to it).
  /// `flip` (if any) flips bit 0 of that byte of the file after the header
  /// was made.
  std::string writeWeights(const Plan &plan, size_t dataBytes = 48,
                           int64_t flip = -1) {
    std::string data(dataBytes, '\0');
    for (size_t i = 0; i < dataBytes; ++i)
      data[i] = static_cast<char>(i);
    std::string full(48, '\0');
    for (size_t i = 0; i < 48; ++i)
      full[i] = static_cast<char>(i);
    WeightsHeader header;
    header.planIdentity = plan.body_checksum();
    header.rankChecksums = {zplan::checksum(full.data(), 16),
                            zplan::checksum(full.data() + 16, 16)};
    header.persistentChecksum = zplan::checksum(full.data() + 32, 16);
    std::string bytes = encodeWeightsHeader(header) + data;
    if (flip >= 0)
      bytes[flip] ^= 1;
    return writeFile("model.weights", bytes);
  }

  std::string directory;
};

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

TEST_F(PlanLoaderTest, ValidPlanLoadsAndValidates) {
  Plan original = makeValidPlan();
  std::string path = writePlan(original);
  Plan loaded;
  Status status = loadPlan(path, loaded);
  ASSERT_TRUE(status.ok()) << status.message();
  // The loaded plan carries its identity, the checksum of its body.
  EXPECT_EQ(loaded.body_checksum(), original.body_checksum());
  EXPECT_NE(loaded.body_checksum(), 0u);
  EXPECT_EQ(loaded.SerializeAsString(), original.SerializeAsString());
  Status valid = validatePlan(loaded, 2);
  EXPECT_TRUE(valid.ok()) << valid.message();
}

TEST_F(PlanLoaderTest, MissingFile) {
  std::string path = pathOf("absent.zplan");
  EXPECT_TRUE(contains(loadError(path), "cannot open plan file '" + path +
                                            "': No such file or directory"));
}

TEST_F(PlanLoaderTest, DirectoryIsNotAPlan) {
  std::filesystem::create_directories(pathOf("dir.zplan"));
  EXPECT_TRUE(
      contains(loadError(pathOf("dir.zplan")), "is not a regular file"));
}

TEST_F(PlanLoaderTest, EmptyFile) {
  std::string path = writeFile("empty.zplan", "");
  EXPECT_TRUE(contains(loadError(path), "plan file '" + path + "' is empty"));
}

TEST_F(PlanLoaderTest, GarbageBytes) {
  // 0xff... never ends a varint tag; "not a plan" starts with a field of
  // wire type 6, which does not exist.
  for (const std::string &garbage :
       {std::string(64, '\xff'), std::string("not a plan\n")}) {
    std::string path = writeFile("garbage.zplan", garbage);
    EXPECT_TRUE(contains(loadError(path), "is truncated or corrupt"));
  }
}

TEST_F(PlanLoaderTest, TruncatedFile) {
  std::string bytes = serializePlan(makeValidPlan());
  std::string path = writeFile("half.zplan", bytes.substr(0, bytes.size() / 2));
  EXPECT_TRUE(contains(loadError(path), "is truncated or corrupt"));
}

TEST_F(PlanLoaderTest, EveryPrefixIsRejected) {
  // protobuf cannot tell a message cut between two fields from a shorter
  // one; the checksum at the end of the file can: no prefix passes.
  std::string bytes = serializePlan(makeValidPlan());
  for (size_t length = 0; length < bytes.size(); ++length) {
    Plan prefix;
    EXPECT_FALSE(
        parsePlan(std::string_view(bytes).substr(0, length), "prefix", prefix)
            .ok())
        << "a prefix of " << length << " of " << bytes.size()
        << " bytes was accepted";
  }
}

TEST_F(PlanLoaderTest, EveryFlippedBitIsRejected) {
  std::string bytes = serializePlan(makeValidPlan());
  for (size_t position = 0; position < bytes.size(); ++position)
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[position] ^= static_cast<char>(1 << bit);
      Plan plan;
      EXPECT_FALSE(parsePlan(flipped, "flipped", plan).ok())
          << "byte " << position << " bit " << bit;
    }
}

TEST_F(PlanLoaderTest, ChecksumFailureNamesTheFileAndBothSums) {
  std::string bytes = serializePlan(makeValidPlan());
  bytes[3] ^= 0x10;
  std::string path = writeFile("flipped.zplan", bytes);
  EXPECT_TRUE(contains(loadError(path), "plan file '" + path +
                                            "' fails its checksum (stored 0x"));
  EXPECT_TRUE(contains(loadError(path), "): the file is corrupt"));
  // Without its checksum, a plan is refused even when it parses.
  std::string bare = makeValidPlan().SerializeAsString();
  EXPECT_TRUE(contains(loadError(writeFile("bare.zplan", bare)),
                       "is truncated or corrupt: it does not end in its "
                       "checksum"));
}

TEST_F(PlanLoaderTest, CorruptConstantIsNamed) {
  // A constant changed after zcc stamped it: named whether or not the body
  // checksum was recomputed over the change.
  Plan plan = makeValidPlan();
  plan.mutable_constants(0)->set_data(std::string("\0\0\x80\xbf", 4));
  std::string sealed = serializePlan(plan);
  Plan loaded;
  EXPECT_TRUE(contains(errorOf(parsePlan(sealed, "c.zplan", loaded)),
                       "plan file 'c.zplan': constant 0 fails its checksum "
                       "(stored 0x"));
  std::string bytes = serializePlan(makeValidPlan());
  size_t at = bytes.find(std::string("\0\0\x80\x3f", 4));
  ASSERT_NE(at, std::string::npos);
  bytes[at + 3] ^= 0x01;
  EXPECT_TRUE(contains(errorOf(parsePlan(bytes, "c.zplan", loaded)),
                       "constant 0 fails its checksum"));
}

TEST_F(PlanLoaderTest, ChecksumIsStreamableAndFixed) {
  // plan_file.py (test/zrun) computes the same values: keep them in step.
  EXPECT_EQ(zplan::checksum("", 0), 0u);
  EXPECT_EQ(zplan::checksum("abcdefghij", 10), 0xa830923fe2b95227ull);
  std::string text = "the same bytes in pieces of any size";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    zplan::Checksum pieces;
    pieces.update(text.data(), cut);
    pieces.update(text.data() + cut, text.size() - cut);
    EXPECT_EQ(pieces.value(), zplan::checksum(text.data(), text.size()));
  }
}

TEST_F(PlanLoaderTest, FailedParseLeavesPlanUnchanged) {
  Plan plan = makeValidPlan();
  EXPECT_FALSE(parsePlan(std::string(8, '\xff'), "garbage", plan).ok());
  EXPECT_EQ(plan.SerializeAsString(), makeValidPlan().SerializeAsString());
}

TEST_F(PlanLoaderTest, WrongVersion) {
  Plan plan = makeValidPlan();
  plan.set_version(9);
  EXPECT_TRUE(contains(loadError(writePlan(plan)),
                       "plan version 9, this zrun reads version 8"));
  EXPECT_TRUE(contains(validationError(plan),
                       "plan version 9, this zrun reads version 8"));
}

TEST_F(PlanLoaderTest, NoVersionOrNoPrograms) {
  Plan plan = makeValidPlan();
  plan.set_version(0);
  EXPECT_TRUE(contains(loadError(writePlan(plan)),
                       "is truncated or corrupt: it has no version"));
  plan = makeValidPlan();
  plan.clear_programs();
  EXPECT_TRUE(contains(loadError(writePlan(plan)),
                       "is truncated or corrupt: it has no programs"));
}

//===----------------------------------------------------------------------===//
// Validation
//===----------------------------------------------------------------------===//

TEST_F(PlanLoaderTest, WorldSizeMismatch) {
  EXPECT_TRUE(contains(validationError(makeValidPlan(), 4),
                       "plan was compiled for 2 ranks, launched with 4"));
}

TEST_F(PlanLoaderTest, BufferIdsAreIndexPlusOne) {
  Plan plan = makeValidPlan();
  plan.mutable_buffers(2)->set_id(7);
  EXPECT_TRUE(contains(validationError(plan),
                       "buffer at index 2 ('layer0.gathered') has id 7"));
}

TEST_F(PlanLoaderTest, ArenaOverflow) {
  Plan plan = makeValidPlan();
  plan.set_arena_bytes(40);
  EXPECT_TRUE(contains(validationError(plan),
                       "buffer 5 'x' (12 bytes at arena offset 32) ends past "
                       "the arena of 40 bytes"));
}

TEST_F(PlanLoaderTest, ArenaOffsetOverflowsSixtyFourBits) {
  Plan plan = makeValidPlan();
  plan.mutable_buffers(4)->set_offset(UINT64_MAX - 4);
  EXPECT_TRUE(contains(validationError(plan), "buffer 5 'x' (12 bytes at"));
}

TEST_F(PlanLoaderTest, BufferSmallerThanItsShape) {
  Plan plan = makeValidPlan();
  plan.mutable_buffers(4)->set_bytes(8);
  EXPECT_TRUE(
      contains(validationError(plan),
               "buffer 5 'x' has shape [1, 3] of F32 but only 8 bytes"));
}

TEST_F(PlanLoaderTest, CheckedArithmeticOnShapesAndSizes) {
  // Each number below would wrap around to a small, plausible one in
  // unchecked 64-bit arithmetic and pass the bounds checks after it.
  Plan plan = makeValidPlan();
  plan.mutable_buffers(4)->set_shape(1, -3);
  EXPECT_TRUE(contains(validationError(plan),
                       "buffer 5 'x' has a negative dimension in shape "
                       "[1, -3]"));

  plan = makeValidPlan();
  plan.mutable_buffers(4)->set_shape(0, int64_t(1) << 32);
  plan.mutable_buffers(4)->set_shape(1, int64_t(1) << 32);
  EXPECT_TRUE(contains(validationError(plan),
                       "buffer 5 'x' has shape [4294967296, 4294967296], "
                       "whose element count overflows 64 bits"));

  // 2^62 elements fit; 2^64 bytes of F32 do not.
  plan = makeValidPlan();
  plan.mutable_buffers(4)->set_shape(0, int64_t(1) << 31);
  plan.mutable_buffers(4)->set_shape(1, int64_t(1) << 31);
  EXPECT_TRUE(contains(validationError(plan),
                       "buffer 5 'x' has shape [2147483648, 2147483648] of "
                       "F32, whose size in bytes overflows 64 bits"));

  plan = makeValidPlan();
  plan.mutable_parameters(0)->set_shape(0, -3);
  plan.mutable_parameters(0)->set_shape(1, -2);
  EXPECT_TRUE(contains(validationError(plan),
                       "parameter 'w' has a negative dimension in shape "
                       "[-3, -2]"));

  // Offsets plus sizes: a view, a parameter inside its group, a shard in
  // its section, the sections in the file.
  plan = makeValidPlan();
  plan.mutable_buffers(3)->set_view_offset(UINT64_MAX - 8);
  EXPECT_TRUE(contains(validationError(plan),
                       "buffer 4 'w' (24 bytes at offset 18446744073709551607)"
                       " ends past buffer 3 'layer0.gathered'"));
  plan = makeValidPlan();
  plan.mutable_parameters(1)->set_offset_elements(UINT64_MAX - 1);
  EXPECT_TRUE(contains(validationError(plan),
                       "parameter 'b' (2 elements at offset "
                       "18446744073709551614) ends past its group 0"));
  plan = makeValidPlan();
  plan.mutable_groups(0)->set_weights_offset(UINT64_MAX - 8);
  EXPECT_TRUE(contains(validationError(plan),
                       "group 0 'layer0': its shard (16 bytes at weights "
                       "offset 18446744073709551607) ends past"));
  plan = makeValidPlan();
  plan.set_weights_bytes_per_rank(UINT64_MAX / 2 + 1);
  EXPECT_TRUE(contains(validationError(plan),
                       "the plan's weights layout overflows 64 bits"));
  plan = makeValidPlan();
  plan.mutable_groups(1)->set_padded_elements(UINT64_MAX / 2 - 1);
  EXPECT_TRUE(contains(validationError(plan), "overflow"));
}

TEST_F(PlanLoaderTest, BadView) {
  Plan plan = makeValidPlan();
  plan.mutable_buffers(3)->set_view_of(99);
  EXPECT_TRUE(contains(validationError(plan),
                       "buffer 4 'w' views buffer id 99, but the plan has 7 "
                       "buffers (ids 1 to 7)"));

  plan = makeValidPlan();
  plan.mutable_buffers(3)->set_view_offset(16);
  EXPECT_TRUE(contains(validationError(plan),
                       "buffer 4 'w' (24 bytes at offset 16) ends past buffer "
                       "3 'layer0.gathered' of 32 bytes"));

  plan = makeValidPlan();
  plan.mutable_buffers(3)->set_view_of(4);
  EXPECT_TRUE(contains(validationError(plan), "buffer 4 'w' views itself"));
}

TEST_F(PlanLoaderTest, CycleOfViews) {
  Plan plan = makeValidPlan();
  plan.mutable_buffers(3)->set_bytes(32);
  plan.mutable_buffers(2)->set_view_of(4);
  EXPECT_TRUE(contains(validationError(plan), "is part of a cycle of views"));
}

TEST_F(PlanLoaderTest, BadConstant) {
  Plan plan = makeValidPlan();
  plan.mutable_constants(0)->set_data("abc");
  EXPECT_TRUE(contains(validationError(plan),
                       "buffer 7 'scale' has 4 bytes, but its constant 0 "
                       "holds 3"));
  plan = makeValidPlan();
  plan.mutable_buffers(6)->set_constant(5);
  EXPECT_TRUE(contains(validationError(plan),
                       "buffer 7 'scale' is constant 5, but the plan has 1 "
                       "constants"));
}

TEST_F(PlanLoaderTest, BadParameterOrGroup) {
  Plan plan = makeValidPlan();
  plan.mutable_parameters(1)->set_offset_elements(7);
  EXPECT_TRUE(contains(validationError(plan),
                       "parameter 'b' (2 elements at offset 7) ends past its "
                       "group 0 'layer0' of 8 padded elements"));

  plan = makeValidPlan();
  plan.mutable_groups(0)->set_padded_elements(9);
  EXPECT_TRUE(contains(validationError(plan),
                       "group 0 'layer0' has 9 padded elements, not a "
                       "multiple of the world size 2"));

  plan = makeValidPlan();
  plan.mutable_groups(1)->add_parameters(12);
  EXPECT_TRUE(contains(validationError(plan),
                       "group 1 'norms' lists parameter index 12, but the "
                       "plan has 3 parameters"));

  plan = makeValidPlan();
  plan.mutable_parameters(0)->set_shape(0, 4);
  EXPECT_TRUE(contains(validationError(plan),
                       "parameter 'w' has shape [4, 2] but num_elements 6"));
}

TEST_F(PlanLoaderTest, BadGroupIndex) {
  Plan plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(0)->set_group(5);
  EXPECT_TRUE(contains(validationError(plan),
                       "program 'infer', instruction #0 'all_gather' names "
                       "group 5, but the plan has 2 groups"));

  plan = makeValidPlan();
  plan.mutable_buffers(0)->set_group(9);
  EXPECT_TRUE(contains(validationError(plan),
                       "buffer 1 'layer0.shard' holds group 9, but the plan "
                       "has 2 groups"));

  plan = makeValidPlan();
  plan.mutable_parameters(2)->set_group(7);
  EXPECT_TRUE(contains(validationError(plan),
                       "group 1 'norms' lists parameter 'ln', which says it "
                       "is in group 7"));
}

TEST_F(PlanLoaderTest, BadOperandId) {
  Plan plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(1)->set_operands(1, 99);
  EXPECT_TRUE(
      contains(validationError(plan),
               "program 'infer', instruction #1 'matmul' at '/MatMul': "
               "operand 1 is buffer id 99, but the plan has 7 buffers"));

  plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(2)->set_results(0, 0);
  EXPECT_TRUE(contains(validationError(plan),
                       "instruction #2 'mul': result 0 is buffer id 0"));
}

TEST_F(PlanLoaderTest, BadWaitFor) {
  Plan plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(1)->add_wait_for(9);
  EXPECT_TRUE(contains(validationError(plan),
                       "program 'infer', instruction #1 'matmul' at '/MatMul' "
                       "waits for instruction 9, but program 'infer' has 4 "
                       "instructions"));

  plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(3)->set_wait_for(0, 3);
  EXPECT_TRUE(contains(validationError(plan),
                       "instruction #3 'release' waits for itself"));
}

TEST_F(PlanLoaderTest, DeadlockThroughWaitFor) {
  // The matmul waits for the release, which waits for the matmul.
  Plan plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(1)->add_wait_for(3);
  std::string error = validationError(plan);
  EXPECT_TRUE(contains(error, "program 'infer' would deadlock"));
  EXPECT_TRUE(contains(error, "#1 'matmul'"));
  EXPECT_TRUE(contains(error, "#3 'release'"));
}

TEST_F(PlanLoaderTest, DeadlockThroughQueueOrder) {
  // all_gather (#0) waits for mul (#2), which the compute queue runs after
  // matmul (#1), which waits for the all_gather.
  Plan plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(0)->add_wait_for(2);
  EXPECT_TRUE(contains(validationError(plan),
                       "#0 'all_gather' -> #1 'matmul' -> #2 'mul' -> #0"));
}

TEST_F(PlanLoaderTest, BadInstructionShape) {
  Plan plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(2)->set_queue(
      QUEUE_UNSPECIFIED);
  EXPECT_TRUE(
      contains(validationError(plan), "instruction #2 'mul' has no queue"));

  plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(0)->set_queue(COMPUTE);
  EXPECT_TRUE(contains(validationError(plan),
                       "instruction #0 'all_gather' is on the COMPUTE queue; "
                       "'all_gather' runs on COMM"));

  plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(2)->set_queue(COMM);
  EXPECT_TRUE(contains(validationError(plan),
                       "instruction #2 'mul' is on the COMM queue; 'mul' "
                       "runs on COMPUTE"));

  plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(3)->set_queue(COMM);
  EXPECT_TRUE(contains(validationError(plan),
                       "instruction #3 'release' is on the COMM queue; "
                       "'release' runs on COMPUTE"));

  plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(2)->set_index(5);
  EXPECT_TRUE(
      contains(validationError(plan), "instruction #2 'mul' has index 5"));
}

TEST_F(PlanLoaderTest, BadBinding) {
  Plan plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_inputs(0)->set_buffer(42);
  EXPECT_TRUE(contains(validationError(plan),
                       "program 'infer' input 'x' is bound to buffer id 42"));
}

TEST_F(PlanLoaderTest, WeightsLayoutOutsideTheSections) {
  Plan plan = makeValidPlan();
  plan.mutable_groups(0)->set_weights_offset(8);
  EXPECT_TRUE(contains(validationError(plan),
                       "group 0 'layer0': its shard (16 bytes at weights "
                       "offset 8) ends past a rank's section of 16 bytes"));

  // The persistent section starts where the ranks' sections end: not
  // inside them, and not after a gap no checksum would cover.
  for (uint64_t offset : {16u, 40u}) {
    plan = makeValidPlan();
    plan.set_persistent_weights_offset(offset);
    EXPECT_TRUE(contains(validationError(plan),
                         "persistent weights start at byte " +
                             std::to_string(offset) +
                             " of the weights file, not right after the "
                             "ranks' sections"));
  }
}

TEST_F(PlanLoaderTest, DataTypeSizes) {
  EXPECT_EQ(dataTypeSize(F32), 4u);
  EXPECT_EQ(dataTypeSize(F16), 2u);
  EXPECT_EQ(dataTypeSize(BF16), 2u);
  EXPECT_EQ(dataTypeSize(F64), 8u);
  EXPECT_EQ(dataTypeSize(I64), 8u);
  EXPECT_EQ(dataTypeSize(I32), 4u);
  EXPECT_EQ(dataTypeSize(I8), 1u);
  EXPECT_EQ(dataTypeSize(U8), 1u);
  EXPECT_EQ(dataTypeSize(BOOL), 1u);
  EXPECT_EQ(dataTypeSize(DATA_TYPE_UNSPECIFIED), 0u);
  EXPECT_EQ(dataTypeSize(static_cast<DataType>(99)), 0u);
}

//===----------------------------------------------------------------------===//
// Weights
//===----------------------------------------------------------------------===//

TEST_F(PlanLoaderTest, WeightsRoundTripRankSections) {
  Plan plan = makeValidPlan();
  std::string planPath = writePlan(plan);
  writeWeights(plan);
  EXPECT_EQ(weightsPath(planPath, plan), pathOf("model.weights"));
  EXPECT_EQ(persistentWeightsBytes(plan), 16u);

  for (uint32_t rank = 0; rank < 2; ++rank) {
    std::vector<uint8_t> section;
    Status status = readRankWeights(planPath, plan, rank, section);
    ASSERT_TRUE(status.ok()) << status.message();
    ASSERT_EQ(section.size(), 16u);
    for (size_t i = 0; i < section.size(); ++i)
      EXPECT_EQ(section[i], rank * 16 + i) << "rank " << rank << " byte " << i;
  }
  std::vector<uint8_t> persistent;
  Status status = readPersistentWeights(planPath, plan, persistent);
  ASSERT_TRUE(status.ok()) << status.message();
  ASSERT_EQ(persistent.size(), 16u);
  for (size_t i = 0; i < persistent.size(); ++i)
    EXPECT_EQ(persistent[i], 32 + i) << "persistent byte " << i;
}

TEST_F(PlanLoaderTest, WeightsPathIsRelativeToThePlan) {
  Plan plan = makeValidPlan();
  EXPECT_EQ(weightsPath("/data/plans/gpt2.zplan", plan),
            "/data/plans/model.weights");
  EXPECT_EQ(weightsPath("gpt2.zplan", plan), "model.weights");
  plan.set_weights_file("/shared/w.bin");
  EXPECT_EQ(weightsPath("/data/plans/gpt2.zplan", plan), "/shared/w.bin");
}

TEST_F(PlanLoaderTest, MissingWeightsFile) {
  Plan plan = makeValidPlan();
  std::string planPath = writePlan(plan);
  std::vector<uint8_t> section;
  EXPECT_TRUE(contains(errorOf(readRankWeights(planPath, plan, 0, section)),
                       "cannot open weights file '" + pathOf("model.weights") +
                           "': No such file or directory"));
}

TEST_F(PlanLoaderTest, WeightsFileOfTheWrongSize) {
  Plan plan = makeValidPlan();
  std::string planPath = writePlan(plan);
  // Rank 0's section is whole, but the file is short: rank 0 fails too, so
  // that no rank starts while another cannot. One byte too many fails too.
  uint64_t header = weightsHeaderBytes(2);
  for (size_t dataBytes : {40u, 49u}) {
    writeWeights(plan, dataBytes);
    std::vector<uint8_t> section;
    std::string expected = "weights file '" + pathOf("model.weights") +
                           "' is " + std::to_string(header + dataBytes) +
                           " bytes, the plan needs exactly " +
                           std::to_string(header + 48);
    EXPECT_TRUE(contains(errorOf(readRankWeights(planPath, plan, 0, section)),
                         expected));
    EXPECT_TRUE(contains(
        errorOf(readPersistentWeights(planPath, plan, section)), expected));
  }
}

TEST_F(PlanLoaderTest, WeightsOfAnotherPlan) {
  Plan plan = makeValidPlan();
  std::string planPath = writePlan(plan);
  Plan other = makeValidPlan();
  other.set_model("other.onnx");
  writePlan(other, "other.zplan");
  writeWeights(other);
  std::vector<uint8_t> section;
  EXPECT_TRUE(contains(errorOf(readRankWeights(planPath, plan, 0, section)),
                       "weights file '" + pathOf("model.weights") +
                           "' belongs to another plan: it records plan 0x"));
}

TEST_F(PlanLoaderTest, CorruptWeightsNameTheSection) {
  Plan plan = makeValidPlan();
  std::string planPath = writePlan(plan);
  int64_t header = static_cast<int64_t>(weightsHeaderBytes(2));
  std::vector<uint8_t> section;
  std::string subject = "weights file '" + pathOf("model.weights") + "'";

  // A flip in rank 1's section fails rank 1 only.
  writeWeights(plan, 48, header + 16 + 5);
  EXPECT_TRUE(readRankWeights(planPath, plan, 0, section).ok());
  EXPECT_TRUE(contains(errorOf(readRankWeights(planPath, plan, 1, section)),
                       subject + ": rank 1's section fails its checksum "
                                 "(stored 0x"));
  writeWeights(plan, 48, header + 32);
  EXPECT_TRUE(
      contains(errorOf(readPersistentWeights(planPath, plan, section)),
               subject + ": the persistent section fails its checksum"));

  // Header: the magic, then anything else (here the plan identity).
  writeWeights(plan, 48, 0);
  EXPECT_TRUE(contains(errorOf(readRankWeights(planPath, plan, 0, section)),
                       subject + " is not a zplan weights file"));
  writeWeights(plan, 48, 17);
  EXPECT_TRUE(contains(errorOf(readRankWeights(planPath, plan, 0, section)),
                       subject + ": its header fails its checksum"));

  // Every flipped bit of the file fails rank 0, rank 1 or the persistent
  // section.
  for (int64_t position = 0; position < header + 48; ++position) {
    writeWeights(plan, 48, position);
    std::vector<uint8_t> rank0, rank1, persistent;
    EXPECT_FALSE(readRankWeights(planPath, plan, 0, rank0).ok() &&
                 readRankWeights(planPath, plan, 1, rank1).ok() &&
                 readPersistentWeights(planPath, plan, persistent).ok())
        << "byte " << position;
  }
}

TEST_F(PlanLoaderTest, RankOutOfRange) {
  Plan plan = makeValidPlan();
  std::string planPath = writePlan(plan);
  writeWeights(plan);
  std::vector<uint8_t> section;
  EXPECT_TRUE(contains(errorOf(readRankWeights(planPath, plan, 2, section)),
                       "rank 2 is out of range: the plan has 2 ranks"));
}

TEST_F(PlanLoaderTest, PlanWithoutWeightsNeedsNoFile) {
  Plan plan = makeValidPlan();
  plan.clear_weights_file();
  plan.set_weights_bytes_per_rank(0);
  plan.set_persistent_weights_offset(0);
  plan.clear_parameters();
  plan.clear_groups();
  std::vector<uint8_t> section(3);
  Status status = readRankWeights(pathOf("model.zplan"), plan, 1, section);
  ASSERT_TRUE(status.ok()) << status.message();
  EXPECT_TRUE(section.empty());

  // With weights but no file named, it is an error, not an empty read.
  EXPECT_TRUE(
      contains(errorOf(readRankWeights(
                   pathOf("model.zplan"),
                   [] {
                     Plan withWeights = makeValidPlan();
                     withWeights.clear_weights_file();
                     return withWeights;
                   }(),
                   0, section)),
               "the plan needs 48 bytes of weights but names no weights file"));
}

//===----------------------------------------------------------------------===//
// Opcodes
//===----------------------------------------------------------------------===//

TEST(Opcodes, EveryEnumValueHasOneRowNamedAfterIt) {
  // Adding a value to plan.proto's Opcode without a row (or a row for a
  // value plan.proto lacks) would make the loader refuse what zcc emits.
  int rows = 0;
  for (int value = Opcode_MIN; value <= Opcode_MAX; ++value) {
    if (!Opcode_IsValid(value) || value == OPCODE_UNSPECIFIED)
      continue;
    auto opcode = static_cast<Opcode>(value);
    const OpcodeInfo *info = findOpcode(opcode);
    ASSERT_NE(info, nullptr) << Opcode_Name(opcode);
    EXPECT_EQ(info->opcode, opcode);
    // OPCODE_LAYER_NORM is "layer_norm".
    std::string expected = Opcode_Name(opcode).substr(7);
    for (char &c : expected)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ(info->name, expected);
    EXPECT_EQ(opcodeFromName(info->name), opcode);
    EXPECT_EQ(opcodeName(opcode), expected);
    ++rows;
  }
  EXPECT_EQ(opcodesEnd() - opcodesBegin(), rows);
}

TEST(Opcodes, QueuesAndKinds) {
  EXPECT_EQ(findOpcode(OPCODE_ALL_GATHER)->queue, COMM);
  EXPECT_EQ(findOpcode(OPCODE_REDUCE_SCATTER)->queue, COMM);
  EXPECT_EQ(findOpcode(OPCODE_ALL_REDUCE)->queue, COMM);
  EXPECT_EQ(findOpcode(OPCODE_GATHER_WAIT)->queue, COMPUTE);
  EXPECT_EQ(findOpcode(OPCODE_RELEASE)->queue, COMPUTE);
  EXPECT_EQ(findOpcode(OPCODE_MATMUL)->queue, COMPUTE);
  EXPECT_EQ(findOpcode(OPCODE_MATMUL)->kind, OpcodeKind::Kernel);
  EXPECT_EQ(findOpcode(OPCODE_GATHER_WAIT)->kind, OpcodeKind::Bookkeeping);
  EXPECT_TRUE(findOpcode(OPCODE_GATHER_WAIT)->requiresGroup);
  EXPECT_FALSE(findOpcode(OPCODE_RELEASE)->requiresGroup);
}

TEST(Opcodes, UnknownValuesAndNames) {
  EXPECT_EQ(findOpcode(OPCODE_UNSPECIFIED), nullptr);
  EXPECT_EQ(findOpcode(static_cast<Opcode>(999)), nullptr);
  EXPECT_EQ(opcodeName(static_cast<Opcode>(999)), "opcode 999");
  EXPECT_FALSE(opcodeFromName("wait").has_value()); // now "gather_wait"
  EXPECT_FALSE(opcodeFromName("nn.add").has_value());
  EXPECT_FALSE(opcodeFromName("").has_value());
}

TEST_F(PlanLoaderTest, UnknownOrMissingOpcode) {
  Plan plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(2)->set_opcode(
      static_cast<Opcode>(999));
  EXPECT_TRUE(contains(validationError(plan),
                       "program 'infer', instruction #2 'opcode 999' has an "
                       "unknown opcode (a newer or corrupt plan)"));

  plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(2)->set_opcode(
      OPCODE_UNSPECIFIED);
  EXPECT_TRUE(contains(validationError(plan),
                       "instruction #2 'opcode 0' has no opcode"));
}

TEST_F(PlanLoaderTest, UnknownOpcodeSurvivesParsing) {
  // A newer zcc's opcode is kept by proto3 parsing as an unknown enum value;
  // validation, not parsing, must refuse it.
  Plan plan = makeValidPlan();
  plan.mutable_programs(0)->mutable_instructions(1)->set_opcode(
      static_cast<Opcode>(4242));
  std::string bytes = serializePlan(plan);
  Plan parsed;
  ASSERT_TRUE(parsePlan(bytes, "new.zplan", parsed).ok());
  EXPECT_TRUE(contains(validationError(parsed),
                       "instruction #1 'opcode 4242' at '/MatMul' has an "
                       "unknown opcode"));
}

TEST_F(PlanLoaderTest, KernelWithoutResultsValidates) {
  // adamw and sgd update their operands in place and have no results
  // (plan.proto, OPCODE_ADAMW): validation must accept such a compute
  // instruction.
  Plan plan = makeValidPlan();
  Buffer *hyper = addBuffer(plan, "hyper", Buffer::ARENA, {8}, 32);
  hyper->set_offset(0);
  Program *program = plan.add_programs();
  program->set_name("optimizer_step");
  program->set_kind(PROGRAM_KIND_OPTIMIZER_STEP);
  addInstruction(*program, OPCODE_ADAMW, {2, 2, 2, 2, hyper->id()}, {});
  addInstruction(*program, OPCODE_SGD, {2, 2, 2, hyper->id()}, {});
  Binding *input = program->add_inputs();
  input->set_name("hyper");
  input->set_buffer(hyper->id());
  input->set_role(BINDING_ROLE_HYPER_PARAMETERS);
  EXPECT_EQ(validationError(plan), "");
}

} // namespace

/// Open descriptors of this process, as /proc/self/fd lists them.
static size_t openDescriptors() {
  size_t count = 0;
  for ([[maybe_unused]] const auto &entry :
       std::filesystem::directory_iterator("/proc/self/fd"))
    ++count;
  return count;
}

TEST(ReadableFile, ReopeningClosesTheFirstFile) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("zplan-readable-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "a.bin") << "abc";
  std::ofstream(dir / "b.bin") << "defgh";
  size_t before = openDescriptors();
  {
    zplan::plan::ReadableFile file;
    ASSERT_TRUE(file.open((dir / "a.bin").string(), "test file").ok());
    size_t once = openDescriptors();
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(file.open((dir / "b.bin").string(), "test file").ok());
    EXPECT_EQ(openDescriptors(), once);
    EXPECT_EQ(file.bytes(), 5u);
    char bytes[5];
    ASSERT_TRUE(file.read(0, 5, bytes).ok());
    EXPECT_EQ(std::string(bytes, 5), "defgh");
    // A failed open leaves nothing open either.
    EXPECT_FALSE(file.open((dir / "missing.bin").string(), "test file").ok());
    EXPECT_EQ(openDescriptors(), before);
  }
  EXPECT_EQ(openDescriptors(), before);
  std::filesystem::remove_all(dir);
}
