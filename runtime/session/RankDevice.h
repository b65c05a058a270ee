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
// A rank's GPU is chosen from its local rank (what the launcher says,
// runtime/comm/Launcher.h; the world rank when it says nothing), modulo the
// devices the process sees.
//
// This is the one place that names a concrete backend: everything below the
// session works through the Backend interface.
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

/// The knobs of the backends, each applied by the backend it belongs to.
struct BackendOptions {
  /// CPU: kernel threads per rank, the GEMMs' and every other kernel's
  /// (zrun --threads; one per rank by default, since ranks share the cores).
  /// The CUDA backend has no use for it.
  int threads = 1;
};

class RankDevice {
public:
  /// Opens the backend `choice` names on every rank of `host` (a collective
  /// call; see the file comment). `host` must outlive the device.
  static Status open(BackendChoice choice, const BackendOptions &options,
                     comm::Communicator &host,
                     std::unique_ptr<RankDevice> &out);
  ~RankDevice();

  /// Where memory lives and kernels run.
  Backend &backend() const { return *active; }
  /// What the executors' collectives go through: NCCL on CUDA, the host
  /// communicator on the CPU.
  comm::Communicator &collectives() const { return *collectiveComm; }
  /// Where an instruction the plan puts on the host runs (the host-side
  /// optimizer step of offload, docs/offload.md): the CPU's kernels, over
  /// host memory, on either backend.
  Backend &hostKernels() const;
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
