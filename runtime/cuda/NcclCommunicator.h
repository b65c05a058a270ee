//===- NcclCommunicator.h - tensor collectives over NCCL ------------------===//
//
// The communicator the executors of a CUDA rank move parameter groups and
// gradients through: all-gather, reduce-scatter and all-reduce are NCCL
// calls on the backend's comm stream, issued (not completed) when they
// return -- the queue events order them against the kernels, and the run's
// synchronize() waits for them. What is not a tensor collective (barriers,
// broadcasts of host data, gathering text, abort) goes to the host
// communicator it was bootstrapped over (MPI): those calls take host
// memory.
//
// Bootstrap: rank 0 creates the NCCL unique id and broadcasts it over the
// host communicator; every rank then joins with ncclCommInitRankConfig on
// its backend's device.
//
// The watchdog: the communicator is non-blocking (ncclConfig_t.blocking =
// 0), so that no NCCL call can block the host, and every collective is
// watched by a comm::AsyncWatch through an event recorded after it. A
// collective that makes no progress within the host communicator's
// --collective-timeout (a peer stopped, or never issued it) is named on
// stderr, then ncclCommAbort() stops its kernels and the host communicator
// aborts every rank; an asynchronous NCCL error does the same at once.
// Built and compiled here, never run on a GPU (README, "Reliability").
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
#define ZPLAN_RUNTIME_CUDA_NCCLCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"
#include "runtime/cuda/CudaBackend.h"

#include <memory>

namespace zplan::cuda {

/// Creates the NCCL communicator of every rank of `host` (a collective
/// call: every rank calls it) on `device`'s GPU and comm stream. `host` and
/// `device` must outlive it.
Status createNcclCommunicator(comm::Communicator &host, CudaDevice &device,
                              std::unique_ptr<comm::Communicator> &out);

} // namespace zplan::cuda

#endif // ZPLAN_RUNTIME_CUDA_NCCLCOMMUNICATOR_H
