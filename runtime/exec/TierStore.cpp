//===- TierStore.cpp - one rank's buffers outside the device tier ---------===//

#include "runtime/exec/TierStore.h"

#include "runtime/support/Checksum.h"

#include <algorithm>
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

/// Direct I/O moves whole pages through a page-aligned buffer of this many
/// bytes (a staging buffer has the arena's 64-byte alignment, not the
/// page's that O_DIRECT needs).
constexpr uint64_t kBounceBytes = 4 << 20;

} // namespace

Status TierStore::open(const plan::Plan &plan, uint32_t rank,
                       const std::string &directory, NvmeIo io,
                       std::unique_ptr<TierStore> &out, Backend *backend) {
  std::unique_ptr<TierStore> store(new TierStore());
  store->direct = io == NvmeIo::Direct;
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
    std::string what = "the host tier (offloaded state)";
    ZR_RETURN_IF_ERROR(backend ? backend->allocateHost(store->hostSize, what,
                                                       store->hostMemory)
                               : Backend::allocateAlignedHost(
                                     store->hostSize, what, store->hostMemory));
  }
  if (store->fileSize) {
    if (directory.empty())
      return failure("the plan keeps ", store->fileSize,
                     " bytes per rank in the nvme tier but names no "
                     "directory: compile with --offload-dir DIR or run "
                     "zrun with --offload-dir DIR");
    store->path = directory + "/zplan-rank" + std::to_string(rank) + ".tier";
    int flags = O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC;
    store->file = ::open(store->path.c_str(),
                         store->direct ? flags | O_DIRECT : flags, 0600);
    if (store->file < 0 && store->direct && errno == EINVAL)
      return failure("the file system of '", directory,
                     "' does not take direct I/O (zrun --nvme-io direct); "
                     "use --nvme-io buffered");
    if (store->file < 0)
      return failure("cannot create the nvme tier's file '", store->path,
                     "': ", std::strerror(errno));
    if (store->direct) {
      ZR_RETURN_IF_ERROR(Backend::allocateAlignedHost(
          kBounceBytes, "the nvme tier's direct I/O", store->bounce));
    }
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
    std::memcpy(target, hostPool() + slot.offset, slot.bytes);
    return Status::success();
  }
  auto *bytes = static_cast<uint8_t *>(target);
  if (!direct) {
    ZR_RETURN_IF_ERROR(transfer(slot, false, bytes, slot.offset, slot.bytes));
  } else {
    // Whole pages through the bounce buffer (the slot owns its last
    // page's padding).
    std::lock_guard<std::mutex> lock(bounceMutex);
    for (uint64_t done = 0; done < slot.bytes; done += kBounceBytes) {
      uint64_t chunk = std::min(kBounceBytes, slot.bytes - done);
      ZR_RETURN_IF_ERROR(transfer(slot, false, bounce->data(),
                                  slot.offset + done, alignUp(chunk)));
      std::memcpy(bytes + done, bounce->data(), chunk);
    }
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

Status TierStore::writePart(uint32_t id, uint64_t offset, const void *source,
                            uint64_t bytes) {
  auto found = slots.find(id);
  if (found == slots.end() || found->second.tier != plan::Buffer::HOST)
    return failure("buffer ", id, " is not in the host tier");
  Slot &slot = found->second;
  if (offset > slot.bytes || bytes > slot.bytes - offset)
    return failure("bytes ", offset, "..", offset + bytes, " are outside ",
                   inQuotes(slot.name), " (", slot.bytes, " bytes)");
  std::memcpy(hostAddress(id) + offset, source, bytes);
  return Status::success();
}

uint8_t *TierStore::hostAddress(uint32_t id) {
  auto found = slots.find(id);
  if (found == slots.end() || found->second.tier != plan::Buffer::HOST)
    return nullptr;
  Slot &slot = found->second;
  uint8_t *address = hostPool() + slot.offset;
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
    out = checksum(hostPool() + slot.offset, slot.bytes);
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
    std::memcpy(hostPool() + slot.offset, source, slot.bytes);
    slot.written = true;
    return Status::success();
  }
  const auto *bytes = static_cast<const uint8_t *>(source);
  if (!direct) {
    ZR_RETURN_IF_ERROR(transfer(slot, true, const_cast<uint8_t *>(bytes),
                                slot.offset, slot.bytes));
  } else {
    std::lock_guard<std::mutex> lock(bounceMutex);
    for (uint64_t done = 0; done < slot.bytes; done += kBounceBytes) {
      uint64_t chunk = std::min(kBounceBytes, slot.bytes - done);
      std::memcpy(bounce->data(), bytes + done, chunk);
      // The last page's padding: zeros, not the previous chunk's bytes.
      std::memset(bounce->data() + chunk, 0, alignUp(chunk) - chunk);
      ZR_RETURN_IF_ERROR(transfer(slot, true, bounce->data(),
                                  slot.offset + done, alignUp(chunk)));
    }
  }
  slot.checksum = checksum(source, slot.bytes);
  slot.written = true;
  return Status::success();
}

/// pread or pwrite of `bytes` at file offset `offset`, resumed after a
/// short transfer or a signal.
Status TierStore::transfer(const Slot &slot, bool write, uint8_t *bytes,
                           uint64_t offset, uint64_t count) {
  for (uint64_t done = 0; done < count;) {
    ssize_t moved = write ? ::pwrite(file, bytes + done, count - done,
                                     static_cast<off_t>(offset + done))
                          : ::pread(file, bytes + done, count - done,
                                    static_cast<off_t>(offset + done));
    if (moved < 0 && errno == EINTR)
      continue;
    if (moved <= 0)
      return failure("cannot ", write ? "write " : "read ", inQuotes(slot.name),
                     write ? " to" : " from", " the nvme tier's file '", path,
                     "': ",
                     moved < 0 ? std::strerror(errno)
                               : (write ? "no progress" : "it ended early"));
    done += static_cast<uint64_t>(moved);
  }
  return Status::success();
}
