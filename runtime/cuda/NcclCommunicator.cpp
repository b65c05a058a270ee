//===- NcclCommunicator.cpp - tensor collectives over NCCL ----------------===//

#include "runtime/cuda/NcclCommunicator.h"

#include "runtime/comm/AsyncWatch.h"

#include <nccl.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <thread>
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

/// The outcome of a call on a non-blocking communicator: it may return
/// ncclInProgress, and then no other call may use `comm` until
/// ncclCommGetAsyncError says it is done, asked after each `pause` (0: a
/// yield). A stopped peer can keep a call in progress (a connection to it
/// being set up): the AsyncWatch that watches the call ends the job then.
ncclResult_t settle(ncclComm_t comm, ncclResult_t result,
                    std::chrono::microseconds pause = {}) {
  while (result == ncclInProgress) {
    if (pause.count() == 0)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(pause);
    if (ncclResult_t query = ncclCommGetAsyncError(comm, &result);
        query != ncclSuccess)
      return query;
  }
  return result;
}

/// The event recorded after one collective, for the watch's completion
/// check; destroyed with the last reference (the watch's, or the issuing
/// call's when issuing failed).
struct CompletionEvent {
  explicit CompletionEvent(int device) : device(device) {}
  ~CompletionEvent() {
    if (cudaEvent_t recorded = event.load())
      cudaEventDestroy(recorded);
  }
  /// Called on the watch's thread.
  bool completed() {
    if (abandoned.load())
      return true;
    cudaEvent_t recorded = event.load();
    if (!recorded)
      return false;
    cudaSetDevice(device);
    return cudaEventQuery(recorded) == cudaSuccess;
  }
  const int device;
  std::atomic<cudaEvent_t> event{nullptr};
  /// The collective was not issued: nothing to wait for.
  std::atomic<bool> abandoned{false};
};

class NcclCommunicator final : public comm::Communicator {
public:
  NcclCommunicator(comm::Communicator &host, CudaDevice &device,
                   ncclComm_t comm)
      : host(host), device(device), comm(comm) {
    comm::AsyncWatch::Hooks hooks;
    hooks.timeout = [this] { return this->host.collectiveTimeout(); };
    hooks.asyncError = [this]() -> std::string {
      ncclResult_t state = ncclSuccess;
      if (ncclCommGetAsyncError(this->comm, &state) != ncclSuccess ||
          state == ncclSuccess || state == ncclInProgress)
        return "";
      return std::string("NCCL: ") + ncclGetErrorString(state) + " (" +
             ncclGetLastError(this->comm) + ")";
    };
    hooks.abortAll = [this] { abort(1); };
    watch = std::make_unique<comm::AsyncWatch>(host.rank(), host.size(),
                                               std::move(hooks));
  }
  ~NcclCommunicator() override {
    // The watch first: its thread queries this communicator and events.
    watch.reset();
    if (settle(comm, ncclCommFinalize(comm)) == ncclSuccess)
      ncclCommDestroy(comm);
    else
      ncclCommAbort(comm);
  }

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
    return issue(
        "ncclAllGather",
        "all-gather of " +
            std::to_string(countPerRank * elementTypeInfo(type).bytes) +
            " B per rank",
        [&] {
          return ncclAllGather(send, receive, count, *nccl, comm, stream());
        });
  }

  Status reduceScatter(const void *send, void *receive, uint64_t countPerRank,
                       ElementType type) override {
    ZR_RETURN_IF_ERROR(summable(type, "reduceScatter"));
    return issue("ncclReduceScatter",
                 "reduce-scatter of " + std::to_string(countPerRank) + " " +
                     std::string(elementTypeInfo(type).name) + " per rank",
                 [&] {
                   return ncclReduceScatter(send, receive, countPerRank,
                                            *ncclTypeOf(type), ncclSum, comm,
                                            stream());
                 });
  }

  using comm::Communicator::allReduce;
  Status allReduce(void *data, uint64_t count, ElementType type) override {
    ZR_RETURN_IF_ERROR(summable(type, "allReduce"));
    return issue("ncclAllReduce",
                 "all-reduce of " + std::to_string(count) + " " +
                     std::string(elementTypeInfo(type).name),
                 [&] {
                   return ncclAllReduce(data, data, count, *ncclTypeOf(type),
                                        ncclSum, comm, stream());
                 });
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
  // collectives (the agreements, barriers, broadcasts); the AsyncWatch
  // watches the NCCL kernels, under the host's deadline.
  void setCollectiveTimeout(double seconds, std::string tool) override {
    host.setCollectiveTimeout(seconds, std::move(tool));
  }
  std::pair<double, std::string> collectiveTimeout() const override {
    return host.collectiveTimeout();
  }
  void setCollectiveContext(std::string text) override {
    context = text;
    host.setCollectiveContext(std::move(text));
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

  /// Issues one collective (`call`, the NCCL function; `what`, its size)
  /// through `enqueue`, and has the watch wait for an event recorded after
  /// it. The watch learns of it first, so that a call a stopped peer keeps
  /// in progress is timed too.
  template <typename Enqueue>
  Status issue(std::string_view call, const std::string &what,
               Enqueue enqueue) {
    auto event = std::make_shared<CompletionEvent>(device.device());
    watch->issued(context.empty() ? what : context + " (" + what + ")",
                  [event] { return event->completed(); });
    if (Status status = check(call, settle(comm, enqueue())); !status.ok()) {
      event->abandoned = true;
      return status;
    }
    cudaEvent_t recorded = nullptr;
    cudaError_t error =
        cudaEventCreateWithFlags(&recorded, cudaEventDisableTiming);
    if (error == cudaSuccess)
      error = cudaEventRecord(recorded, stream());
    if (error != cudaSuccess) {
      if (recorded)
        cudaEventDestroy(recorded);
      event->abandoned = true;
      return failure("recording the completion of ", call, " on rank ",
                     host.rank(), ": ", cudaGetErrorString(error));
    }
    event->event = recorded;
    return Status::success();
  }

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
  /// What the collectives are for (setCollectiveContext), for the watch.
  std::string context;
  std::unique_ptr<comm::AsyncWatch> watch;
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
  // Non-blocking, so that the watch can abort a communicator whose peer
  // stopped (NcclCommunicator.h). The initialization is itself a collective
  // (every rank connects to its peers): it is watched as one, under the
  // host's deadline, and polled every millisecond (it takes a while).
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t result =
      ncclCommInitRankConfig(&comm, host.size(), id, host.rank(), &config);
  if (comm && result == ncclInProgress) {
    std::atomic<bool> initialized{false};
    comm::AsyncWatch::Hooks hooks;
    hooks.timeout = [&host] { return host.collectiveTimeout(); };
    hooks.abortAll = [&host, comm] {
      ncclCommAbort(comm);
      host.abort(1);
    };
    comm::AsyncWatch watch(host.rank(), host.size(), std::move(hooks));
    watch.issued("NCCL's initialization (ncclCommInitRankConfig)",
                 [&initialized] { return initialized.load(); });
    result = settle(comm, result, std::chrono::milliseconds(1));
    initialized = true;
  }
  if (result != ncclSuccess) {
    if (comm)
      ncclCommAbort(comm);
    return ncclFailure("ncclCommInitRankConfig", host.rank(), result);
  }
  out = std::make_unique<NcclCommunicator>(host, device, comm);
  return Status::success();
}
