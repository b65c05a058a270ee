//===- RankDevice.h - the backend a rank runs on, and its collectives -----===//
//
// `zrun --backend cpu|cuda|auto` and the Python module choose where a
// rank's programs run: the CPU reference (memory in host RAM, collectives
// over MPI) or one GPU per rank (device memory, collectives over NCCL on
// the comm stream, bootstrapped over MPI). Every rank must choose the same
// backend -- NCCL's bootstrap and MPI's collectives would not meet
// otherwise -- so open() is a collective call that agrees: `auto` takes
// CUDA only when every rank has a device, and `cuda` fails on every rank
// when one rank has none, naming it.
//
// A rank's GPU is chosen from its local rank (the launcher's
// OMPI_COMM_WORLD_LOCAL_RANK, MPI_LOCALRANKID or SLURM_LOCALID; the world
// rank when none is set), modulo the devices the process sees.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_SESSION_RANKDEVICE_H
#define ZPLAN_RUNTIME_SESSION_RANKDEVICE_H

#include "runtime/Backend.h"
#include "runtime/comm/Communicator.h"
#include "runtime/support/Status.h"

#include <memory>
#include <string>
#include <string_view>

namespace zplan {

enum class BackendChoice { Auto, Cpu, Cuda };

/// "auto", "cpu", "cuda"; anything else is an error listing them.
Status parseBackendChoice(std::string_view text, BackendChoice &out);

/// Whether this build has the CUDA backend (nvcc was found).
bool cudaBackendBuilt();

class RankDevice {
public:
  /// Opens the backend `choice` names on every rank of `host` (a collective
  /// call; see the file comment). `host` must outlive the device.
  static Status open(BackendChoice choice, comm::Communicator &host,
                     std::unique_ptr<RankDevice> &out);
  ~RankDevice();

  /// Where memory lives and kernels run.
  Backend &backend() const { return *active; }
  /// What the executors' collectives go through: NCCL on CUDA, the host
  /// communicator on the CPU.
  comm::Communicator &collectives() const { return *collectiveComm; }
  /// "cpu", or "cuda device 0 (NVIDIA H200, 139.8 GiB)".
  const std::string &description() const { return text; }

private:
  RankDevice() = default;

  std::unique_ptr<Backend> owned;
  Backend *active = nullptr;
  std::unique_ptr<comm::Communicator> ownedComm;
  comm::Communicator *collectiveComm = nullptr;
  std::string text;
};

} // namespace zplan

#endif // ZPLAN_RUNTIME_SESSION_RANKDEVICE_H
