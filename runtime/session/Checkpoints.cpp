//===- Checkpoints.cpp - the session's sharded checkpoints ----------------===//
//
// A save writes this rank's shards, persistent groups and training state
// (runtime/train/Checkpoint.h) from host memory: the sections themselves on
// the CPU, host copies on a device (CheckpointStaging); a load reads them
// back the same way and restores the optimizer step counter. Optimizer
// state the plan offloads (docs/offload.md) is one more region, "offloaded
// state", read from and written to the tier store through host memory;
// offloaded shards are assembled into the "shards" region, in the weights
// file's layout. A save or load holds those bytes in host memory while it
// runs.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanQueries.h"
#include "runtime/session/SessionState.h"

#include <array>

using namespace zplan;
using namespace zplan::session;

namespace {

/// A rank's checkpoint regions in host memory -- its shards, the persistent
/// groups and the training state, in file order: the sections themselves
/// where the backend's memory is the host's, else host copies that
/// fromBackend() fills before a save and toBackend() writes back after a
/// load.
class CheckpointStaging {
public:
  CheckpointStaging(const plan::Plan &plan, RankMemory &memory)
      : backend(memory.backend()), memory(memory),
        sections{&memory.shardSection(), &memory.persistentSection(),
                 &memory.stateSection()},
        tiers(memory.tierStore()) {
    const char *names[] = {"shards", "persistent", "state"};
    bool inPlace = backend.hostAddressable();
    copies.resize(sections.size());
    for (size_t i = 0; i < sections.size(); ++i) {
      // Offloaded shards (--offload-params): the region is the weights
      // file's rank section, assembled from the device and the tier store,
      // as a plan without offload saves it (zrun export reads either).
      bool assembled = i == 0 && memory.offloadsShards();
      if (!inPlace || assembled)
        copies[i].resize(assembled ? memory.weightsSectionBytes()
                                   : sections[i]->bytes());
      regions.push_back(
          {names[i],
           copies[i].empty() && !assembled ? sections[i]->data()
                                           : copies[i].data(),
           assembled ? memory.weightsSectionBytes() : sections[i]->bytes()});
    }
    // The state the plan offloads (docs/offload.md), buffer after buffer in
    // plan order, staged in host memory for the save or load.
    if (!tiers)
      return;
    uint64_t bytes = 0;
    for (const plan::Buffer &buffer : plan.buffers())
      if (buffer.kind() == plan::Buffer::STATE && tiers->holds(buffer.id())) {
        offloaded.emplace_back(buffer.id(), bytes);
        bytes += buffer.bytes();
      }
    offloadedBytes.resize(bytes);
    regions.push_back({"offloaded state", offloadedBytes.data(), bytes});
  }

  Status fromBackend() {
    for (size_t i = 0; i < copies.size(); ++i) {
      if (i == 0 && memory.offloadsShards())
        ZR_RETURN_IF_ERROR(memory.readShards(copies[i].data()));
      else if (!copies[i].empty())
        ZR_RETURN_IF_ERROR(backend.copyToHost(
            copies[i].data(), sections[i]->data(), copies[i].size()));
    }
    for (auto [id, offset] : offloaded)
      ZR_RETURN_IF_ERROR(tiers->read(id, offloadedBytes.data() + offset));
    return Status::success();
  }
  Status toBackend() {
    for (size_t i = 0; i < copies.size(); ++i) {
      if (i == 0 && memory.offloadsShards())
        ZR_RETURN_IF_ERROR(memory.writeShards(copies[i].data()));
      else if (!copies[i].empty())
        ZR_RETURN_IF_ERROR(backend.copyFromHost(
            sections[i]->data(), copies[i].data(), copies[i].size()));
    }
    for (auto [id, offset] : offloaded)
      ZR_RETURN_IF_ERROR(tiers->write(id, offloadedBytes.data() + offset));
    return Status::success();
  }

  std::vector<train::CheckpointRegion> regions;

private:
  Backend &backend;
  RankMemory &memory;
  std::array<BackendMemory *, 3> sections;
  /// Empty where the regions are the sections themselves.
  std::vector<std::vector<uint8_t>> copies;
  /// The tier store, its buffers (id, offset in offloadedBytes), and their
  /// bytes in host memory.
  TierStore *tiers;
  std::vector<std::pair<uint32_t, uint64_t>> offloaded;
  std::vector<uint8_t> offloadedBytes;
};

} // namespace

Status Session::save(const std::string &root,
                     const train::CheckpointValues &values,
                     const train::CheckpointOptions &options,
                     train::SaveResult &result) {
  State &s = *state;
  ZR_RETURN_IF_ERROR(s.usable());
  if (s.microInWindow != 0)
    return failure("cannot save in the middle of an accumulation window (",
                   s.microInWindow, " of ", s.options.train.gradAccum,
                   " micro-steps run): save after the optimizer step");
  train::CheckpointInfo info;
  info.planIdentity = plan::planIdentity(s.plan);
  info.step = s.optimizerSteps;
  info.values = values;
  CheckpointStaging staging(s.plan, *s.memory);
  ZR_RETURN_IF_ERROR(staging.fromBackend());
  return train::saveCheckpoint(root, info, staging.regions, s.communicator,
                               result, options);
}

Status Session::save(const std::string &root) {
  train::SaveResult result;
  return save(root,
              {{"grad-accum", std::to_string(state->options.train.gradAccum)}},
              {}, result);
}

Status Session::load(const std::string &path, train::LoadedCheckpoint &loaded) {
  State &s = *state;
  ZR_RETURN_IF_ERROR(s.usable());
  CheckpointStaging staging(s.plan, *s.memory);
  ZR_RETURN_IF_ERROR(train::loadCheckpoint(path, plan::planIdentity(s.plan),
                                           staging.regions, s.communicator,
                                           loaded));
  ZR_RETURN_IF_ERROR(staging.toBackend());
  s.optimizerSteps = loaded.step;
  s.microInWindow = 0;
  s.windowLossSum = 0;
  s.window = WindowResult();
  s.window.step = loaded.step;
  return Status::success();
}

Status Session::load(const std::string &path) {
  train::LoadedCheckpoint loaded;
  return load(path, loaded);
}
