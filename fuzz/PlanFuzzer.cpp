//===- PlanFuzzer.cpp - libFuzzer harness for the plan loader -------------===//
//
// Bytes -> parsePlan -> validatePlan at world sizes 1, 2 and 4 -> the
// weights reader. A plan file ends in the checksum of its body, so almost
// every mutation is refused by that check alone; to reach validation the
// harness also re-seals each input that parses as a Plan message (stamps its
// constants' checksums, appends a fresh body checksum) and runs that through
// the same path. zrun trusts a validated plan: the executor indexes buffers,
// offsets and instructions without checks. So every input must be either
// refused with a message or validated without any sanitizer report; a
// validated plan then has its weights read from a sparse file of exactly the
// size its layout asks for (one byte short every other input, for the
// short-file check), at every rank.
//
//===----------------------------------------------------------------------===//

#include "fuzz/FuzzSupport.h"
#include "runtime/plan/PlanLoader.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

/// Weights files bigger than this are not materialised: validation is what
/// is fuzzed, not the disk.
constexpr uint64_t kMaxWeightsFileBytes = uint64_t(16) << 20;

/// The least size of a complete weights file (see "Weights" in
/// PlanLoader.h), or false when it overflows.
bool requiredWeightsBytes(const zplan::plan::Plan &plan, uint64_t &bytes) {
  uint64_t rankSections, persistentEnd;
  uint64_t persistent = zplan::plan::persistentWeightsBytes(plan);
  if (__builtin_mul_overflow(static_cast<uint64_t>(plan.world_size()),
                             plan.weights_bytes_per_rank(), &rankSections) ||
      __builtin_add_overflow(plan.persistent_weights_offset(), persistent,
                             &persistentEnd))
    return false;
  bytes = std::max(rankSections, persistentEnd);
  return true;
}

/// Reads every rank's section and the persistent section of `plan` from a
/// sparse file of `fileBytes` bytes. The results are not checked: only the
/// absence of sanitizer reports is.
void readWeights(zplan::plan::Plan plan, uint64_t fileBytes) {
  std::filesystem::path weights =
      zplan::fuzz::workDirectory / "plan.zplan.weights";
  int fd = open(weights.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0600);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(fileBytes)) != 0) {
    std::perror("zplan-fuzz-plan: cannot make the weights file");
    std::abort();
  }
  close(fd);
  // A plan names its weights relative to itself; keep the reader inside the
  // work directory whatever the input says.
  if (!plan.weights_file().empty())
    plan.set_weights_file("plan.zplan.weights");
  std::string planPath = (zplan::fuzz::workDirectory / "plan.zplan").string();
  std::vector<uint8_t> bytes;
  for (uint32_t rank = 0; rank < plan.world_size(); ++rank)
    (void)zplan::plan::readRankWeights(planPath, plan, rank, bytes);
  (void)zplan::plan::readPersistentWeights(planPath, plan, bytes);
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  zplan::fuzz::initializeHarness("plan");
  return 0;
}

/// parsePlan, then validatePlan at N = 1, 2, 4 and, for a valid plan, the
/// weights reader.
static void loadAndValidate(std::string_view bytes, size_t size) {
  zplan::plan::Plan plan;
  if (!zplan::plan::parsePlan(bytes, "fuzz.zplan", plan).ok())
    return;
  for (uint32_t worldSize : {1u, 2u, 4u}) {
    if (!zplan::plan::validatePlan(plan, worldSize).ok())
      continue;
    uint64_t required;
    if (requiredWeightsBytes(plan, required) &&
        required <= kMaxWeightsFileBytes)
      readWeights(plan, required > 0 && (size & 1) ? required - 1 : required);
  }
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char *>(data), size);
  loadAndValidate(bytes, size);
  zplan::plan::Plan message;
  if (message.ParseFromArray(data, static_cast<int>(size))) {
    message.clear_body_checksum();
    zplan::plan::stampConstantChecksums(message);
    loadAndValidate(zplan::plan::serializePlan(message), size);
  }
  return 0;
}
