//===- Stats.h - zrun --stats: each rank's memory, printed by rank 0 ------===//

#ifndef ZPLAN_RUNTIME_TOOLING_STATS_H
#define ZPLAN_RUNTIME_TOOLING_STATS_H

#include "runtime/comm/Communicator.h"
#include "runtime/exec/Memory.h"

namespace zplan::tooling {

/// Collective: rank 0 prints every rank's `--stats` lines: its backend, then
/// its peak RSS, arena, shards, persistent groups, training state, and for a
/// plan that generates its generation state and the bytes held now and at
/// peak; false when the ranks could not gather them (the error is printed).
bool printStats(comm::Communicator &communicator, const RankMemory &memory);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_STATS_H
