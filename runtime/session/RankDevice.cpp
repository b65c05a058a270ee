//===- RankDevice.cpp - the backend a rank runs on, and its collectives ---===//

#include "runtime/session/RankDevice.h"

#include "runtime/comm/Launcher.h"
#include "runtime/cpu/CpuBackend.h"

#if ZPLAN_HAVE_CUDA
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/NcclCommunicator.h"
#endif

#include <vector>

using namespace zplan;

namespace {

/// The devices this rank sees (0 without CUDA or a driver).
int visibleDevices() {
#if ZPLAN_HAVE_CUDA
  return cuda::deviceCount();
#else
  return 0;
#endif
}

/// Every rank's device count, on every rank.
Status deviceCounts(comm::Communicator &host, std::vector<float> &counts) {
  counts.assign(host.size(), 0.0f);
  counts[host.rank()] = static_cast<float>(visibleDevices());
  return host.allReduce(counts.data(), counts.size());
}

} // namespace

Status zplan::parseBackendChoice(std::string_view text, BackendChoice &out) {
  if (text == "auto")
    out = BackendChoice::Auto;
  else if (text == "cpu")
    out = BackendChoice::Cpu;
  else if (text == "cuda")
    out = BackendChoice::Cuda;
  else
    return failure("unknown backend ", inQuotes(text),
                   " (expected cpu, cuda or auto)");
  return Status::success();
}

bool zplan::cudaBackendBuilt() { return ZPLAN_HAVE_CUDA != 0; }

RankDevice::~RankDevice() {
  // The communicator issues on the backend's stream: it goes first.
  ownedComm.reset();
  owned.reset();
}

Status RankDevice::open(BackendChoice choice, const BackendOptions &options,
                        comm::Communicator &host,
                        std::unique_ptr<RankDevice> &out) {
  if (options.threads < 1)
    return failure("the kernel threads per rank must be at least 1, not ",
                   options.threads);
  std::unique_ptr<RankDevice> device(new RankDevice());
  bool useCuda = false;
  if (choice != BackendChoice::Cpu) {
    std::vector<float> counts;
    ZR_RETURN_IF_ERROR(deviceCounts(host, counts));
    int lacking = -1;
    for (size_t rank = 0; rank < counts.size() && lacking < 0; ++rank)
      if (counts[rank] < 1)
        lacking = static_cast<int>(rank);
    if (choice == BackendChoice::Cuda && lacking >= 0) {
      if (!cudaBackendBuilt())
        return failure(
            "--backend cuda: this zrun was built without CUDA ",
            "(configured without nvcc, or with ZPLAN_ENABLE_CUDA=OFF)");
      std::string reason;
#if ZPLAN_HAVE_CUDA
      if (lacking == host.rank())
        reason = ": " + cuda::noDeviceReason();
#endif
      return failure("--backend cuda: rank ", lacking, " has no CUDA device",
                     reason);
    }
    useCuda = lacking < 0;
  }
#if ZPLAN_HAVE_CUDA
  if (useCuda) {
    int local = comm::launchedRank().localRank;
    int ordinal = (local >= 0 ? local : host.rank()) % visibleDevices();
    ZR_RETURN_IF_ERROR(cuda::createCudaBackend(ordinal, device->owned));
    cuda::CudaDevice &cudaDevice = *cuda::asCudaDevice(*device->owned);
    ZR_RETURN_IF_ERROR(
        cuda::createNcclCommunicator(host, cudaDevice, device->ownedComm));
    device->active = device->owned.get();
    device->collectiveComm = device->ownedComm.get();
    device->text = cudaDevice.describe();
    out = std::move(device);
    return Status::success();
  }
#else
  (void)useCuda;
#endif
  cpu::CpuBackend &cpuBackend = cpu::cpuBackend();
  cpuBackend.setThreads(options.threads);
  device->active = &cpuBackend;
  device->collectiveComm = &host;
  device->text = "cpu";
  out = std::move(device);
  return Status::success();
}

Backend &RankDevice::hostKernels() const { return cpu::cpuBackend(); }
