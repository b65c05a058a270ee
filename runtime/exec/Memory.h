//===- Memory.h - one rank's memory for a plan: weights, constants, arena -===//
//
// Everything a rank's executor reads or writes lives in memory set up here,
// once, before the first run: this rank's section of the weights file (its
// shard of every sharded group) and the persistent section (small groups,
// whole), the plan's constants, and one arena of Plan.arena_bytes for every
// transient buffer (activations, gathered copies). Nothing is allocated
// after load(). Every buffer id of the plan resolves to an address.
// A generation plan adds its KV caches (CACHE buffers) and the resident
// groups' gathered copies (RESIDENT buffers): outside the arena like the
// training state, kept across the programs of one generation, in a pool of
// their own (a checkpoint saves the training state, not a generation's).
// load() allocates that pool (zeroed: the first prompt expects nothing in
// the cache) unless told GenerationState::Deferred; then it is the one thing
// allocated after load(): allocateGeneration() when a generation begins,
// releaseGeneration() when it ends, so that a plan that trains and generates
// holds the generation state only while it generates and is back to its
// training steady state after (docs/one-plan.md section 5; the session,
// runtime/session/Session.h, loads so). Executors of the generation
// programs resolve the pool's addresses when they are created, so they are
// created after allocateGeneration() and destroyed before
// releaseGeneration().
//
// Training state the plan offloads (docs/offload.md: Buffer.tier HOST or
// NVME) is not in the state pool: load() opens a TierStore for it, and its
// buffers have no address here (only the tier copies reach them).
//
// The memory counts the bytes it holds (every section, pool and the arena)
// now and at most since load: heldBytes() and peakBytes().
//
// A carried copy (CARRY buffer, docs/generation.md section 6) lives in the
// arena at its pinned offset; the ledger here says, across programs,
// whether it holds a gather the next program must complete.
//
// The storage comes from a Backend (runtime/Backend.h): the arena and the
// constants are allocated through it, and the weights read from the file
// are handed to it (kept in place on the CPU, copied to the device by a
// device backend), so that every address is one the backend's kernels and
// collectives can use.
//
// A rank reads only its own section of the weights file and the persistent
// one (readRankWeights / readPersistentWeights): N ranks read the file once
// between them, not N times.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_EXEC_MEMORY_H
#define ZPLAN_RUNTIME_EXEC_MEMORY_H

#include "runtime/Backend.h"
#include "runtime/exec/TierStore.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/support/Status.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace zplan {

class RankMemory {
public:
  /// When the generation state (KV caches, resident copies) is allocated:
  /// by load(), for the memory's life, or by allocateGeneration().
  enum class GenerationState { AtLoad, Deferred };

  /// Loads rank `rank`'s memory for `plan`, read from `planPath`, into
  /// memory of `backend` (which must outlive it). `plan` must have passed
  /// validatePlan(). Fails when the weights file cannot be read, a buffer
  /// does not fit the section it lives in, or the arena cannot be
  /// allocated.
  /// `offloadDir` overrides the plan's offload_dir (TierStore.h): where
  /// the NVME tier's file goes; empty keeps the plan's. `nvmeIo`: how it
  /// is read and written.
  static Status load(const std::string &planPath, const plan::Plan &plan,
                     uint32_t rank, Backend &backend,
                     std::unique_ptr<RankMemory> &out,
                     GenerationState generation = GenerationState::AtLoad,
                     const std::string &offloadDir = "",
                     NvmeIo nvmeIo = NvmeIo::Buffered);

  /// The backend that holds this memory, and runs the kernels on it.
  Backend &backend() const { return *owner; }

  RankMemory(const RankMemory &) = delete;
  RankMemory &operator=(const RankMemory &) = delete;

  /// The address of buffer `id` (1 .. buffers_size()); null for a buffer
  /// in the HOST or NVME tier, which only tierStore() holds.
  uint8_t *address(uint32_t id) const { return addresses[id]; }

  /// Host code reads and writes buffers only through these (inputs before
  /// a run, outputs, the loss and logits after one): on a device backend
  /// the address is a device address. `bytes` from the buffer's start.
  Status read(uint32_t id, void *host, uint64_t bytes) const {
    return owner->copyToHost(host, addresses[id], bytes);
  }
  Status write(uint32_t id, const void *host, uint64_t bytes) {
    if (holdsWeights(id))
      weightsWritten();
    return owner->copyFromHost(addresses[id], host, bytes);
  }
  /// The first `count` elements (of T) of buffer `id`, readable on the
  /// host: the buffer itself where the backend's memory is the host's, else
  /// a copy in `scratch`, which the caller may keep across calls.
  template <typename T>
  Status view(uint32_t id, size_t count, std::vector<T> &scratch,
              const T *&out) const {
    if (owner->hostAddressable()) {
      out = reinterpret_cast<const T *>(addresses[id]);
      return Status::success();
    }
    scratch.resize(count);
    out = scratch.data();
    return read(id, scratch.data(), count * sizeof(T));
  }

  /// The weights' version: it moves whenever the bytes of a shard, a
  /// persistent group or a constant may change -- a checkpoint restore
  /// (Session::load), a run of a program that may write one (Executor.h),
  /// a write() into one -- and nowhere else. A kernel that keeps a copy
  /// derived from a weight (TensorRef::weightsVersion) drops it when the
  /// version moves.
  const std::atomic<uint64_t> &weightsVersion() const { return version; }
  /// Moves weightsVersion(): the caller is about to write weights, or has.
  void weightsWritten() { version.fetch_add(1, std::memory_order_acq_rel); }
  /// Whether buffer `id` lives in a weight's storage: its root is a SHARD,
  /// PERSISTENT or CONSTANT buffer.
  bool holdsWeights(uint32_t id) const { return weightRoots[roots[id]]; }

  /// The buffer that owns `id`'s storage: `id` itself unless it is a view.
  uint32_t rootOf(uint32_t id) const { return roots[id]; }
  /// The byte offset of buffer `id` inside rootOf(id).
  uint64_t offsetInRoot(uint32_t id) const { return rootOffsets[id]; }

  uint8_t *arena() const { return arenaStorage->data(); }
  uint64_t arenaBytes() const { return arenaSize; }
  /// This rank's shards on the device: its section of the weights file,
  /// less the shards the plan offloads (--offload-params).
  uint64_t shardBytes() const { return shards->bytes(); }
  /// The persistent section (persistent groups, whole).
  uint64_t persistentBytes() const { return persistent->bytes(); }
  uint32_t rank() const { return rankIndex; }

  /// The storage a checkpoint saves and restores: this rank's shards, the
  /// persistent groups, and the training state (STATE buffers, zero at
  /// load; empty for a plan without training).
  BackendMemory &shardSection() const { return *shards; }
  /// Whether the plan offloads any shard (docs/offload.md). Then the
  /// shard section holds only the others, packed, and a checkpoint reads
  /// and writes the shards through these, in the weights file's layout
  /// (weightsSectionBytes(), the layout of a plan that offloads none), one
  /// part at a time: each shard, and the padding between two (zeros).
  bool offloadsShards() const { return shardsOffloaded; }
  uint64_t weightsSectionBytes() const { return weightsSection; }
  /// The parts' sizes, in layout order; they add up to the section.
  std::vector<uint64_t> shardParts() const;
  Status readShardPart(size_t part, uint8_t *host) const;
  Status writeShardPart(size_t part, const uint8_t *host);
  BackendMemory &persistentSection() const { return *persistent; }
  BackendMemory &stateSection() const { return *statePool; }
  /// The host-side step's master copies (Buffer.mirrors): each set to the
  /// parameters it mirrors. load() calls it, and a checkpoint restore
  /// after it writes the parameters.
  Status refreshMirrors();
  /// The training state outside the device (docs/offload.md): the
  /// buffers of the HOST and NVME tiers, which only the tier copies read
  /// and write. Null when the plan keeps everything on the device.
  TierStore *tierStore() const { return tiers.get(); }
  /// Allocates the KV caches and resident copies of a generation plan
  /// (zeroed; nothing for other plans) and resolves their addresses (null
  /// until then); every resident copy starts NotGathered. Fails when the
  /// memory cannot be allocated or the state is already allocated.
  Status allocateGeneration();
  /// Frees what allocateGeneration() allocated; the addresses of the CACHE
  /// and RESIDENT buffers (and their views) are null again.
  void releaseGeneration();
  bool generationAllocated() const { return generationPool != nullptr; }
  /// The bytes allocateGeneration() allocates (per the plan).
  uint64_t generationBytes() const { return generationSize; }

  /// Bytes held now: the weights sections, constants, training state,
  /// arena and, while allocated, the generation state.
  uint64_t heldBytes() const { return held; }
  /// The most bytes held at once since load.
  uint64_t peakBytes() const { return peak; }

  /// Where a resident group's copy (a RESIDENT buffer) stands, across the
  /// executors of every program: gathered in generate_begin (its
  /// gather_wait ran), released in generate_end. --check refuses a read of
  /// a copy that is not gathered.
  struct ResidentCopy {
    enum class State : uint8_t { NotGathered, Gathered, Released };
    State state = State::NotGathered;
    /// After a release: "program 'generate_end', instruction #0 ...".
    std::string releasedBy;
  };
  /// The state of RESIDENT buffer `id` (the root of any view of it).
  ResidentCopy &residentCopy(uint32_t id) { return residentCopies[id]; }

  /// The ledger entry of a carried copy (a CARRY buffer), across the
  /// executors of every program: Ready from the carry_gather of prefill or
  /// decode until the next decode's carry_wait hands it over (Held) or
  /// generate_end's carry_drain drops it; Empty again after the release of
  /// the handed-over copy.
  struct CarriedCopy {
    enum class State : uint8_t { Empty, Ready, Held };
    State state = State::Empty;
    /// The instruction that last changed the state: "program 'decode',
    /// instruction #40 'carry_gather' at '@group0'".
    std::string changedBy;
    /// --check: the copy's checksum right after its carry_gather, which the
    /// carry_wait or carry_drain compares; unset without --check.
    std::optional<uint64_t> checksum;
  };
  /// The ledger entry of CARRY buffer `id`.
  CarriedCopy &carriedCopy(uint32_t id) { return carriedCopies[id]; }
  /// The id of a CARRY buffer whose gather no program has completed yet
  /// (Ready); 0 when there is none.
  uint32_t readyCarriedCopy() const;

private:
  explicit RankMemory(Backend &backend) : owner(&backend) {}
  Status resolve(const plan::Plan &plan);
  Status loadShards(const std::string &planPath, const plan::Plan &plan,
                    std::vector<uint8_t> &out);

  Backend *owner;
  uint32_t rankIndex = 0;
  std::unique_ptr<BackendMemory> shards;
  /// Every SHARD buffer: its offset in the weights file's rank section,
  /// and, unless the tier store holds it, in `shards`.
  struct ShardSlot {
    uint32_t id = 0;
    uint64_t layoutOffset = 0, bytes = 0;
    bool tiered = false;
    uint64_t deviceOffset = 0;
  };
  std::vector<ShardSlot> shardLayout;
  /// Buffer.mirrors, the host step's master copies: each one, the buffer
  /// it mirrors, and their bytes.
  struct Mirror {
    uint32_t id = 0, source = 0;
    uint64_t bytes = 0;
  };
  std::vector<Mirror> mirrors;
  /// The checkpoint's parts of the weights layout: a slot of shardLayout,
  /// or (slot < 0) `bytes` of padding.
  struct ShardPart {
    int64_t slot = -1;
    uint64_t bytes = 0;
  };
  std::vector<ShardPart> shardPartList;
  /// The slot of SHARD buffer `id`.
  const ShardSlot &shardSlot(uint32_t id) const;
  bool shardsOffloaded = false;
  uint64_t weightsSection = 0;
  std::unique_ptr<BackendMemory> persistent;
  std::unique_ptr<BackendMemory> constantPool;
  std::vector<uint64_t> constantOffsets; // in constantPool, by constant index
  std::unique_ptr<BackendMemory> statePool;
  std::unique_ptr<TierStore> tiers;
  std::map<uint32_t, uint64_t> stateOffsets; // in statePool, by buffer id
  /// Null while no generation runs (see the file comment).
  std::unique_ptr<BackendMemory> generationPool;
  std::map<uint32_t, uint64_t> generationOffsets; // in generationPool, by id
  uint64_t generationSize = 0;
  /// Buffer ids whose storage is in generationPool (roots and views).
  std::vector<uint32_t> generationBuffers;
  uint64_t held = 0;
  uint64_t peak = 0;
  /// Counts `bytes` more held.
  void hold(uint64_t bytes);
  std::vector<ResidentCopy> residentCopies; // by buffer id
  std::vector<CarriedCopy> carriedCopies;   // by buffer id
  std::unique_ptr<BackendMemory> arenaStorage;
  uint64_t arenaSize = 0;
  // Indexed by buffer id (entry 0 unused).
  std::vector<uint8_t *> addresses;
  std::vector<uint32_t> roots;
  std::vector<uint64_t> rootOffsets;
  std::vector<bool> weightRoots; // by root id: holdsWeights()
  std::atomic<uint64_t> version{0};
};

} // namespace zplan

#endif // ZPLAN_RUNTIME_EXEC_MEMORY_H
