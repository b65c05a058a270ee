//===- Stats.cpp - zrun --stats: each rank's memory, printed by rank 0 ----===//

#include "runtime/tooling/Stats.h"

#include "runtime/tooling/Diagnostics.h"

#include <iostream>
#include <sstream>
#include <sys/resource.h>

using namespace zplan;
using namespace zplan::tooling;

bool zplan::tooling::printStats(comm::Communicator &communicator,
                                const RankMemory &memory) {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  std::ostringstream line;
  line << "zrun: rank " << communicator.rank() << ": peak RSS "
       << static_cast<uint64_t>(usage.ru_maxrss) * 1024 << " B, arena "
       << memory.arenaBytes() << " B, shards " << memory.shardBytes()
       << " B, persistent " << memory.persistentBytes() << " B";
  if (uint64_t state = memory.stateSection().bytes())
    line << ", training state " << state << " B";
  // Outside the plan: the kernels' own copies of weights (the CPU GEMM's
  // packed ones, runtime/cpu/StationaryWeights.h).
  if (uint64_t copies = memory.backend().weightCopyBytes())
    line << ", packed weights " << copies << " B";
  // Offload (docs/offload.md): the state outside the device.
  if (const TierStore *tiers = memory.tierStore()) {
    if (tiers->hostBytes())
      line << ", host tier " << tiers->hostBytes() << " B";
    if (tiers->nvmeBytes())
      line << ", nvme tier " << tiers->nvmeBytes() << " B";
  }
  // Only a plan that generates allocates and frees memory after load (its
  // generation state, Memory.h): what it holds now and held at most.
  if (uint64_t generation = memory.generationBytes())
    line << ", generation state " << generation << " B, held "
         << memory.heldBytes() << " B, peak " << memory.peakBytes() << " B";
  line << "\n";
  // Every rank's backend first, then every rank's memory: rank order in
  // each block.
  std::vector<std::string> backends, lines;
  Status status = communicator.gatherText(
      "zrun: rank " + std::to_string(communicator.rank()) + ": backend " +
          memory.backend().description() + "\n",
      backends);
  if (status.ok())
    status = communicator.gatherText(line.str(), lines);
  if (!agree(communicator, status))
    return false;
  for (const std::string &text : backends)
    std::cout << text;
  for (const std::string &text : lines)
    std::cout << text;
  std::cout << std::flush;
  return true;
}
