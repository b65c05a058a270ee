//===- Launcher.cpp - what the process launcher says about this rank -----===//

#include "runtime/comm/Launcher.h"

#include <cstdlib>

using namespace zplan::comm;

namespace {

struct LauncherVariables {
  const char *launcher;
  const char *rank;
  const char *localRank;
};

constexpr LauncherVariables kLaunchers[] = {
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"MPICH", "PMI_RANK", "MPI_LOCALRANKID"},
    {"Slurm", "SLURM_PROCID", "SLURM_LOCALID"},
};

/// The variable's value as a rank; -1 when unset or not a number.
int rankFrom(const char *name) {
  const char *value = std::getenv(name);
  if (!value || !*value)
    return -1;
  char *end = nullptr;
  long parsed = std::strtol(value, &end, 10);
  return *end == '\0' && parsed >= 0 ? static_cast<int>(parsed) : -1;
}

} // namespace

LaunchedRank zplan::comm::launchedRank() {
  for (const LauncherVariables &variables : kLaunchers) {
    int rank = rankFrom(variables.rank);
    if (rank < 0)
      continue;
    return {variables.launcher, rank, rankFrom(variables.localRank)};
  }
  return {};
}
