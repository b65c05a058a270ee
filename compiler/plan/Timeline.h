//===- Timeline.h - the report's memory timeline across programs ----------===//
//
// A combined plan (zcc --mode train,generate or train,infer; docs/one-plan.md)
// runs its programs in sequences the single-program dumps do not show. The
// `timeline:` section of the report follows one: train -> generate -> train,
// with each rank's bytes by kind at every step, and states whether the bytes
// after the generation are the training steady state again.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_PLAN_TIMELINE_H
#define ZPLAN_COMPILER_PLAN_TIMELINE_H

#include "runtime/plan/plan.pb.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zplan {

/// One step of the timeline: a program (or the state after one) and the
/// bytes one rank holds meanwhile.
struct TimelineStep {
  /// "train_micro_step x K", "decode x M", "after generate_end".
  std::string label;
  /// Shards, persistent groups, gradient accumulators and optimizer state
  /// (plan buffers SHARD, PERSISTENT, STATE): held for the plan's life.
  uint64_t persistentBytes = 0;
  /// KV caches and resident copies (CACHE, RESIDENT): held from
  /// generate_begin to the end of generate_end only. (A carried gather,
  /// CARRY, lives in the arena.)
  uint64_t generationBytes = 0;
  /// The program's arena peak (0 for a state between programs).
  uint64_t arenaPeakBytes = 0;
  uint64_t totalBytes() const {
    return persistentBytes + generationBytes + arenaPeakBytes;
  }
};

/// The steps of `plan` for train_micro_step x K -> optimizer_step ->
/// (generate_begin -> prefill -> decode x M -> generate_end, or infer) ->
/// train_micro_step, then the state after the generation; empty when the
/// plan lacks the training programs or both others.
std::vector<TimelineStep> buildTimeline(const plan::Plan &plan);

/// The report's `timeline:` section for `steps` (buildTimeline), "" when
/// there are none; its last line says whether the bytes held after the
/// generation (or infer) equal the training steady state.
std::string formatTimeline(const std::vector<TimelineStep> &steps);

} // namespace zplan

#endif // ZPLAN_COMPILER_PLAN_TIMELINE_H
