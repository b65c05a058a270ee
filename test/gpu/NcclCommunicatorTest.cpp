//===- NcclCommunicatorTest.cpp - NCCL collectives on one GPU per rank ----===//
//
// RankDevice::open(cuda) on every rank (the NCCL id broadcast over MPI),
// then all-gather, reduce-scatter and all-reduce of device memory in f32
// and bf16 with values that depend on the rank, read back after the comm
// stream drains. ctest runs it under mpirun at N=1 and N=2 (label gpu);
// each test skips, saying why, when some rank has no GPU of its own (N=2
// needs two devices).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/session/RankDevice.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

using namespace zplan;

namespace {

comm::Communicator *host = nullptr;
RankDevice *device = nullptr;
std::string skipReason;

/// bf16 as its top 16 bits of an f32 (exact for the small integers here).
uint16_t toBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return static_cast<uint16_t>(bits >> 16);
}
float fromBf16(uint16_t value) {
  uint32_t bits = uint32_t(value) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof(result));
  return result;
}

class Nccl : public ::testing::Test {
protected:
  void SetUp() override {
    if (!skipReason.empty())
      GTEST_SKIP() << skipReason;
  }

  /// Device memory holding `values` (`width` bytes each, already encoded).
  std::unique_ptr<BackendMemory> upload(const void *values, uint64_t bytes) {
    std::unique_ptr<BackendMemory> memory;
    Status status =
        device->backend().allocate(bytes, "a collective's buffer", memory);
    EXPECT_TRUE(status.ok()) << status.message();
    status = device->backend().copyFromHost(memory->data(), values, bytes);
    EXPECT_TRUE(status.ok()) << status.message();
    return memory;
  }

  template <typename T> std::vector<T> download(const BackendMemory &memory) {
    std::vector<T> host(memory.bytes() / sizeof(T));
    Status status = device->backend().copyToHost(host.data(), memory.data(),
                                                 memory.bytes());
    EXPECT_TRUE(status.ok()) << status.message();
    return host;
  }

  int rank() const { return host->rank(); }
  int size() const { return host->size(); }
};

TEST_F(Nccl, AllGathersF32AndBf16) {
  const uint64_t perRank = 1000;
  std::vector<float> mine(perRank);
  std::vector<uint16_t> mineBf16(perRank);
  for (uint64_t i = 0; i < perRank; ++i) {
    mine[i] = static_cast<float>(100 * rank() + i % 50);
    mineBf16[i] = toBf16(mine[i]);
  }
  auto send = upload(mine.data(), perRank * 4);
  auto sendBf16 = upload(mineBf16.data(), perRank * 2);
  std::vector<uint8_t> zeros(perRank * size() * 4, 0);
  auto receive = upload(zeros.data(), perRank * size() * 4);
  auto receiveBf16 = upload(zeros.data(), perRank * size() * 2);
  comm::Communicator &nccl = device->collectives();
  ASSERT_TRUE(
      nccl.allGather(send->data(), receive->data(), perRank, ElementType::F32)
          .ok());
  ASSERT_TRUE(nccl.allGather(sendBf16->data(), receiveBf16->data(), perRank,
                             ElementType::BF16)
                  .ok());
  std::vector<float> all = download<float>(*receive);
  std::vector<uint16_t> allBf16 = download<uint16_t>(*receiveBf16);
  for (int r = 0; r < size(); ++r)
    for (uint64_t i = 0; i < perRank; ++i) {
      float expected = static_cast<float>(100 * r + i % 50);
      ASSERT_EQ(all[r * perRank + i], expected) << "rank " << r << " " << i;
      ASSERT_EQ(fromBf16(allBf16[r * perRank + i]), expected);
    }
}

TEST_F(Nccl, ReduceScattersAndAllReducesF32AndBf16) {
  const uint64_t perRank = 512;
  uint64_t total = perRank * size();
  // Rank r contributes (r + 1) * (i % 7) at element i: the sum over ranks
  // is (i % 7) * N(N+1)/2, exact in bf16 for these sizes.
  std::vector<float> mine(total);
  std::vector<uint16_t> mineBf16(total);
  for (uint64_t i = 0; i < total; ++i) {
    mine[i] = static_cast<float>((rank() + 1) * (i % 7));
    mineBf16[i] = toBf16(mine[i]);
  }
  float ranks = static_cast<float>(size() * (size() + 1) / 2);
  comm::Communicator &nccl = device->collectives();

  auto send = upload(mine.data(), total * 4);
  std::vector<uint8_t> zeros(total * 4, 0);
  auto shard = upload(zeros.data(), perRank * 4);
  ASSERT_TRUE(
      nccl.reduceScatter(send->data(), shard->data(), perRank, ElementType::F32)
          .ok());
  std::vector<float> reduced = download<float>(*shard);
  for (uint64_t i = 0; i < perRank; ++i)
    ASSERT_EQ(reduced[i], ranks * float((rank() * perRank + i) % 7)) << i;

  auto sendBf16 = upload(mineBf16.data(), total * 2);
  auto shardBf16 = upload(zeros.data(), perRank * 2);
  ASSERT_TRUE(nccl.reduceScatter(sendBf16->data(), shardBf16->data(), perRank,
                                 ElementType::BF16)
                  .ok());
  std::vector<uint16_t> reducedBf16 = download<uint16_t>(*shardBf16);
  for (uint64_t i = 0; i < perRank; ++i)
    ASSERT_EQ(fromBf16(reducedBf16[i]),
              ranks * float((rank() * perRank + i) % 7))
        << i;

  ASSERT_TRUE(nccl.allReduce(send->data(), total, ElementType::F32).ok());
  ASSERT_TRUE(nccl.allReduce(sendBf16->data(), total, ElementType::BF16).ok());
  std::vector<float> summed = download<float>(*send);
  std::vector<uint16_t> summedBf16 = download<uint16_t>(*sendBf16);
  for (uint64_t i = 0; i < total; ++i) {
    ASSERT_EQ(summed[i], ranks * float(i % 7)) << i;
    ASSERT_EQ(fromBf16(summedBf16[i]), ranks * float(i % 7)) << i;
  }
}

TEST_F(Nccl, RefusesToSumATypeNcclLacks) {
  Status status =
      device->collectives().allReduce(nullptr, 0, ElementType::Bool);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("NCCL cannot sum"), std::string::npos)
      << status.message();
}

} // namespace

int main(int argc, char **argv) {
  std::unique_ptr<comm::MpiCommunicator> mpi;
  if (Status status = comm::MpiCommunicator::create(&argc, &argv, mpi);
      !status.ok()) {
    std::fprintf(stderr, "NcclCommunicatorTest: %s\n",
                 status.message().c_str());
    return 1;
  }
  host = mpi.get();
  std::unique_ptr<RankDevice> opened;
  // One GPU per rank: N ranks need N devices (on this one machine).
  if (cuda::deviceCount() < mpi->size())
    skipReason = "no CUDA device for each of the " +
                 std::to_string(mpi->size()) + " ranks (" +
                 std::to_string(cuda::deviceCount()) +
                 " visible): " + cuda::noDeviceReason();
  float lacking = skipReason.empty() ? 0.0f : 1.0f;
  if (!mpi->allReduce(&lacking, 1).ok())
    return 1;
  if (lacking > 0 && skipReason.empty())
    skipReason = "another rank has no CUDA device of its own";
  if (skipReason.empty()) {
    Status status = RankDevice::open(BackendChoice::Cuda, {}, *mpi, opened);
    if (!status.ok()) {
      std::fprintf(stderr, "NcclCommunicatorTest: %s\n",
                   status.message().c_str());
      return 1;
    }
    device = opened.get();
  }
  ::testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS();
  if (!mpi->barrier().ok())
    return 1;
  opened.reset();
  return result;
}
