//===- NcclCommunicator.cpp - tensor collectives over NCCL ----------------===//

#include "runtime/cuda/NcclCommunicator.h"

#include <nccl.h>

#include <cstdlib>
#include <optional>
#include <utility>

using namespace zplan;
using namespace zplan::cuda;

namespace {

/// NCCL's type for `type`, where NCCL can sum it; nullopt otherwise (an
/// all-gather then moves bytes).
std::optional<ncclDataType_t> ncclTypeOf(ElementType type) {
  switch (type) {
  case ElementType::F32:
    return ncclFloat32;
  case ElementType::F64:
    return ncclFloat64;
  case ElementType::F16:
    return ncclFloat16;
  case ElementType::BF16:
    return ncclBfloat16;
  case ElementType::I32:
    return ncclInt32;
  case ElementType::I64:
    return ncclInt64;
  case ElementType::I8:
    return ncclInt8;
  case ElementType::U8:
    return ncclUint8;
  default:
    return std::nullopt;
  }
}

Status ncclFailure(std::string_view call, int rank, ncclResult_t result) {
  return failure(call, " failed on rank ", rank, ": ",
                 ncclGetErrorString(result));
}

class NcclCommunicator final : public comm::Communicator {
public:
  NcclCommunicator(comm::Communicator &host, CudaDevice &device,
                   ncclComm_t comm)
      : host(host), device(device), comm(comm) {}
  ~NcclCommunicator() override { ncclCommDestroy(comm); }

  int rank() const override { return host.rank(); }
  int size() const override { return host.size(); }

  Status allGather(const void *send, void *receive, uint64_t countPerRank,
                   ElementType type) override {
    std::optional<ncclDataType_t> nccl = ncclTypeOf(type);
    uint64_t count = countPerRank;
    if (!nccl) {
      nccl = ncclUint8;
      count *= elementTypeInfo(type).bytes;
    }
    return check("ncclAllGather",
                 ncclAllGather(send, receive, count, *nccl, comm, stream()));
  }

  Status reduceScatter(const void *send, void *receive, uint64_t countPerRank,
                       ElementType type) override {
    ZR_RETURN_IF_ERROR(summable(type, "reduceScatter"));
    return check("ncclReduceScatter",
                 ncclReduceScatter(send, receive, countPerRank,
                                   *ncclTypeOf(type), ncclSum, comm, stream()));
  }

  using comm::Communicator::allReduce;
  Status allReduce(void *data, uint64_t count, ElementType type) override {
    ZR_RETURN_IF_ERROR(summable(type, "allReduce"));
    return check("ncclAllReduce",
                 ncclAllReduce(data, data, count, *ncclTypeOf(type), ncclSum,
                               comm, stream()));
  }

  // Host data: the bootstrap communicator's.
  Status broadcast(void *data, uint64_t bytes, int root) override {
    return host.broadcast(data, bytes, root);
  }
  Status barrier() override { return host.barrier(); }
  Status gatherText(std::string_view text,
                    std::vector<std::string> &all) override {
    return host.gatherText(text, all);
  }
  // The host communicator's watchdog (comm/Watchdog.h) watches its own
  // collectives (the agreements, barriers, broadcasts). The NCCL kernels
  // are not watched yet: a rank that stops leaves the others in
  // cudaStreamSynchronize (README, "Reliability": not built).
  void setCollectiveTimeout(double seconds, std::string tool) override {
    host.setCollectiveTimeout(seconds, std::move(tool));
  }
  void setCollectiveContext(std::string context) override {
    host.setCollectiveContext(std::move(context));
  }
  [[noreturn]] void abort(int code) override {
    // Peers may be blocked inside an NCCL kernel that this rank will never
    // join: abort the communicator so the host communicator's abort is not
    // held up by a device that never returns.
    ncclCommAbort(comm);
    host.abort(code);
    std::abort(); // host.abort() does not return; this says so to the compiler
  }

private:
  cudaStream_t stream() const { return device.stream(plan::COMM); }

  Status check(std::string_view call, ncclResult_t result) const {
    if (result == ncclSuccess)
      return Status::success();
    return ncclFailure(call, host.rank(), result);
  }

  Status summable(ElementType type, std::string_view call) const {
    if (ncclTypeOf(type))
      return Status::success();
    return failure(call, ": NCCL cannot sum elements of type ",
                   elementTypeInfo(type).name);
  }

  comm::Communicator &host;
  CudaDevice &device;
  ncclComm_t comm;
};

} // namespace

Status
zplan::cuda::createNcclCommunicator(comm::Communicator &host,
                                    CudaDevice &device,
                                    std::unique_ptr<comm::Communicator> &out) {
  ncclUniqueId id{};
  if (host.rank() == 0)
    if (ncclResult_t result = ncclGetUniqueId(&id); result != ncclSuccess)
      return ncclFailure("ncclGetUniqueId", 0, result);
  ZR_RETURN_IF_ERROR(host.broadcast(&id, sizeof(id), 0));
  if (cudaError_t error = cudaSetDevice(device.device()); error != cudaSuccess)
    return failure("cudaSetDevice(", device.device(),
                   "): ", cudaGetErrorString(error));
  ncclComm_t comm = nullptr;
  if (ncclResult_t result =
          ncclCommInitRank(&comm, host.size(), id, host.rank());
      result != ncclSuccess)
    return ncclFailure("ncclCommInitRank", host.rank(), result);
  out = std::make_unique<NcclCommunicator>(host, device, comm);
  return Status::success();
}
