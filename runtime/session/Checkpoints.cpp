//===- Checkpoints.cpp - the session's sharded checkpoints ----------------===//
//
// A save writes this rank's shards, persistent groups and training state
// (runtime/train/Checkpoint.h) from host memory: the sections themselves on
// the CPU, host copies on a device (CheckpointStaging); a load reads them
// back the same way and restores the optimizer step counter.
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
  explicit CheckpointStaging(const RankMemory &memory)
      : backend(memory.backend()),
        sections{&memory.shardSection(), &memory.persistentSection(),
                 &memory.stateSection()} {
    const char *names[] = {"shards", "persistent", "state"};
    bool inPlace = backend.hostAddressable();
    copies.resize(inPlace ? 0 : sections.size());
    for (size_t i = 0; i < sections.size(); ++i) {
      if (!inPlace)
        copies[i].resize(sections[i]->bytes());
      regions.push_back({names[i],
                         inPlace ? sections[i]->data() : copies[i].data(),
                         sections[i]->bytes()});
    }
  }

  Status fromBackend() {
    for (size_t i = 0; i < copies.size(); ++i)
      ZR_RETURN_IF_ERROR(backend.copyToHost(
          copies[i].data(), sections[i]->data(), copies[i].size()));
    return Status::success();
  }
  Status toBackend() {
    for (size_t i = 0; i < copies.size(); ++i)
      ZR_RETURN_IF_ERROR(backend.copyFromHost(
          sections[i]->data(), copies[i].data(), copies[i].size()));
    return Status::success();
  }

  std::vector<train::CheckpointRegion> regions;

private:
  Backend &backend;
  std::array<BackendMemory *, 3> sections;
  /// Empty where the regions are the sections themselves.
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
  CheckpointStaging staging(*s.memory);
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
  CheckpointStaging staging(*s.memory);
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
