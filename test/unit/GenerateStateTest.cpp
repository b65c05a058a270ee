//===- GenerateStateTest.cpp - generation's per-row bookkeeping -----------===//
//
// GenerationState (runtime/generate/GenerationState.h) against
// docs/generation.md section 1: prefill's and decode's inputs for ragged prompt
// lengths, EOS and budget stops, finished rows fed their last token at their
// last position, the [B, M] output filled with EOS after it; and every check on
// the request, naming the file, row and value.
//
//===----------------------------------------------------------------------===//

#include "runtime/generate/GenerationState.h"

#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <vector>

using namespace zplan;
using namespace zplan::generate;
using zplan::testing::contains;
using zplan::testing::errorOf;

namespace {

GenerationShape shape(uint64_t batch, uint64_t prompt, uint64_t length,
                      uint64_t vocabulary) {
  GenerationShape result;
  result.batch = batch;
  result.promptLength = prompt;
  result.maxSequenceLength = length;
  result.vocabulary = vocabulary;
  return result;
}

GenerationRequest request(std::vector<int64_t> prompts, uint64_t columns,
                          std::vector<int64_t> lengths, uint64_t maxNew,
                          std::optional<int64_t> eos = std::nullopt) {
  GenerationRequest result;
  result.prompts = std::move(prompts);
  result.promptColumns = columns;
  result.promptLengths = std::move(lengths);
  result.maxNewTokens = maxNew;
  result.eos = eos;
  return result;
}

std::string createError(const GenerationShape &plan, GenerationRequest asked) {
  GenerationState state;
  return errorOf(GenerationState::create(plan, std::move(asked), "p.npy",
                                         "lens.npy", state));
}

TEST(GenerateState, RaggedPromptsPrefillAndDecodeInputs) {
  // B = 2, P = 4, L = 8; the file is [2, 3]: rows of 3 and 1 tokens (the
  // second row's padding in the file, 9 9, must not reach the model).
  GenerationState state;
  ASSERT_TRUE(GenerationState::create(shape(2, 4, 8, 20),
                                      request({5, 6, 7, 8, 9, 9}, 3, {3, 1}, 4),
                                      "p.npy", "lens.npy", state)
                  .ok());
  std::vector<int64_t> ids(8, -1), positions(8, -1), last(2, -1);
  state.fillPrefill(ids.data(), positions.data(), last.data());
  EXPECT_EQ(ids, (std::vector<int64_t>{5, 6, 7, 0, 8, 0, 0, 0}));
  EXPECT_EQ(positions, (std::vector<int64_t>{0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(last, (std::vector<int64_t>{2, 0}));

  state.acceptStep({11, 12});
  std::vector<int64_t> id(2), position(2);
  state.fillDecode(id.data(), position.data());
  EXPECT_EQ(id, (std::vector<int64_t>{11, 12}));
  // Each row's first generated token sits right after its own prompt.
  EXPECT_EQ(position, (std::vector<int64_t>{3, 1}));
  state.acceptStep({13, 14});
  state.fillDecode(id.data(), position.data());
  EXPECT_EQ(id, (std::vector<int64_t>{13, 14}));
  EXPECT_EQ(position, (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(state.steps(), 2u);
  EXPECT_FALSE(state.allFinished());
  state.acceptStep({1, 2});
  state.acceptStep({3, 4});
  EXPECT_TRUE(state.allFinished());
  EXPECT_EQ(state.generatedTokens(), 8u);
  EXPECT_EQ(state.outputTable(),
            (std::vector<int64_t>{11, 13, 1, 3, 12, 14, 2, 4}));
}

TEST(GenerateState, EosStopsARowWhichKeepsItsLastTokenAndPosition) {
  GenerationState state;
  ASSERT_TRUE(GenerationState::create(
                  shape(3, 2, 8, 20),
                  request({1, 2, 3, 4, 5, 6}, 2, {2, 1, 2}, 5, /*eos=*/7),
                  "p.npy", "lens.npy", state)
                  .ok());
  state.acceptStep({7, 10, 11}); // row 0 ends at once, EOS included
  EXPECT_TRUE(state.finished(0));
  EXPECT_FALSE(state.finished(1));
  std::vector<int64_t> id(3), position(3);
  state.fillDecode(id.data(), position.data());
  EXPECT_EQ(id, (std::vector<int64_t>{7, 10, 11}));
  EXPECT_EQ(position, (std::vector<int64_t>{2, 1, 2}));
  // A finished row's token is ignored; it is fed the same again.
  state.acceptStep({15, 7, 12});
  EXPECT_EQ(state.generated(0), (std::vector<int64_t>{7}));
  EXPECT_TRUE(state.finished(1));
  state.fillDecode(id.data(), position.data());
  EXPECT_EQ(id, (std::vector<int64_t>{7, 7, 12}));
  EXPECT_EQ(position, (std::vector<int64_t>{2, 2, 3}));
  state.acceptStep({1, 1, 13});
  state.acceptStep({1, 1, 14});
  state.acceptStep({1, 1, 15});
  EXPECT_TRUE(state.allFinished());
  EXPECT_EQ(state.generatedTokens(), 1u + 2u + 5u);
  // After EOS the row is EOS to the end; a row without EOS has all M.
  EXPECT_EQ(state.outputTable(),
            (std::vector<int64_t>{7, 7, 7, 7, 7, 10, 7, 7, 7, 7, 11, 12, 13, 14,
                                  15}));
}

TEST(GenerateState, DefaultLengthsAreTheFilesColumns) {
  GenerationState state;
  ASSERT_TRUE(GenerationState::create(shape(1, 4, 6, 20),
                                      request({1, 2, 3}, 3, {}, 3), "p.npy", "",
                                      state)
                  .ok());
  EXPECT_EQ(state.promptLength(0), 3u);
  std::vector<int64_t> ids(4), positions(4), last(1);
  state.fillPrefill(ids.data(), positions.data(), last.data());
  EXPECT_EQ(last[0], 2);
  // len 3 + M 3 = 6 = L: the last token's slot is 5, the last one.
  state.acceptStep({4});
  state.acceptStep({5});
  std::vector<int64_t> id(1), position(1);
  state.fillDecode(id.data(), position.data());
  EXPECT_EQ(position[0], 4);
  state.acceptStep({6});
  EXPECT_TRUE(state.allFinished());
}

TEST(GenerateState, RequestsThePlanCannotServeAreRefusedNamingRowAndValue) {
  EXPECT_TRUE(
      contains(createError(shape(2, 4, 8, 20), request({1, 2, 3}, 3, {}, 2)),
               "prompt file 'p.npy' has 1 rows; the plan was "
               "compiled for --batch 2"));
  EXPECT_TRUE(
      contains(createError(shape(1, 2, 8, 20), request({1, 2, 3}, 3, {}, 2)),
               "prompt file 'p.npy' has prompts of 3 tokens; the "
               "plan was compiled for --prompt-len 2"));
  EXPECT_TRUE(contains(
      createError(shape(2, 4, 8, 20), request({1, 2, 3, 4}, 2, {2, 0}, 2)),
      "prompt lengths file 'lens.npy' row 1: length 0 is outside [1, 2]"));
  EXPECT_TRUE(contains(
      createError(shape(2, 4, 8, 20), request({1, 2, 3, 4}, 2, {3, 1}, 2)),
      "row 0: length 3 is outside [1, 2]"));
  EXPECT_TRUE(contains(
      createError(shape(2, 4, 8, 20), request({1, 2, 3, 4}, 2, {1}, 2)),
      "prompt lengths file 'lens.npy' has 1 lengths for 2 prompt rows"));
  EXPECT_TRUE(contains(
      createError(shape(2, 4, 8, 20), request({1, 2, 3, 4}, 2, {1, 2}, 7)),
      "row 1: prompt length 2 + --max-new-tokens 7 = 9 exceeds the plan's "
      "--max-seq-len 8"));
  EXPECT_TRUE(contains(
      createError(shape(2, 4, 8, 20), request({1, 2, 3, 20}, 2, {}, 2)),
      "prompt file 'p.npy' row 1 position 1: token id 20 is outside the "
      "vocabulary [0, 20)"));
  EXPECT_TRUE(contains(
      createError(shape(2, 4, 8, 20), request({1, 2, -3, 4}, 2, {}, 2)),
      "row 1 position 0: token id -3"));
  // Past a row's length the file's ids are padding, never checked or fed.
  EXPECT_EQ(
      createError(shape(2, 4, 8, 20), request({1, 99, 3, 4}, 2, {1, 2}, 2)),
      "");
  EXPECT_TRUE(contains(
      createError(shape(1, 4, 8, 20), request({1, 2}, 2, {}, 2, /*eos=*/20)),
      "--eos 20 is outside the vocabulary [0, 20)"));
}

} // namespace
