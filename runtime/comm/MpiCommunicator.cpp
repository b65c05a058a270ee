//===- MpiCommunicator.cpp - Communicator over Open MPI -------------------===//
//
// MPI counts are ints: transfers of 2 GiB or more per call are split in
// chunks. An all-gather splits each rank's contribution the same way and
// receives every rank's piece of a chunk at once, through a datatype whose
// extent is one rank's full contribution, so the pieces land in rank order
// without a staging copy.
//
// Every collective is issued in its non-blocking form and completed by
// waitQuietly(), which polls only while a transfer could still be moving
// and then sleeps between polls: MPI's blocking calls spin a core for as
// long as they wait, which a rank waiting for a late peer takes from its
// own compute thread, and a rank waiting for a stopped one burns until the
// watchdog ends the job.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"

#include "runtime/support/Bfloat16.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

using namespace zplan;
using namespace zplan::comm;

namespace {

/// The largest count one MPI call moves here (1 GiB of bytes): well inside
/// int, and a multiple of every element size.
constexpr uint64_t kChunkBytes = uint64_t(1) << 30;

/// This process's rank in MPI_COMM_WORLD, or -1 before MPI_Init.
int worldRank() {
  int initialized = 0, finalized = 0, rank = -1;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

Status mpiFailure(const char *statement, const char *file, int line, int code) {
  char text[MPI_MAX_ERROR_STRING] = {0};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof(text), "MPI error %d", code);
  const char *base = std::strrchr(file, '/');
  std::ostringstream os;
  os << "[rank " << worldRank() << "] " << statement << " failed at "
     << (base ? base + 1 : file) << ":" << line << ": " << text;
  return Status::error(os.str());
}

} // namespace

/// Runs an MPI call; on failure returns a Status naming the call, its
/// file:line and this rank. Use inside functions returning Status.
#define ZR_MPI_CHECK(statement)                                                \
  do {                                                                         \
    int zrMpiCode = (statement);                                               \
    if (zrMpiCode != MPI_SUCCESS)                                              \
      return mpiFailure(#statement, __FILE__, __LINE__, zrMpiCode);            \
  } while (false)

namespace {

/// Completes `request`, a collective moving `bytes` through this rank.
/// Open MPI's shared-memory transport and its non-blocking collectives
/// progress only inside MPI calls, so a transfer under way needs polling;
/// a wait for a peer that has not arrived does not. The wait polls (yielding
/// the core between polls to this rank's compute thread) for as long as
/// moving the bytes could take (at 1 GB/s, and at least 10 ms), then polls
/// between sleeps that double from 50 us to 200 us, and to 2 ms once the
/// wait has lasted 100 ms. Measured by hand on 2
/// cores (Open MPI 4.1.4, GPT-2 fixture training at N = 2 and 4, 5
/// interleaved trials): as fast as the blocking collectives, within their
/// noise of +-20%; a rank waiting for a stopped peer uses a few percent of
/// a core instead of all of it (test/python/watchdog.test).
Status waitQuietly(MPI_Request &request, uint64_t bytes) {
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  const auto pollFor = std::max(std::chrono::nanoseconds(10'000'000),
                                std::chrono::nanoseconds(bytes));
  auto pause = std::chrono::microseconds(50);
  for (;;) {
    int done = 0;
    ZR_MPI_CHECK(MPI_Test(&request, &done, MPI_STATUS_IGNORE));
    if (done)
      return Status::success();
    if (Clock::now() - started < pollFor) {
      std::this_thread::yield();
      continue;
    }
    std::this_thread::sleep_for(pause);
    // Short sleeps while a peer may just be late; past 100 ms the wait is
    // for a peer that is stopped, or busy for long.
    auto longest = Clock::now() - started < std::chrono::milliseconds(100)
                       ? std::chrono::microseconds(200)
                       : std::chrono::microseconds(2000);
    pause = std::min(pause * 2, longest);
  }
}

} // namespace

/// Issues the non-blocking collective `statement`, which sets `request`,
/// and waits for it quietly; `bytes` is what it moves through this rank.
#define ZR_MPI_COLLECTIVE(statement, bytes)                                    \
  do {                                                                         \
    MPI_Request request = MPI_REQUEST_NULL;                                    \
    ZR_MPI_CHECK(statement);                                                   \
    if (Status zrWaited = waitQuietly(request, (bytes)); !zrWaited.ok())       \
      return zrWaited;                                                         \
  } while (false)

Status MpiCommunicator::create(int *argc, char ***argv,
                               std::unique_ptr<MpiCommunicator> &out) {
  int provided = MPI_THREAD_SINGLE;
  ZR_MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided));
  // From here on a failed call returns its code instead of aborting with
  // MPI's own message, so that every error reads the same.
  ZR_MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
  if (provided < MPI_THREAD_SERIALIZED) {
    MPI_Finalize();
    return Status::error(
        "this MPI provides thread level " + std::to_string(provided) +
        ", zrun needs MPI_THREAD_SERIALIZED (its comm thread issues the "
        "collectives)");
  }
  int rank = 0, size = 0;
  ZR_MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
  ZR_MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &size));
  out.reset(new MpiCommunicator(rank, size, provided >= MPI_THREAD_MULTIPLE));
  ZR_MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, &out->notices));
  ZR_MPI_CHECK(MPI_Comm_set_errhandler(out->notices, MPI_ERRORS_RETURN));
  return Status::success();
}

MpiCommunicator::MpiCommunicator(int rank, int size, bool threadMultiple)
    : rankIndex(rank), rankCount(size), threadMultiple(threadMultiple),
      waiting(static_cast<size_t>(size), 0) {
  Watchdog::Hooks hooks;
  // Announcing needs a second thread in MPI while the first is blocked.
  if (threadMultiple) {
    hooks.announce = [this](uint64_t sequence) { announce(sequence); };
    hooks.arrived = [this](uint64_t sequence) { return arrived(sequence); };
  }
  hooks.abortAll = [this] {
    if (this->threadMultiple)
      MPI_Abort(MPI_COMM_WORLD, 1);
    // MPI_Abort from a second thread needs MPI_THREAD_MULTIPLE; without
    // it, exiting is enough: mpirun ends the job when a rank exits non-zero.
    std::_Exit(1);
  };
  watchdog = std::make_unique<Watchdog>(rank, size, std::move(hooks));
}

void MpiCommunicator::announce(uint64_t sequence) {
  announced.push_back(sequence);
  for (int r = 0; r < rankCount; ++r) {
    if (r == rankIndex)
      continue;
    MPI_Request request;
    if (MPI_Isend(&announced.back(), 1, MPI_UINT64_T, r, /*tag=*/1, notices,
                  &request) == MPI_SUCCESS)
      MPI_Request_free(&request);
  }
}

std::vector<int> MpiCommunicator::arrived(uint64_t sequence) {
  // Every announcement sent so far: a rank that announced collective
  // `sequence` (or a later one) has reached it.
  for (;;) {
    int pending = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, 1, notices, &pending, &status) !=
            MPI_SUCCESS ||
        !pending)
      break;
    uint64_t value = 0;
    if (MPI_Recv(&value, 1, MPI_UINT64_T, status.MPI_SOURCE, 1, notices,
                 MPI_STATUS_IGNORE) != MPI_SUCCESS)
      break;
    uint64_t &latest = waiting[static_cast<size_t>(status.MPI_SOURCE)];
    latest = std::max(latest, value);
  }
  std::vector<int> ranks;
  for (int r = 0; r < rankCount; ++r)
    if (r != rankIndex && waiting[static_cast<size_t>(r)] >= sequence)
      ranks.push_back(r);
  return ranks;
}

void MpiCommunicator::setCollectiveTimeout(double seconds, std::string tool) {
  watchdog->setTimeout(seconds, std::move(tool));
}

void MpiCommunicator::setCollectiveContext(std::string context) {
  watchdog->setContext(std::move(context));
}

MpiCommunicator::~MpiCommunicator() {
  watchdog.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

namespace {

/// MPI_Op for bf16 sums (MPI 3 has no bf16): each element of `in` added to
/// `inout` in f32, the sum rounded to bf16, as NCCL's bf16 sum does.
void sumBf16(void *in, void *inout, int *length, MPI_Datatype *) {
  const auto *a = static_cast<const uint16_t *>(in);
  auto *b = static_cast<uint16_t *>(inout);
  for (int i = 0; i < *length; ++i)
    b[i] = floatToBf16(bf16ToFloat(a[i]) + bf16ToFloat(b[i]));
}

/// The MPI datatype and operation sums of `type` use; an error naming
/// `what`, the type and `rank` when MPI cannot sum it.
Status summableType(ElementType type, const char *what, int rank,
                    MPI_Datatype &out, MPI_Op &op) {
  op = MPI_SUM;
  if (type == ElementType::BF16) {
    // Created once, after MPI_Init (every collective runs after it); MPI
    // frees user operations at MPI_Finalize.
    static MPI_Op bf16Sum = [] {
      MPI_Op created = MPI_OP_NULL;
      MPI_Op_create(&sumBf16, /*commute=*/1, &created);
      return created;
    }();
    if (bf16Sum == MPI_OP_NULL)
      return Status::error("[rank " + std::to_string(rank) + "] " + what +
                           " of bf16: MPI_Op_create failed");
    out = MPI_UINT16_T;
    op = bf16Sum;
    return Status::success();
  }
  // Indexed like kElementTypes (the enum's order); MPI_DATATYPE_NULL where
  // MPI has no type it can sum (f16: MPI 3 has none; bf16 is summed above;
  // bool: a sum of bools is no bool).
  static const MPI_Datatype kSummable[] = {
      MPI_FLOAT,  MPI_DATATYPE_NULL, MPI_DATATYPE_NULL,
      MPI_DOUBLE, MPI_INT64_T,       MPI_INT32_T,
      MPI_INT8_T, MPI_UINT8_T,       MPI_DATATYPE_NULL};
  static_assert(sizeof(kSummable) / sizeof(kSummable[0]) ==
                    sizeof(kElementTypes) / sizeof(kElementTypes[0]),
                "one MPI datatype per element type");
  out = kSummable[static_cast<unsigned>(type)];
  if (out == MPI_DATATYPE_NULL)
    return Status::error("[rank " + std::to_string(rank) + "] " + what +
                         " of " + std::string(elementTypeInfo(type).name) +
                         ": MPI cannot sum this element type");
  return Status::success();
}

} // namespace

Status MpiCommunicator::allGather(const void *send, void *receive,
                                  uint64_t countPerRank, ElementType type) {
  // Nothing is computed: the elements move as bytes, whatever their type.
  uint64_t bytesPerRank = countPerRank * elementTypeInfo(type).bytes;
  Watchdog::Scope scope(*watchdog, "all-gather of " +
                                       std::to_string(bytesPerRank) +
                                       " B per rank");
  const char *sendBytes = static_cast<const char *>(send);
  char *receiveBytes = static_cast<char *>(receive);
  // In place: MPI reads this rank's slice of `receive` itself.
  bool inPlace = sendBytes == receiveBytes + rankIndex * bytesPerRank;
  if (bytesPerRank <= kChunkBytes) {
    int count = static_cast<int>(bytesPerRank);
    ZR_MPI_COLLECTIVE(MPI_Iallgather(inPlace ? MPI_IN_PLACE : sendBytes, count,
                                     MPI_BYTE, receiveBytes, count, MPI_BYTE,
                                     MPI_COMM_WORLD, &request),
                      bytesPerRank * rankCount);
    return Status::success();
  }
  // Chunk c of every rank: `length` bytes at offset c*kChunkBytes of each
  // rank's slice. One "element" of the receive type is such a piece with
  // the extent of a whole slice, so element r lands in rank r's slice.
  for (uint64_t offset = 0; offset < bytesPerRank; offset += kChunkBytes) {
    int length = static_cast<int>(std::min(kChunkBytes, bytesPerRank - offset));
    MPI_Datatype piece, spaced;
    ZR_MPI_CHECK(MPI_Type_contiguous(length, MPI_BYTE, &piece));
    ZR_MPI_CHECK(MPI_Type_create_resized(
        piece, 0, static_cast<MPI_Aint>(bytesPerRank), &spaced));
    ZR_MPI_CHECK(MPI_Type_commit(&spaced));
    MPI_Request request = MPI_REQUEST_NULL;
    int code = MPI_Iallgather(inPlace ? MPI_IN_PLACE : sendBytes + offset,
                              length, MPI_BYTE, receiveBytes + offset, 1,
                              spaced, MPI_COMM_WORLD, &request);
    // A datatype may be freed while a request that uses it is pending.
    MPI_Type_free(&spaced);
    MPI_Type_free(&piece);
    ZR_MPI_CHECK(code);
    if (Status waited =
            waitQuietly(request, static_cast<uint64_t>(length) * rankCount);
        !waited.ok())
      return waited;
  }
  return Status::success();
}

Status MpiCommunicator::reduceScatter(const void *send, void *receive,
                                      uint64_t countPerRank, ElementType type) {
  MPI_Datatype datatype;
  MPI_Op op;
  if (Status status =
          summableType(type, "reduce-scatter", rankIndex, datatype, op);
      !status.ok())
    return status;
  if (countPerRank > static_cast<uint64_t>(INT_MAX))
    return Status::error("[rank " + std::to_string(rankIndex) +
                         "] reduce-scatter of " + std::to_string(countPerRank) +
                         " elements per rank exceeds MPI's int count");
  if (rankCount == 1) {
    // The sum over one rank is its input. Open MPI's non-blocking
    // reduce-scatter (libnbc) would malloc a temporary of the whole input
    // on every call and copy through it; blocks that large come from mmap,
    // so each call faulted in fresh pages: 33,000 faults a step, 8% of a
    // training step of bench/train_vs_torch.py's large model.
    if (send != receive)
      std::memcpy(receive, send, countPerRank * elementTypeInfo(type).bytes);
    return Status::success();
  }
  Watchdog::Scope scope(
      *watchdog, "reduce-scatter of " + std::to_string(countPerRank) + " " +
                     std::string(elementTypeInfo(type).name) + " per rank");
  ZR_MPI_COLLECTIVE(
      MPI_Ireduce_scatter_block(send, receive, static_cast<int>(countPerRank),
                                datatype, op, MPI_COMM_WORLD, &request),
      countPerRank * elementTypeInfo(type).bytes * rankCount);
  return Status::success();
}

Status MpiCommunicator::allReduce(void *data, uint64_t count,
                                  ElementType type) {
  MPI_Datatype datatype;
  MPI_Op op;
  if (Status status = summableType(type, "all-reduce", rankIndex, datatype, op);
      !status.ok())
    return status;
  uint64_t elementBytes = elementTypeInfo(type).bytes;
  uint64_t chunk = kChunkBytes / elementBytes;
  auto *bytes = static_cast<char *>(data);
  Watchdog::Scope scope(*watchdog, "all-reduce of " + std::to_string(count) +
                                       " " +
                                       std::string(elementTypeInfo(type).name));
  for (uint64_t offset = 0; offset < count; offset += chunk) {
    int length = static_cast<int>(std::min(chunk, count - offset));
    ZR_MPI_COLLECTIVE(MPI_Iallreduce(MPI_IN_PLACE,
                                     bytes + offset * elementBytes, length,
                                     datatype, op, MPI_COMM_WORLD, &request),
                      static_cast<uint64_t>(length) * elementBytes * 2);
  }
  return Status::success();
}

Status MpiCommunicator::broadcast(void *data, uint64_t bytes, int root) {
  char *cursor = static_cast<char *>(data);
  Watchdog::Scope scope(*watchdog, "broadcast of " + std::to_string(bytes) +
                                       " B from rank " + std::to_string(root));
  for (uint64_t offset = 0; offset < bytes; offset += kChunkBytes) {
    int length = static_cast<int>(std::min(kChunkBytes, bytes - offset));
    ZR_MPI_COLLECTIVE(MPI_Ibcast(cursor + offset, length, MPI_BYTE, root,
                                 MPI_COMM_WORLD, &request),
                      static_cast<uint64_t>(length));
  }
  return Status::success();
}

Status MpiCommunicator::barrier() {
  Watchdog::Scope scope(*watchdog, "barrier");
  ZR_MPI_COLLECTIVE(MPI_Ibarrier(MPI_COMM_WORLD, &request), 0);
  return Status::success();
}

Status MpiCommunicator::gatherText(std::string_view text,
                                   std::vector<std::string> &all) {
  all.clear();
  if (text.size() > static_cast<size_t>(INT_MAX))
    return Status::error("[rank " + std::to_string(rankIndex) + "] " +
                         std::to_string(text.size()) +
                         " bytes of text are too many to gather");
  int length = static_cast<int>(text.size());
  Watchdog::Scope scope(*watchdog, "gather of text");
  // Every rank learns every length, so that all of them agree on whether
  // the total fits one Gatherv before any enters it.
  std::vector<int> lengths(rankCount);
  ZR_MPI_COLLECTIVE(MPI_Iallgather(&length, 1, MPI_INT, lengths.data(), 1,
                                   MPI_INT, MPI_COMM_WORLD, &request),
                    0);
  std::vector<int> offsets(rankCount);
  uint64_t total = 0;
  for (int r = 0; r < rankCount; ++r) {
    offsets[r] = static_cast<int>(std::min<uint64_t>(total, INT_MAX));
    total += static_cast<uint64_t>(lengths[r]);
  }
  bool tooLarge = total > static_cast<uint64_t>(INT_MAX);
  if (!tooLarge) {
    std::vector<char> received(rankIndex == 0 ? total : 0);
    ZR_MPI_COLLECTIVE(MPI_Igatherv(text.data(), length, MPI_CHAR,
                                   received.data(), lengths.data(),
                                   offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD,
                                   &request),
                      total);
    if (rankIndex == 0)
      for (int r = 0; r < rankCount; ++r)
        all.emplace_back(received.data() + offsets[r], lengths[r]);
  }
  if (tooLarge)
    return Status::error("the ranks' texts add up to " + std::to_string(total) +
                         " bytes, more than one MPI gather moves (2 GiB)");
  return Status::success();
}

void MpiCommunicator::abort(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  // MPI_Abort does not return; if an implementation did, still end.
  std::_Exit(code);
}
