//===- TierValidationTest.cpp - offload's verifier rules, case by case ---===//
//
// runtime/plan/TierValidation.h on hand-built programs: the host-side
// optimizer step as zcc emits it passes, and each rule it relies on refuses
// the program that breaks it, naming the instruction and the buffer. (The
// lit tests break whole plans zcc wrote: test/train/offload*.test.)
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/TierValidation.h"

#include "test/unit/PlanBuilder.h"
#include "test/unit/StatusMatchers.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace zplan;
using namespace zplan::plan;
using zplan::testing::addBuffer;
using zplan::testing::addInstruction;
using zplan::testing::contains;
using zplan::testing::errorOf;

namespace {

/// One group's training state around a host-side step: the shard and the
/// moments in the host tier, the gradient accumulator on the device, a
/// HOST_STAGING slot and a view of it, the hyper-parameters on the device
/// and their host copy, an nvme moment and an arena buffer.
class HostStep : public ::testing::Test {
protected:
  enum : uint32_t {
    kShard = 1,
    kGrad,
    kM,
    kV,
    kSlot,
    kGradHost, // a view of kSlot
    kHyper,
    kHyperHost,
    kNvmeMoment,
    kArena,
    kDeviceShard,
    kMaster, // mirrors kDeviceShard
  };

  void SetUp() override {
    plan.add_groups()->set_name("group0");
    add(kShard, "group0 (shard)", Buffer::SHARD, Buffer::HOST, 256);
    add(kGrad, "group0 (grad)", Buffer::STATE, Buffer::DEVICE, 256);
    add(kM, "group0 (adam m)", Buffer::STATE, Buffer::HOST, 256);
    add(kV, "group0 (adam v)", Buffer::STATE, Buffer::HOST, 256);
    add(kSlot, "gradients (host) 0", Buffer::HOST_STAGING, Buffer::HOST, 512);
    add(kGradHost, "group0 (grad, host)", Buffer::HOST_STAGING, Buffer::DEVICE,
        256);
    plan.mutable_buffers(kGradHost - 1)->set_view_of(kSlot);
    add(kHyper, "hyper", Buffer::ARENA, Buffer::DEVICE, 8);
    add(kHyperHost, "hyper-parameters (host)", Buffer::HOST_STAGING,
        Buffer::HOST, 8);
    add(kNvmeMoment, "group0 (adam v, nvme)", Buffer::STATE, Buffer::NVME, 256);
    add(kArena, "activation", Buffer::ARENA, Buffer::DEVICE, 512);
    add(kDeviceShard, "group0 (shard, device)", Buffer::SHARD, Buffer::DEVICE,
        256);
    add(kMaster, "group0 (master)", Buffer::STATE, Buffer::HOST, 256);
    plan.mutable_buffers(kMaster - 1)->set_mirrors(kDeviceShard);
  }

  void add(uint32_t id, const std::string &name, Buffer::Kind kind,
           Buffer::Tier tier, int64_t floats) {
    Buffer *buffer = addBuffer(plan, name, kind, {floats});
    ASSERT_EQ(buffer->id(), id);
    buffer->set_tier(tier);
  }

  /// An instruction on the queue the opcode table names, at "@group0".
  Instruction &emit(Opcode opcode, std::vector<uint32_t> operands,
                    std::vector<uint32_t> results,
                    std::vector<uint32_t> waitFor = {}) {
    Instruction *instruction =
        addInstruction(program, opcode, std::move(operands), std::move(results),
                       std::move(waitFor));
    instruction->set_location("@group0");
    return *instruction;
  }

  /// The step as zcc emits it (PlanEmitter::emitHostUpdate), up to the
  /// zero; the update comes from each test.
  void emitStores() {
    emit(OPCODE_TIER_STORE, {kHyper}, {kHyperHost});    // #0
    emit(OPCODE_TIER_WAIT, {kHyper}, {}, {0});          // #1
    emit(OPCODE_TIER_STORE, {kGrad}, {kGradHost}, {1}); // #2
    emit(OPCODE_TIER_WAIT, {kGrad}, {}, {2});           // #3
    emit(OPCODE_ZERO, {}, {kGrad});                     // #4
  }

  Instruction &update(std::vector<uint32_t> operands) {
    Instruction &adamw = emit(OPCODE_ADAMW, operands, {});
    adamw.set_on_host(true);
    return adamw;
  }

  std::string check() { return errorOf(validateTierCopies(plan, program)); }

  Plan plan;
  Program program;
};

TEST_F(HostStep, TheStepZccEmitsPasses) {
  emitStores();
  update({kShard, kGradHost, kM, kV, kHyperHost});
  EXPECT_EQ(check(), "");
}

TEST_F(HostStep, AHostKernelReadsHostMemoryOnly) {
  emitStores();
  update({kShard, kGrad, kM, kV, kHyperHost});
  EXPECT_TRUE(contains(check(), "instruction #5 'adamw' at '@group0' runs on "
                                "the host but names buffer 2 'group0 (grad)', "
                                "which lives in the device tier"));
}

TEST_F(HostStep, AHostKernelDoesNotReadTheNvmeFile) {
  emitStores();
  update({kShard, kGradHost, kM, kNvmeMoment, kHyperHost});
  EXPECT_TRUE(contains(check(), "names buffer 9 'group0 (adam v, nvme)', "
                                "which lives in the nvme tier"));
}

TEST_F(HostStep, OnlyAnOptimizerUpdateRunsOnTheHost) {
  emit(OPCODE_MATMUL, {kShard, kM}, {kV}).set_on_host(true);
  EXPECT_TRUE(contains(check(), "instruction #0 'matmul' at '@group0' runs on "
                                "the host; only an optimizer update"));
}

TEST_F(HostStep, AHostKernelWaitsForTheStoreOfWhatItReads) {
  emit(OPCODE_TIER_STORE, {kGrad}, {kGradHost}); // #0, no wait yet
  update({kShard, kGradHost, kM, kV, kHyperHost});
  // The store fills a view; the slot that owns the bytes is in flight.
  EXPECT_TRUE(contains(check(), "instruction #1 'adamw' at '@group0' names "
                                "buffer 6 'group0 (grad, host)' while "
                                "instruction #0 still copies it"));
}

TEST_F(HostStep, AZeroWaitsForTheStoreThatReadsTheAccumulator) {
  emit(OPCODE_TIER_STORE, {kGrad}, {kGradHost}); // #0
  emit(OPCODE_ZERO, {}, {kGrad});                // #1, too early
  EXPECT_TRUE(contains(check(), "instruction #1 'zero' at '@group0' names "
                                "buffer 2 'group0 (grad)' while instruction "
                                "#0 still copies it"));
}

TEST_F(HostStep, AZeroClearsOneTrainingStateBuffer) {
  emit(OPCODE_ZERO, {}, {kArena});
  EXPECT_TRUE(contains(check(), "instruction #0 'zero' at '@group0' zeroes "
                                "buffer 10 'activation', which is not a "
                                "training-state buffer"));
  program.Clear();
  emit(OPCODE_ZERO, {kGrad}, {kGrad});
  EXPECT_TRUE(contains(check(), "has 1 operands and 1 results; a zero has one "
                                "result and no operand"));
}

TEST_F(HostStep, OnlyAStoreIntoHostStagingMayFillAView) {
  // A fetch from the view of a slot.
  emit(OPCODE_TIER_FETCH, {kGradHost}, {kArena});
  EXPECT_TRUE(contains(check(), "instruction #0 'tier_fetch' at '@group0' "
                                "fetches buffer 6 'group0 (grad, host)', "
                                "which is not a buffer of the host or nvme "
                                "tier"));
  // A store from a device STATE buffer into training state, not staging.
  program.Clear();
  emit(OPCODE_TIER_STORE, {kGrad}, {kM});
  EXPECT_TRUE(contains(check(), "instruction #0 'tier_store' at '@group0' "
                                "stores buffer 2 'group0 (grad)' (1024 "
                                "bytes), which is not an arena buffer"));
}

TEST_F(HostStep, AMasterCopyComesBackToTheParametersItMirrorsOnly) {
  emitStores();
  update({kMaster, kGradHost, kM, kV, kHyperHost});        // #5
  emit(OPCODE_TIER_FETCH, {kMaster}, {kDeviceShard}, {5}); // #6
  emit(OPCODE_TIER_WAIT, {kDeviceShard}, {}, {6});         // #7
  EXPECT_EQ(check(), "");
  // A moment is no copy of the parameters.
  program.mutable_instructions(6)->set_operands(0, kM);
  EXPECT_TRUE(contains(check(), "instruction #6 'tier_fetch' at '@group0' "
                                "fetches into buffer 11 'group0 (shard, "
                                "device)' (1024 bytes), which is not an arena "
                                "buffer"));
}

TEST_F(HostStep, TwoStoresIntoOneSlotNeedAWaitBetweenThem) {
  emit(OPCODE_TIER_STORE, {kGrad}, {kGradHost}); // #0
  emit(OPCODE_TIER_STORE, {kArena}, {kSlot});    // #1, same bytes
  EXPECT_TRUE(contains(check(), "instruction #1 'tier_store' at '@group0' "
                                "copies buffer 5 'gradients (host) 0', which "
                                "instruction #0 still copies"));
}

TEST_F(HostStep, AnNvmeMomentIsStagedThroughHostMemory) {
  // ZeRO-Infinity's step (docs/offload.md): the moment fetched from the
  // file into a view of a host staging slot, updated there on the host,
  // and stored back.
  constexpr uint32_t kMomentSlot = kMaster + 1, kStaged = kMaster + 2;
  add(kMomentSlot, "moments (host) 0", Buffer::HOST_STAGING, Buffer::HOST, 512);
  add(kStaged, "group0 (adam v, nvme) (host)", Buffer::HOST_STAGING,
      Buffer::DEVICE, 256);
  plan.mutable_buffers(kStaged - 1)->set_view_of(kMomentSlot);
  emit(OPCODE_TIER_FETCH, {kNvmeMoment}, {kStaged});      // #0
  emit(OPCODE_TIER_WAIT, {kStaged}, {}, {0});             // #1
  update({kShard, kGradHost, kM, kStaged, kHyperHost});   // #2
  emit(OPCODE_TIER_STORE, {kStaged}, {kNvmeMoment}, {2}); // #3
  emit(OPCODE_TIER_WAIT, {kStaged}, {}, {3});             // #4
  EXPECT_EQ(check(), "");
}

TEST_F(HostStep, TwoStagedNvmeMomentsDoNotShareHostBytes) {
  constexpr uint32_t kMomentSlot = kMaster + 1, kFirst = kMaster + 2,
                     kSecond = kMaster + 3, kOtherMoment = kMaster + 4;
  add(kMomentSlot, "moments (host) 0", Buffer::HOST_STAGING, Buffer::HOST, 512);
  add(kFirst, "group0 (adam v, nvme) (host)", Buffer::HOST_STAGING,
      Buffer::DEVICE, 256);
  add(kSecond, "group1 (adam v, nvme) (host)", Buffer::HOST_STAGING,
      Buffer::DEVICE, 256);
  add(kOtherMoment, "group1 (adam v, nvme)", Buffer::STATE, Buffer::NVME, 256);
  plan.mutable_buffers(kFirst - 1)->set_view_of(kMomentSlot);
  plan.mutable_buffers(kSecond - 1)->set_view_of(kMomentSlot);
  // Side by side in the slot: both copies may be in flight.
  plan.mutable_buffers(kSecond - 1)->set_view_offset(1024);
  emit(OPCODE_TIER_FETCH, {kNvmeMoment}, {kFirst});   // #0
  emit(OPCODE_TIER_FETCH, {kOtherMoment}, {kSecond}); // #1
  emit(OPCODE_TIER_WAIT, {kFirst}, {}, {0});          // #2
  emit(OPCODE_TIER_WAIT, {kSecond}, {}, {1});         // #3
  EXPECT_EQ(check(), "");
  // Half a moment apart: the second fetch writes bytes the first still
  // writes.
  plan.mutable_buffers(kSecond - 1)->set_view_offset(512);
  EXPECT_TRUE(contains(check(), "instruction #1 'tier_fetch' at '@group0' "
                                "copies buffer 15 'group1 (adam v, nvme) "
                                "(host)', whose bytes in buffer 13 'moments "
                                "(host) 0' overlap those of buffer 14 'group0 "
                                "(adam v, nvme) (host)', which instruction #0 "
                                "still copies"));
}

TEST_F(HostStep, ACarriedGatherReadsItsStagingCopyToTheProgramsEnd) {
  // Decode's tail (docs/offload.md): the offloaded shard fetched, the
  // carried gather of it, which nothing in the program waits for, then
  // the last layers' compute; the fetch's tier_wait ends the program.
  constexpr uint32_t kCarried = kMaster + 1;
  add(kCarried, "group0 (carried)", Buffer::CARRY, Buffer::DEVICE, 512);
  emit(OPCODE_TIER_FETCH, {kShard}, {kArena});     // #0
  emit(OPCODE_CARRY_GATHER, {kArena}, {kCarried}); // #1
  emit(OPCODE_ADD, {kHyper, kHyper}, {kHyper});    // #2
  emit(OPCODE_TIER_WAIT, {kArena}, {}, {0});       // #3
  EXPECT_EQ(check(), "");
  // An instruction after the tier_wait could be given the staging bytes
  // while the collective still reads them.
  emit(OPCODE_ADD, {kHyper, kHyper}, {kHyper}); // #4
  EXPECT_TRUE(contains(check(), "instruction #3 'tier_wait' at '@group0' ends "
                                "the staging buffer of instruction #0 "
                                "'tier_fetch' before instruction #1 "
                                "'carry_gather', which reads it, is waited "
                                "for"));
}

} // namespace
