//===- Checkpoints.cpp - the session's sharded checkpoints ----------------===//
//
// A save writes this rank's shards, persistent groups and training state
// (runtime/train/Checkpoint.h) from host memory: the sections themselves on
// the CPU, host copies on a device (CheckpointStaging); a load reads them
// back the same way and restores the optimizer step counter. Optimizer
// state the plan offloads (docs/offload.md) is one more region, "offloaded
// state"; offloaded shards make up the "shards" region, in the weights
// file's layout. Both go to and from the tier store one buffer at a time,
// so a save or load of state that does not fit host memory never holds it
// whole.
//
//===----------------------------------------------------------------------===//

#include "runtime/plan/PlanQueries.h"
#include "runtime/session/SessionState.h"

#include <array>

using namespace zplan;
using namespace zplan::session;

namespace {

/// A rank's checkpoint regions -- its shards, the persistent groups, the
/// training state and the state the plan offloads, in file order. Device
/// memory passes through host memory: the sections themselves where the
/// backend's memory is the host's, else host copies that fromBackend()
/// fills before a save and toBackend() writes back after a load. What
/// lives in the tier store goes in parts, one buffer at a time
/// (train::CheckpointRegion), never whole in host memory: offloaded
/// shards (the shards region, in the weights file's layout, as a plan
/// without offload saves it, so zrun export reads either) and offloaded
/// state.
class CheckpointStaging {
public:
  CheckpointStaging(const plan::Plan &plan, RankMemory &memory)
      : backend(memory.backend()),
        sections{&memory.shardSection(), &memory.persistentSection(),
                 &memory.stateSection()} {
    const char *names[] = {"shards", "persistent", "state"};
    bool inPlace = backend.hostAddressable();
    copies.resize(sections.size());
    for (size_t i = 0; i < sections.size(); ++i) {
      if (i == 0 && memory.offloadsShards()) {
        train::CheckpointRegion shards;
        shards.name = names[i];
        shards.bytes = memory.weightsSectionBytes();
        shards.parts = memory.shardParts();
        shards.readPart = [&memory](size_t part, void *out) {
          return memory.readShardPart(part, static_cast<uint8_t *>(out));
        };
        shards.writePart = [&memory](size_t part, const void *in) {
          return memory.writeShardPart(part, static_cast<const uint8_t *>(in));
        };
        regions.push_back(std::move(shards));
        continue;
      }
      if (!inPlace)
        copies[i].resize(sections[i]->bytes());
      regions.push_back(
          {names[i], copies[i].empty() ? sections[i]->data() : copies[i].data(),
           sections[i]->bytes()});
    }
    // The state the plan offloads (docs/offload.md), buffer after buffer
    // in plan order.
    TierStore *tiers = memory.tierStore();
    if (!tiers)
      return;
    train::CheckpointRegion offloaded;
    offloaded.name = "offloaded state";
    std::vector<uint32_t> ids;
    // A master copy (Buffer.mirrors) is the parameters' bytes again: the
    // load refreshes it from them instead.
    for (const plan::Buffer &buffer : plan.buffers())
      if (buffer.kind() == plan::Buffer::STATE && tiers->holds(buffer.id()) &&
          buffer.mirrors() == 0) {
        ids.push_back(buffer.id());
        offloaded.parts.push_back(buffer.bytes());
        offloaded.bytes += buffer.bytes();
      }
    offloaded.readPart = [tiers, ids](size_t part, void *out) {
      return tiers->read(ids[part], out);
    };
    offloaded.writePart = [tiers, ids](size_t part, const void *in) {
      return tiers->write(ids[part], in);
    };
    regions.push_back(std::move(offloaded));
  }

  Status fromBackend() {
    for (size_t i = 0; i < copies.size(); ++i)
      if (!copies[i].empty())
        ZR_RETURN_IF_ERROR(backend.copyToHost(
            copies[i].data(), sections[i]->data(), copies[i].size()));
    return Status::success();
  }
  Status toBackend() {
    for (size_t i = 0; i < copies.size(); ++i)
      if (!copies[i].empty())
        ZR_RETURN_IF_ERROR(backend.copyFromHost(
            sections[i]->data(), copies[i].data(), copies[i].size()));
    return Status::success();
  }

  std::vector<train::CheckpointRegion> regions;

private:
  Backend &backend;
  std::array<BackendMemory *, 3> sections;
  /// Empty where the region is the section itself (or goes in parts).
  std::vector<std::vector<uint8_t>> copies;
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
  // The restore writes the weights: what a kernel derived from them is
  // stale from here, even should the restore fail half-way.
  s.memory->weightsWritten();
  ZR_RETURN_IF_ERROR(train::loadCheckpoint(path, plan::planIdentity(s.plan),
                                           staging.regions, s.communicator,
                                           loaded));
  ZR_RETURN_IF_ERROR(staging.toBackend());
  s.memory->weightsWritten();
  ZR_RETURN_IF_ERROR(s.memory->refreshMirrors());
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
