//===- Memory.cpp - one rank's memory for a plan --------------------------===//
//
// validatePlan() proved that ids, view chains and arena offsets are in range;
// what it cannot know is the size of the sections read here, so a SHARD or
// PERSISTENT buffer is checked against the section it points into before
// its address is handed out.
//
//===----------------------------------------------------------------------===//

#include "runtime/Memory.h"

#include <algorithm>
#include <cstring>
#include <sstream>

using namespace zplan;
using plan::Status;
using plan::failure;
using plan::inQuotes;

namespace {


uint64_t roundUp(uint64_t bytes) {
  return (bytes + kMemoryAlignment - 1) / kMemoryAlignment * kMemoryAlignment;
}

/// `bytes` (at least one alignment unit) of zeroed, aligned memory; null when
/// the allocation fails.
uint8_t *allocateAligned(uint64_t bytes) {
  uint64_t size = std::max<uint64_t>(roundUp(bytes), kMemoryAlignment);
  auto *memory =
      static_cast<uint8_t *>(std::aligned_alloc(kMemoryAlignment, size));
  // Touch every page now, so that the first run does not pay for faults and
  // the RSS reported by --stats includes the arena.
  if (memory)
    std::memset(memory, 0, size);
  return memory;
}

std::string describeBuffer(const plan::Buffer &buffer) {
  return "buffer " + std::to_string(buffer.id()) + " '" + buffer.name() + "'";
}

} // namespace

Status RankMemory::load(const std::string &planPath, const plan::Plan &plan,
                        uint32_t rank, std::unique_ptr<RankMemory> &out) {
  std::unique_ptr<RankMemory> memory(new RankMemory());
  memory->rankIndex = rank;
  if (Status status =
          plan::readRankWeights(planPath, plan, rank, memory->shards);
      !status.ok())
    return status;
  if (Status status =
          plan::readPersistentWeights(planPath, plan, memory->persistent);
      !status.ok())
    return status;

  uint64_t poolBytes = 0;
  for (const plan::Constant &constant : plan.constants()) {
    memory->constantOffsets.push_back(poolBytes);
    poolBytes += roundUp(constant.data().size());
  }
  memory->constantPool.reset(allocateAligned(poolBytes));
  if (!memory->constantPool)
    return failure("cannot allocate ", poolBytes, " bytes for the constants");
  for (int index = 0; index < plan.constants_size(); ++index) {
    const std::string &data = plan.constants(index).data();
    std::memcpy(memory->constantPool.get() + memory->constantOffsets[index],
                data.data(), data.size());
  }

  memory->arenaSize = plan.arena_bytes();
  memory->arenaStorage.reset(allocateAligned(memory->arenaSize));
  if (!memory->arenaStorage)
    return failure("cannot allocate the arena of ", memory->arenaSize,
                   " bytes");

  if (Status status = memory->resolve(plan); !status.ok())
    return status;
  out = std::move(memory);
  return Status::success();
}

Status RankMemory::resolve(const plan::Plan &plan) {
  int count = plan.buffers_size();
  addresses.assign(count + 1, nullptr);
  roots.assign(count + 1, 0);
  rootOffsets.assign(count + 1, 0);
  for (int index = 0; index < count; ++index) {
    const plan::Buffer &buffer = plan.buffers(index);
    uint32_t id = buffer.id();
    // Follow the view chain (acyclic, checked by validatePlan) to the
    // buffer that owns the storage; each view_offset is relative to the
    // buffer it views.
    uint32_t root = id;
    uint64_t offset = 0;
    while (plan.buffers(root - 1).view_of() != 0) {
      offset += plan.buffers(root - 1).view_offset();
      root = plan.buffers(root - 1).view_of();
    }
    roots[id] = root;
    rootOffsets[id] = offset;
  }

  for (int index = 0; index < count; ++index) {
    const plan::Buffer &buffer = plan.buffers(index);
    if (buffer.view_of() != 0)
      continue;
    uint8_t *base = nullptr;
    switch (buffer.kind()) {
    case plan::Buffer::ARENA:
      base = arenaStorage.get() + buffer.offset();
      break;
    case plan::Buffer::CONSTANT:
      base = constantPool.get() + constantOffsets[buffer.constant()];
      break;
    case plan::Buffer::SHARD:
    case plan::Buffer::PERSISTENT: {
      bool shard = buffer.kind() == plan::Buffer::SHARD;
      const plan::Group &group = plan.groups(buffer.group());
      std::vector<uint8_t> &section = shard ? shards : persistent;
      uint64_t end;
      if (__builtin_add_overflow(group.weights_offset(), buffer.bytes(),
                                 &end) ||
          end > section.size())
        return failure(describeBuffer(buffer), " (", buffer.bytes(),
                       " bytes at weights offset ", group.weights_offset(),
                       ") ends past the ", shard ? "rank's" : "persistent",
                       " weights section of ", section.size(), " bytes");
      base = section.data() + group.weights_offset();
      break;
    }
    default:
      return failure(describeBuffer(buffer), " has an unknown kind");
    }
    addresses[buffer.id()] = base;
  }
  for (int index = 0; index < count; ++index) {
    uint32_t id = plan.buffers(index).id();
    addresses[id] = addresses[roots[id]] + rootOffsets[id];
  }
  return Status::success();
}
