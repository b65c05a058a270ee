//===- TierStore.cpp - one rank's buffers outside the device tier ---------===//

#include "runtime/exec/TierStore.h"

#include "runtime/support/Checksum.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

using namespace zplan;

namespace {

/// Slots start on 4 KiB boundaries: whole pages of the file and the pool.
constexpr uint64_t kSlotAlignment = 4096;

uint64_t alignUp(uint64_t bytes) {
  return (bytes + kSlotAlignment - 1) / kSlotAlignment * kSlotAlignment;
}

const char *tierName(plan::Buffer::Tier tier) {
  return tier == plan::Buffer::NVME ? "nvme" : "host";
}

} // namespace

Status TierStore::open(const plan::Plan &plan, uint32_t rank,
                       const std::string &directory,
                       std::unique_ptr<TierStore> &out) {
  std::unique_ptr<TierStore> store(new TierStore());
  for (const plan::Buffer &buffer : plan.buffers()) {
    if (buffer.tier() == plan::Buffer::DEVICE)
      continue;
    Slot slot;
    slot.tier = buffer.tier();
    slot.bytes = buffer.bytes();
    slot.name = buffer.name();
    uint64_t &size =
        slot.tier == plan::Buffer::NVME ? store->fileSize : store->hostSize;
    slot.offset = size;
    size += alignUp(slot.bytes);
    store->slots[buffer.id()] = slot;
  }
  if (store->slots.empty())
    return Status::success();
  if (store->hostSize) {
    store->hostPool.reset(static_cast<uint8_t *>(
        std::aligned_alloc(kSlotAlignment, store->hostSize)));
    if (!store->hostPool)
      return failure("cannot allocate the host tier (", store->hostSize,
                     " bytes of offloaded state)");
  }
  if (store->fileSize) {
    if (directory.empty())
      return failure("the plan keeps ", store->fileSize,
                     " bytes per rank in the nvme tier but names no "
                     "directory: compile with --offload-dir DIR or run "
                     "zrun with --offload-dir DIR");
    store->path = directory + "/zplan-rank" + std::to_string(rank) + ".tier";
    store->file = ::open(store->path.c_str(),
                         O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (store->file < 0)
      return failure("cannot create the nvme tier's file '", store->path,
                     "': ", std::strerror(errno));
    // The file's length is reserved now, so that a full disk fails here
    // and not in the middle of an optimizer step.
    if (int error = ::posix_fallocate(store->file, 0,
                                      static_cast<off_t>(store->fileSize)))
      return failure("cannot reserve ", store->fileSize,
                     " bytes for the nvme tier's file '", store->path,
                     "': ", std::strerror(error));
  }
  out = std::move(store);
  return Status::success();
}

TierStore::~TierStore() {
  if (file >= 0) {
    ::close(file);
    ::unlink(path.c_str());
  }
}

Status TierStore::read(uint32_t id, void *target) {
  auto found = slots.find(id);
  if (found == slots.end())
    return failure("buffer ", id, " is not in a host or nvme tier");
  Slot &slot = found->second;
  if (!slot.written) {
    std::memset(target, 0, slot.bytes);
    return Status::success();
  }
  if (slot.tier == plan::Buffer::HOST) {
    std::memcpy(target, hostPool.get() + slot.offset, slot.bytes);
    return Status::success();
  }
  auto *bytes = static_cast<uint8_t *>(target);
  for (uint64_t done = 0; done < slot.bytes;) {
    ssize_t got = ::pread(file, bytes + done, slot.bytes - done,
                          static_cast<off_t>(slot.offset + done));
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      return failure("cannot read ", inQuotes(slot.name), " from the ",
                     tierName(slot.tier), " tier's file '", path,
                     "': ", got < 0 ? std::strerror(errno) : "it ended early");
    done += static_cast<uint64_t>(got);
  }
  if (checksum(target, slot.bytes) != slot.checksum)
    return failure(inQuotes(slot.name),
                   " read back from the nvme tier's "
                   "file '",
                   path,
                   "' fails its checksum: the file changed "
                   "under the run");
  return Status::success();
}

uint8_t *TierStore::hostAddress(uint32_t id) {
  auto found = slots.find(id);
  if (found == slots.end() || found->second.tier != plan::Buffer::HOST)
    return nullptr;
  Slot &slot = found->second;
  uint8_t *address = hostPool.get() + slot.offset;
  if (!slot.written)
    std::memset(address, 0, slot.bytes);
  slot.written = true;
  return address;
}

Status TierStore::checksumOf(uint32_t id, uint64_t &out) const {
  auto found = slots.find(id);
  if (found == slots.end())
    return failure("buffer ", id, " is not in a host or nvme tier");
  const Slot &slot = found->second;
  if (!slot.written) {
    std::vector<uint8_t> zeros(slot.bytes);
    out = checksum(zeros.data(), zeros.size());
  } else if (slot.tier == plan::Buffer::HOST) {
    out = checksum(hostPool.get() + slot.offset, slot.bytes);
  } else {
    out = slot.checksum;
  }
  return Status::success();
}

Status TierStore::write(uint32_t id, const void *source) {
  auto found = slots.find(id);
  if (found == slots.end())
    return failure("buffer ", id, " is not in a host or nvme tier");
  Slot &slot = found->second;
  if (slot.tier == plan::Buffer::HOST) {
    std::memcpy(hostPool.get() + slot.offset, source, slot.bytes);
    slot.written = true;
    return Status::success();
  }
  const auto *bytes = static_cast<const uint8_t *>(source);
  for (uint64_t done = 0; done < slot.bytes;) {
    ssize_t put = ::pwrite(file, bytes + done, slot.bytes - done,
                           static_cast<off_t>(slot.offset + done));
    if (put < 0 && errno == EINTR)
      continue;
    if (put <= 0)
      return failure("cannot write ", inQuotes(slot.name), " to the ",
                     tierName(slot.tier), " tier's file '", path,
                     "': ", put < 0 ? std::strerror(errno) : "no progress");
    done += static_cast<uint64_t>(put);
  }
  slot.checksum = checksum(source, slot.bytes);
  slot.written = true;
  return Status::success();
}
