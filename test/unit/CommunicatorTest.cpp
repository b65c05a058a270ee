//===- CommunicatorTest.cpp - typed collectives on 2 MPI ranks ------------===//
//
// The communicator moves and sums elements of the type it is given. Run by
// ctest under `mpirun -np 2` (test/unit/CMakeLists.txt); every rank runs
// every test, with values that depend on the rank, so that a collective
// that ignored the type (summing i64 as floats, moving 4 bytes per f64)
// gives a wrong number on some rank. main() refuses to run on one rank,
// where every collective is a copy and the tests could not fail.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/support/Bfloat16.h"

#include "test/unit/StatusMatchers.h"
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

using namespace zplan;
using zplan::testing::contains;

namespace {

comm::Communicator *communicator = nullptr;

int rank() { return communicator->rank(); }
int size() { return communicator->size(); }

template <typename T> void expectAllGather(ElementType type, T base) {
  // Rank r contributes {base + 10 r, base + 10 r + 1, base + 10 r + 2}.
  std::vector<T> send(3), receive(3 * size());
  for (int i = 0; i < 3; ++i)
    send[i] = static_cast<T>(base + 10 * rank() + i);
  Status status = communicator->allGather(send.data(), receive.data(), 3, type);
  ASSERT_TRUE(status.ok()) << status.message();
  for (int r = 0; r < size(); ++r)
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(receive[3 * r + i], static_cast<T>(base + 10 * r + i))
          << "rank " << rank() << ", slot " << r << "." << i;
}

TEST(Communicator, AllGatherMovesWholeElementsOfEachType) {
  expectAllGather<float>(ElementType::F32, 0.5f);
  expectAllGather<double>(ElementType::F64, 1e300);
  expectAllGather<int64_t>(ElementType::I64, int64_t(1) << 40);
  expectAllGather<int32_t>(ElementType::I32, -7);
  expectAllGather<uint16_t>(ElementType::BF16, 0x3F80);
  expectAllGather<uint8_t>(ElementType::Bool, 0);
}

template <typename T> void expectSums(ElementType type, T base) {
  // Element i of rank r is base * (r + 1) + i; the sum over ranks is
  // base * n (n + 1) / 2 + n i.
  int n = size();
  auto expected = [&](int i) {
    return static_cast<T>(base * (n * (n + 1) / 2) + static_cast<T>(n * i));
  };
  std::vector<T> send(2 * n), receive(2);
  for (int i = 0; i < 2 * n; ++i)
    send[i] = static_cast<T>(base * (rank() + 1) + i);
  Status status =
      communicator->reduceScatter(send.data(), receive.data(), 2, type);
  ASSERT_TRUE(status.ok()) << status.message();
  for (int i = 0; i < 2; ++i)
    EXPECT_EQ(receive[i], expected(2 * rank() + i)) << "rank " << rank();

  std::vector<T> data(send);
  status = communicator->allReduce(data.data(), data.size(), type);
  ASSERT_TRUE(status.ok()) << status.message();
  for (int i = 0; i < 2 * n; ++i)
    EXPECT_EQ(data[i], expected(i)) << "rank " << rank() << ", element " << i;
}

TEST(Communicator, ReduceScatterAndAllReduceSumInTheirType) {
  expectSums<float>(ElementType::F32, 1.5f);
  expectSums<double>(ElementType::F64, 0.25);
  expectSums<int32_t>(ElementType::I32, -1000);
  // Beyond float's 24-bit mantissa: an i64 summed as float would round.
  expectSums<int64_t>(ElementType::I64, (int64_t(1) << 40) + 1);
}

TEST(Communicator, Bf16SumsRoundEachAddition) {
  // Element i of rank r is (1 + i) + r 2^-8 in bf16 (halfway cases, so the
  // rounding after each addition matters): the sum must be the bf16 sum,
  // each addition done in f32 and rounded to even. MPI_SUM on the uint16
  // bit patterns, or no rounding, gives other bits.
  int n = size();
  std::vector<uint16_t> send(2 * n), receive(2);
  for (int i = 0; i < 2 * n; ++i)
    send[i] = floatToBf16(float(1 + i) + float(rank()) / 256.0f);
  auto expected = [&](int i) {
    float sum = bf16ToFloat(floatToBf16(float(1 + i)));
    for (int r = 1; r < n; ++r)
      sum = bf16ToFloat(floatToBf16(
          sum + bf16ToFloat(floatToBf16(float(1 + i) + r / 256.0f))));
    return floatToBf16(sum);
  };
  Status status = communicator->reduceScatter(send.data(), receive.data(), 2,
                                              ElementType::BF16);
  ASSERT_TRUE(status.ok()) << status.message();
  // On 2 ranks the one addition is order-free: exact. On more, MPI's order
  // is its own: within one bf16 ulp of the rank-order sum per addition.
  for (int i = 0; i < 2; ++i) {
    float got = bf16ToFloat(receive[i]);
    float want = bf16ToFloat(expected(2 * rank() + i));
    if (n == 2)
      EXPECT_EQ(receive[i], expected(2 * rank() + i)) << "rank " << rank();
    else
      EXPECT_NEAR(got, want, want * (n - 1) / 128.0f) << "rank " << rank();
  }
  std::vector<uint16_t> data(send);
  status = communicator->allReduce(data.data(), data.size(), ElementType::BF16);
  ASSERT_TRUE(status.ok()) << status.message();
  if (n == 2) {
    for (int i = 0; i < 2 * n; ++i)
      EXPECT_EQ(data[i], expected(i)) << "rank " << rank() << ", element " << i;
  }
}

TEST(Communicator, AllGatherInPlaceReadsThisRanksSlice) {
  // The mixed-precision gather rounds its shard into its own slice of the
  // copy, then gathers in place.
  std::vector<uint16_t> copy(3 * size(), 0);
  for (int i = 0; i < 3; ++i)
    copy[3 * rank() + i] = static_cast<uint16_t>(100 * rank() + i);
  Status status = communicator->allGather(copy.data() + 3 * rank(), copy.data(),
                                          3, ElementType::BF16);
  ASSERT_TRUE(status.ok()) << status.message();
  for (int r = 0; r < size(); ++r)
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(copy[3 * r + i], 100 * r + i) << "rank " << rank();
}

TEST(Communicator, SumOfATypeMpiCannotSumIsAnError) {
  std::vector<uint16_t> data(4, 0x3C00);
  Status status =
      communicator->allReduce(data.data(), data.size(), ElementType::F16);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(contains(status.message(), "all-reduce of f16: MPI cannot sum"));
  std::vector<uint8_t> flags(2 * size(), 1), out(2);
  status = communicator->reduceScatter(flags.data(), out.data(), 2,
                                       ElementType::Bool);
  ASSERT_FALSE(status.ok());
  EXPECT_TRUE(contains(status.message(), "reduce-scatter of i1"));
}

} // namespace

int main(int argc, char **argv) {
  std::unique_ptr<comm::MpiCommunicator> mpi;
  if (Status status = comm::MpiCommunicator::create(&argc, &argv, mpi);
      !status.ok()) {
    std::fprintf(stderr, "CommunicatorTest: %s\n", status.message().c_str());
    return 1;
  }
  if (mpi->size() < 2) {
    std::fprintf(stderr, "CommunicatorTest: run it on 2 or more ranks "
                         "(mpirun -np 2); on one rank it tests nothing\n");
    return 1;
  }
  communicator = mpi.get();
  ::testing::InitGoogleTest(&argc, argv);
  int result = RUN_ALL_TESTS();
  // No rank finalizes MPI while another still runs a collective.
  if (Status status = mpi->barrier(); !status.ok())
    return 1;
  return result;
}
