//===- Launcher.h - what the process launcher says about this rank -------===//
//
// mpirun (Open MPI, MPICH's Hydra) and Slurm's srun tell each process its
// rank and its rank on the node through environment variables. zrun asks
// them two things before MPI starts: whether a launcher started it at all
// (a usage error must then be agreed on through MPI, or mpirun may kill the
// rank that prints it), and which GPU of the node a rank takes (its local
// rank). One table, here, for both.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_COMM_LAUNCHER_H
#define ZPLAN_RUNTIME_COMM_LAUNCHER_H

namespace zplan::comm {

/// This process's place as its launcher set it; -1 where it set nothing.
struct LaunchedRank {
  /// "Open MPI", "MPICH" or "Slurm"; null when no launcher is recognized.
  const char *launcher = nullptr;
  int rank = -1;
  int localRank = -1;
};

/// Reads the launchers' variables: Open MPI's OMPI_COMM_WORLD_RANK and
/// OMPI_COMM_WORLD_LOCAL_RANK, MPICH's PMI_RANK and MPI_LOCALRANKID, Slurm's
/// SLURM_PROCID and SLURM_LOCALID, in that order (an mpirun inside a Slurm
/// allocation sets its own besides Slurm's).
LaunchedRank launchedRank();

} // namespace zplan::comm

#endif // ZPLAN_RUNTIME_COMM_LAUNCHER_H
