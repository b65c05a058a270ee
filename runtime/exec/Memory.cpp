//===- Memory.cpp - one rank's memory for a plan --------------------------===//
//
// validatePlan() proved that ids, view chains and arena offsets are in range;
// what it cannot know is the size of the sections read here, so a SHARD or
// PERSISTENT buffer is checked against the section it points into before
// its address is handed out.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/Memory.h"

#include "runtime/plan/PlanQueries.h"
#include "runtime/plan/Weights.h"

#include <algorithm>
#include <cstring>
#include <sstream>

using namespace zplan;

namespace {

uint64_t roundUp(uint64_t bytes) {
  return (bytes + kMemoryAlignment - 1) / kMemoryAlignment * kMemoryAlignment;
}

} // namespace

Status RankMemory::load(const std::string &planPath, const plan::Plan &plan,
                        uint32_t rank, Backend &backend,
                        std::unique_ptr<RankMemory> &out,
                        GenerationState generation,
                        const std::string &offloadDir, NvmeIo nvmeIo) {
  std::unique_ptr<RankMemory> memory(new RankMemory(backend));
  memory->rankIndex = rank;
  // What the plan offloads (docs/offload.md) lives in the tier store, not
  // on the device.
  ZR_RETURN_IF_ERROR(TierStore::open(
      plan, rank, offloadDir.empty() ? plan.offload_dir() : offloadDir, nvmeIo,
      memory->tiers, &backend));
  std::vector<uint8_t> hostBytes;
  ZR_RETURN_IF_ERROR(memory->loadShards(planPath, plan, hostBytes));
  if (Status status = backend.adopt(std::move(hostBytes), memory->shards);
      !status.ok())
    return status;
  hostBytes.clear();
  if (Status status = plan::readPersistentWeights(planPath, plan, hostBytes);
      !status.ok())
    return status;
  if (Status status = backend.adopt(std::move(hostBytes), memory->persistent);
      !status.ok())
    return status;

  uint64_t poolBytes = 0;
  for (const plan::Constant &constant : plan.constants()) {
    memory->constantOffsets.push_back(poolBytes);
    poolBytes += roundUp(constant.data().size());
  }
  if (Status status =
          backend.allocate(poolBytes, "the constants", memory->constantPool);
      !status.ok())
    return status;
  for (int index = 0; index < plan.constants_size(); ++index) {
    const std::string &data = plan.constants(index).data();
    if (Status status = backend.copyFromHost(memory->constantPool->data() +
                                                 memory->constantOffsets[index],
                                             data.data(), data.size());
        !status.ok())
      return status;
  }

  // Training state (gradient accumulators, optimizer moments): zero at
  // load (allocate() zeroes), in one pool; what the plan offloads, in the
  // tier store.
  uint64_t stateBytes = 0;
  for (const plan::Buffer &buffer : plan.buffers())
    if (buffer.kind() == plan::Buffer::STATE && buffer.view_of() == 0 &&
        buffer.tier() == plan::Buffer::DEVICE) {
      memory->stateOffsets[buffer.id()] = stateBytes;
      stateBytes += roundUp(buffer.bytes());
    }
  if (Status status =
          backend.allocate(stateBytes, "the training state", memory->statePool);
      !status.ok())
    return status;

  // Generation: the KV caches and the resident groups' copies, in one pool
  // (allocateGeneration), now or when a generation begins.
  for (const plan::Buffer &buffer : plan.buffers())
    if ((buffer.kind() == plan::Buffer::CACHE ||
         buffer.kind() == plan::Buffer::RESIDENT) &&
        buffer.view_of() == 0) {
      memory->generationOffsets[buffer.id()] = memory->generationSize;
      memory->generationSize += roundUp(buffer.bytes());
    }
  memory->residentCopies.assign(plan.buffers_size() + 1, ResidentCopy());
  memory->carriedCopies.assign(plan.buffers_size() + 1, CarriedCopy());

  memory->arenaSize = plan.arena_bytes();
  if (Status status = backend.allocate(memory->arenaSize, "the arena",
                                       memory->arenaStorage);
      !status.ok())
    return status;
  if (Status status = memory->resolve(plan); !status.ok())
    return status;
  for (const BackendMemory *section :
       {memory->shards.get(), memory->persistent.get(),
        memory->constantPool.get(), memory->statePool.get(),
        memory->arenaStorage.get()})
    memory->hold(section->bytes());
  if (generation == GenerationState::AtLoad)
    ZR_RETURN_IF_ERROR(memory->allocateGeneration());
  for (const plan::Buffer &buffer : plan.buffers())
    if (buffer.mirrors() != 0)
      memory->mirrors.push_back(
          {buffer.id(), buffer.mirrors(), buffer.bytes()});
  ZR_RETURN_IF_ERROR(memory->refreshMirrors());
  out = std::move(memory);
  return Status::success();
}

Status RankMemory::refreshMirrors() {
  for (const Mirror &mirror : mirrors) {
    uint8_t *host = tiers ? tiers->hostAddress(mirror.id) : nullptr;
    if (!host)
      return failure("buffer ", mirror.id, " mirrors buffer ", mirror.source,
                     " but is not in the host tier");
    ZR_RETURN_IF_ERROR(
        owner->copyToHost(host, addresses[mirror.source], mirror.bytes));
  }
  return Status::success();
}

/// The rank's shards: where every one is on the device, its weights
/// section as the file holds it, read whole. Where some are offloaded
/// (--offload-params), one shard at a time: an offloaded one goes to the
/// tier store, the others into `out`, packed, so that the section is never
/// in host memory whole.
Status RankMemory::loadShards(const std::string &planPath,
                              const plan::Plan &plan,
                              std::vector<uint8_t> &out) {
  for (const plan::Buffer &buffer : plan.buffers())
    if (buffer.kind() == plan::Buffer::SHARD && buffer.view_of() == 0) {
      uint64_t layoutOffset = plan.groups(buffer.group()).weights_offset();
      shardLayout.push_back({buffer.id(), layoutOffset, buffer.bytes(),
                             buffer.tier() != plan::Buffer::DEVICE});
    }
  weightsSection = plan.weights_bytes_per_rank();
  shardsOffloaded =
      std::any_of(shardLayout.begin(), shardLayout.end(),
                  [](const ShardSlot &slot) { return slot.tiered; });
  if (!shardsOffloaded) {
    for (ShardSlot &slot : shardLayout)
      slot.deviceOffset = slot.layoutOffset;
    return plan::readRankWeights(planPath, plan, rankIndex, out);
  }
  uint64_t packed = 0;
  for (ShardSlot &slot : shardLayout) {
    if (!slot.tiered) {
      slot.deviceOffset = packed;
      packed += roundUp(slot.bytes);
    }
  }
  out.assign(packed, 0);
  // A checkpoint's parts: the slots in layout order, padding between.
  std::vector<size_t> order(shardLayout.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return shardLayout[a].layoutOffset < shardLayout[b].layoutOffset;
  });
  uint64_t at = 0;
  for (size_t index : order) {
    const ShardSlot &slot = shardLayout[index];
    if (slot.layoutOffset > at)
      shardPartList.push_back({-1, slot.layoutOffset - at});
    shardPartList.push_back({static_cast<int64_t>(index), slot.bytes});
    at = slot.layoutOffset + slot.bytes;
  }
  if (weightsSection > at)
    shardPartList.push_back({-1, weightsSection - at});
  return plan::readRankShards(
      planPath, plan, rankIndex,
      [&](const plan::Buffer &shard, const uint8_t *bytes) -> Status {
        const ShardSlot &slot = shardSlot(shard.id());
        if (slot.tiered)
          return tiers->write(shard.id(), bytes);
        std::memcpy(out.data() + slot.deviceOffset, bytes, slot.bytes);
        return Status::success();
      });
}

const RankMemory::ShardSlot &RankMemory::shardSlot(uint32_t id) const {
  // shardLayout is in buffer order, so by increasing id.
  return *std::lower_bound(
      shardLayout.begin(), shardLayout.end(), id,
      [](const ShardSlot &slot, uint32_t key) { return slot.id < key; });
}

std::vector<uint64_t> RankMemory::shardParts() const {
  std::vector<uint64_t> sizes;
  for (const ShardPart &part : shardPartList)
    sizes.push_back(part.bytes);
  return sizes;
}

Status RankMemory::readShardPart(size_t part, uint8_t *host) const {
  const ShardPart &entry = shardPartList.at(part);
  if (entry.slot < 0) {
    std::memset(host, 0, entry.bytes);
    return Status::success();
  }
  const ShardSlot &slot = shardLayout[static_cast<size_t>(entry.slot)];
  return slot.tiered
             ? tiers->read(slot.id, host)
             : owner->copyToHost(host, shards->data() + slot.deviceOffset,
                                 slot.bytes);
}

Status RankMemory::writeShardPart(size_t part, const uint8_t *host) {
  weightsWritten();
  const ShardPart &entry = shardPartList.at(part);
  if (entry.slot < 0)
    return Status::success();
  const ShardSlot &slot = shardLayout[static_cast<size_t>(entry.slot)];
  return slot.tiered ? tiers->write(slot.id, host)
                     : owner->copyFromHost(shards->data() + slot.deviceOffset,
                                           host, slot.bytes);
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
    while (plan::bufferOf(plan, root).view_of() != 0) {
      offset += plan::bufferOf(plan, root).view_offset();
      root = plan::bufferOf(plan, root).view_of();
    }
    roots[id] = root;
    rootOffsets[id] = offset;
  }
  weightRoots.assign(count + 1, false);
  for (const plan::Buffer &buffer : plan.buffers())
    weightRoots[buffer.id()] =
        buffer.view_of() == 0 && (buffer.kind() == plan::Buffer::SHARD ||
                                  buffer.kind() == plan::Buffer::PERSISTENT ||
                                  buffer.kind() == plan::Buffer::CONSTANT);

  for (int index = 0; index < count; ++index) {
    const plan::Buffer &buffer = plan.buffers(index);
    if (buffer.view_of() != 0)
      continue;
    uint8_t *base = nullptr;
    switch (buffer.kind()) {
    case plan::Buffer::ARENA:
    case plan::Buffer::CARRY:
      base = arenaStorage->data() + buffer.offset();
      break;
    case plan::Buffer::CONSTANT:
      base = constantPool->data() + constantOffsets[buffer.constant()];
      break;
    case plan::Buffer::SHARD:
    case plan::Buffer::PERSISTENT: {
      bool shard = buffer.kind() == plan::Buffer::SHARD;
      // An offloaded shard has no device address: the tier store holds it.
      if (buffer.tier() != plan::Buffer::DEVICE)
        break;
      const plan::Group &group = plan.groups(buffer.group());
      const BackendMemory &section = shard ? *shards : *persistent;
      uint64_t offset =
          shard ? shardSlot(buffer.id()).deviceOffset : group.weights_offset();
      uint64_t end;
      if (__builtin_add_overflow(offset, buffer.bytes(), &end) ||
          end > section.bytes())
        return failure(plan::describeBuffer(buffer), " (", buffer.bytes(),
                       " bytes at weights offset ", offset, ") ends past the ",
                       shard ? "rank's" : "persistent", " weights section of ",
                       section.bytes(), " bytes");
      base = section.data() + offset;
      break;
    }
    case plan::Buffer::STATE:
      // A HOST or NVME buffer has no device address: the tier store holds it.
      if (buffer.tier() == plan::Buffer::DEVICE)
        base = statePool->data() + stateOffsets[buffer.id()];
      break;
    case plan::Buffer::CACHE:
    case plan::Buffer::RESIDENT:
      // Resolved by allocateGeneration().
      break;
    case plan::Buffer::HOST_STAGING:
      // Host memory of the host-side optimizer step: the tier store holds it.
      break;
    default:
      return failure(plan::describeBuffer(buffer), " has an unknown kind");
    }
    addresses[buffer.id()] = base;
  }
  for (int index = 0; index < count; ++index) {
    uint32_t id = plan.buffers(index).id();
    if (generationOffsets.count(roots[id]))
      generationBuffers.push_back(id);
    else
      addresses[id] = addresses[roots[id]] + rootOffsets[id];
  }
  return Status::success();
}

void RankMemory::hold(uint64_t bytes) {
  held += bytes;
  peak = std::max(peak, held);
}

Status RankMemory::allocateGeneration() {
  if (generationPool)
    return failure("the generation state is already allocated: a generation "
                   "began before the last one ended");
  std::unique_ptr<BackendMemory> pool;
  ZR_RETURN_IF_ERROR(owner->allocate(
      generationSize, "the KV caches and resident copies", pool));
  for (uint32_t id : generationBuffers)
    addresses[id] =
        pool->data() + generationOffsets.at(roots[id]) + rootOffsets[id];
  std::fill(residentCopies.begin(), residentCopies.end(), ResidentCopy());
  std::fill(carriedCopies.begin(), carriedCopies.end(), CarriedCopy());
  hold(pool->bytes());
  generationPool = std::move(pool);
  return Status::success();
}

void RankMemory::releaseGeneration() {
  if (!generationPool)
    return;
  held -= generationPool->bytes();
  generationPool.reset();
  for (uint32_t id : generationBuffers)
    addresses[id] = nullptr;
}

uint32_t RankMemory::readyCarriedCopy() const {
  for (size_t id = 0; id < carriedCopies.size(); ++id)
    if (carriedCopies[id].state == CarriedCopy::State::Ready)
      return static_cast<uint32_t>(id);
  return 0;
}
