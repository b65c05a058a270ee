//===- TierStoreTest.cpp - the offload tiers' store (TierStore.h) ---------===//
//
// One rank's HOST and NVME buffers: what is written reads back (through the
// page cache and around it), a buffer never written reads as zeros, a file
// changed under the store fails its checksum naming the buffer, the file is
// gone with the store, and a host kernel's address of a host buffer is the
// bytes the copies read.
//
//===----------------------------------------------------------------------===//

#include "runtime/exec/TierStore.h"

#include "test/unit/StatusMatchers.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace zplan;
using zplan::testing::errorOf;

namespace {

/// A plan with buffer 1 in the host tier and buffer 2 in the nvme tier,
/// `floats` f32 each.
plan::Plan tieredPlan(int64_t floats) {
  plan::Plan out;
  for (auto tier : {plan::Buffer::HOST, plan::Buffer::NVME}) {
    plan::Buffer *buffer = out.add_buffers();
    buffer->set_id(out.buffers_size());
    buffer->set_name(tier == plan::Buffer::HOST ? "g (adam m)" : "g (adam v)");
    buffer->set_kind(plan::Buffer::STATE);
    buffer->add_shape(floats);
    buffer->set_dtype(plan::F32);
    buffer->set_bytes(static_cast<uint64_t>(floats) * 4);
    buffer->set_tier(tier);
  }
  return out;
}

std::string temporaryDirectory() {
  char pattern[] = "/tmp/zplan-tier-XXXXXX";
  return mkdtemp(pattern);
}

TEST(TierStore, WritesReadBackAndUnwrittenBuffersReadAsZeros) {
  std::string directory = temporaryDirectory();
  plan::Plan plan = tieredPlan(1000);
  std::unique_ptr<TierStore> store;
  ASSERT_EQ(
      errorOf(TierStore::open(plan, 3, directory, NvmeIo::Buffered, store)),
      "");
  EXPECT_TRUE(store->holds(1));
  EXPECT_TRUE(store->holds(2));
  EXPECT_EQ(store->filePath(), directory + "/zplan-rank3.tier");
  EXPECT_EQ(store->nvmeBytes(), 4096u);

  std::vector<float> read(1000, 7.0f);
  ASSERT_EQ(errorOf(store->read(2, read.data())), "");
  EXPECT_EQ(read, std::vector<float>(1000, 0.0f));

  std::vector<float> written(1000);
  for (size_t i = 0; i < written.size(); ++i)
    written[i] = static_cast<float>(i) * 0.5f - 3.0f;
  for (uint32_t id : {1u, 2u}) {
    ASSERT_EQ(errorOf(store->write(id, written.data())), "");
    std::fill(read.begin(), read.end(), 0.0f);
    ASSERT_EQ(errorOf(store->read(id, read.data())), "");
    EXPECT_EQ(read, written) << "buffer " << id;
  }
  std::string path = store->filePath();
  store.reset();
  EXPECT_NE(access(path.c_str(), F_OK), 0) << path << " outlived its store";
  rmdir(directory.c_str());
}

TEST(TierStore, DirectIoReadsBackWhatItWroteAcrossBounceChunks) {
  // 1,200,001 floats: more than one 4 MiB bounce chunk, and a last page
  // the buffer fills only in part.
  std::string directory = temporaryDirectory();
  plan::Plan plan = tieredPlan(1200001);
  std::unique_ptr<TierStore> store;
  ASSERT_EQ(errorOf(TierStore::open(plan, 0, directory, NvmeIo::Direct, store)),
            "");
  std::vector<float> written(1200001), read(1200001, 0.0f);
  for (size_t i = 0; i < written.size(); ++i)
    written[i] = static_cast<float>(i % 1013) - 0.25f;
  ASSERT_EQ(errorOf(store->write(2, written.data())), "");
  ASSERT_EQ(errorOf(store->read(2, read.data())), "");
  EXPECT_EQ(read, written);
  store.reset();
  rmdir(directory.c_str());
}

TEST(TierStore, HostAddressIsTheBytesTheCopiesSee) {
  std::string directory = temporaryDirectory();
  plan::Plan plan = tieredPlan(256);
  std::unique_ptr<TierStore> store;
  ASSERT_EQ(
      errorOf(TierStore::open(plan, 0, directory, NvmeIo::Buffered, store)),
      "");
  EXPECT_EQ(store->hostAddress(2), nullptr) << "buffer 2 is in the nvme tier";
  auto *host = reinterpret_cast<float *>(store->hostAddress(1));
  ASSERT_NE(host, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(host) % 4096, 0u);
  // Never written: zeros, in place.
  EXPECT_EQ(std::vector<float>(host, host + 256), std::vector<float>(256, 0));
  // What a host kernel writes there, a copy reads.
  host[17] = 4.5f;
  std::vector<float> read(256, 1.0f);
  ASSERT_EQ(errorOf(store->read(1, read.data())), "");
  EXPECT_EQ(read[17], 4.5f);
  EXPECT_EQ(read[18], 0.0f);
  store.reset();
  rmdir(directory.c_str());
}

TEST(TierStore, AFileChangedUnderTheRunFailsItsChecksum) {
  std::string directory = temporaryDirectory();
  plan::Plan plan = tieredPlan(64);
  std::unique_ptr<TierStore> store;
  ASSERT_EQ(
      errorOf(TierStore::open(plan, 0, directory, NvmeIo::Buffered, store)),
      "");
  std::vector<float> values(64, 1.5f);
  ASSERT_EQ(errorOf(store->write(2, values.data())), "");
  int file = ::open(store->filePath().c_str(), O_WRONLY);
  ASSERT_GE(file, 0);
  float other = 2.5f;
  ASSERT_EQ(pwrite(file, &other, sizeof other, 40), 4);
  close(file);
  EXPECT_EQ(errorOf(store->read(2, values.data())),
            "'g (adam v)' read back from the nvme tier's file '" +
                store->filePath() +
                "' fails its checksum: the file changed under the run");
  store.reset();
  rmdir(directory.c_str());
}

TEST(TierStore, NvmeBuffersNeedADirectoryThatExists) {
  plan::Plan plan = tieredPlan(16);
  std::unique_ptr<TierStore> store;
  EXPECT_EQ(errorOf(TierStore::open(plan, 0, "", NvmeIo::Buffered, store)),
            "the plan keeps 4096 bytes per rank in the nvme tier but names no "
            "directory: compile with --offload-dir DIR or run zrun with "
            "--offload-dir DIR");
  EXPECT_EQ(errorOf(TierStore::open(plan, 1, "/nonexistent-zplan",
                                    NvmeIo::Buffered, store)),
            "cannot create the nvme tier's file "
            "'/nonexistent-zplan/zplan-rank1.tier': No such file or directory");
}

} // namespace
