//===- TierStore.h - one rank's buffers outside the device tier -----------===//
//
// Offload (docs/offload.md): a plan may keep training state (the
// optimizer's moments, zcc --offload-optimizer) and the parameter shards
// (--offload-params) outside the device, in the
// HOST tier (host memory) or the NVME tier (a file per rank). No kernel
// reads such a buffer: the plan copies it into an arena staging buffer
// with a tier_fetch and back with a tier_store (the executor runs both on
// its comm thread), and validatePlan() refuses any other instruction that
// names it. This store holds those buffers' bytes:
//
//  - HOST: one host allocation for all of them.
//  - NVME: one file, DIR/zplan-rank<R>.tier, created at open (an existing
//    one is replaced: the state is zero at load, as the device tier's is)
//    and removed when the store is destroyed. Reads and writes are
//    pread/pwrite at fixed offsets, through the page cache (buffered I/O,
//    the default: the file's bytes count against the kernel's cache, not
//    the process's resident set), or with zrun --nvme-io direct around it
//    (O_DIRECT, whole pages through a page-aligned 4 MiB bounce buffer,
//    one copy at a time). bench/offload_bench.py measures both.
//
// A kernel that runs on the host (the host-side optimizer step) reads and
// writes HOST buffers in place, through hostAddress().
//
// A buffer never written reads as zeros without touching the file. Every
// write records the checksum of what it wrote (runtime/support/Checksum.h)
// and every read of the file compares it, as the weights file's and the
// checkpoints' checksums are compared, so that a file changed or truncated
// under a run is an error that names the buffer, not a wrong update.
//
// Reads and writes of different buffers may run on different threads;
// the plan never names one buffer in two copies at once.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_EXEC_TIERSTORE_H
#define ZPLAN_RUNTIME_EXEC_TIERSTORE_H

#include "runtime/Backend.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace zplan {

/// How the NVME tier's file is read and written (zrun --nvme-io).
enum class NvmeIo { Buffered, Direct };

class TierStore {
public:
  /// The store of rank `rank` for `plan` (validated); `out` stays null when
  /// the plan keeps every buffer on the device. `directory` holds the NVME
  /// tier's file (the plan's offload_dir unless zrun --offload-dir overrides
  /// it); a plan with NVME buffers and no directory, or a directory that cannot
  /// hold the file, is an error that names it.
  /// The host tier's pool comes from `backend`'s allocateHost() (pinned
  /// on a device, so that its copies run asynchronously); without one,
  /// from the C library.
  static Status open(const plan::Plan &plan, uint32_t rank,
                     const std::string &directory, NvmeIo io,
                     std::unique_ptr<TierStore> &out,
                     Backend *backend = nullptr);
  ~TierStore();
  TierStore(const TierStore &) = delete;
  TierStore &operator=(const TierStore &) = delete;

  /// Whether buffer `id` lives here (its tier is HOST or NVME).
  bool holds(uint32_t id) const { return slots.count(id) != 0; }
  /// Copies all of buffer `id`'s bytes to `target` (host memory).
  Status read(uint32_t id, void *target);
  /// Copies all of buffer `id`'s bytes from `source` (host memory).
  Status write(uint32_t id, const void *source);
  /// Copies `bytes` from `source` into HOST buffer `id` at byte `offset`
  /// (a view's part of it); the rest reads as before (zeros if nothing was
  /// written). Not for the nvme tier, whose checksums cover whole buffers.
  Status writePart(uint32_t id, uint64_t offset, const void *source,
                   uint64_t bytes);
  /// The address of HOST buffer `id` in the host pool, for a kernel that
  /// runs on the host (Instruction.on_host, the host-side optimizer step):
  /// its bytes are zeroed first if nothing has written them, and count as
  /// written from now on, since the kernel may write them in place. Null
  /// for a buffer that is not in the host tier.
  uint8_t *hostAddress(uint32_t id);
  /// The checksum (runtime/support/Checksum.h) of buffer `id`'s bytes now:
  /// the one its last write recorded in the nvme tier, computed over the
  /// host tier's bytes (zrun --check: what no run may change).
  Status checksumOf(uint32_t id, uint64_t &out) const;

  /// The bytes each tier holds on this rank.
  uint64_t hostBytes() const { return hostSize; }
  uint64_t nvmeBytes() const { return fileSize; }
  /// The NVME tier's file; empty when there is none.
  const std::string &filePath() const { return path; }

private:
  TierStore() = default;

  struct Slot {
    plan::Buffer::Tier tier = plan::Buffer::DEVICE;
    uint64_t offset = 0; // in the host pool or the file
    uint64_t bytes = 0;
    std::string name;
    /// Whether anything was written (else it reads as zeros), and the
    /// checksum of what was.
    bool written = false;
    uint64_t checksum = 0;
  };
  std::map<uint32_t, Slot> slots;
  /// Page-aligned, so that a host kernel's vector loads find every slot
  /// aligned (slots start on page boundaries). Allocated when some buffer
  /// lives in the host tier.
  std::unique_ptr<BackendMemory> hostMemory;
  uint8_t *hostPool() const { return hostMemory->data(); }
  uint64_t hostSize = 0;
  Status transfer(const Slot &slot, bool write, uint8_t *bytes, uint64_t offset,
                  uint64_t count);

  int file = -1;
  bool direct = false;
  /// Direct I/O: the page-aligned buffer every transfer passes through.
  std::unique_ptr<BackendMemory> bounce;
  std::mutex bounceMutex;
  std::string path;
  uint64_t fileSize = 0;
};

} // namespace zplan

#endif // ZPLAN_RUNTIME_EXEC_TIERSTORE_H
