//===- LauncherTest.cpp - what Open MPI, MPICH and Slurm say of a rank ----===//
//
// comm::launchedRank() reads each launcher's variables; an mpirun inside a
// Slurm allocation sets its own beside Slurm's, and mpirun's are the ones
// that describe this process.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/Launcher.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

using zplan::comm::LaunchedRank;
using zplan::comm::launchedRank;

namespace {

const char *const kVariables[] = {"OMPI_COMM_WORLD_RANK",
                                  "OMPI_COMM_WORLD_LOCAL_RANK",
                                  "PMI_RANK",
                                  "MPI_LOCALRANKID",
                                  "SLURM_PROCID",
                                  "SLURM_LOCALID"};

/// Clears every launcher variable for the test and restores them after.
class Launcher : public ::testing::Test {
protected:
  void SetUp() override {
    for (const char *name : kVariables) {
      const char *value = std::getenv(name);
      saved.push_back(
          {name, value ? std::string(value) : std::string(), value != nullptr});
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const Saved &entry : saved)
      if (entry.set)
        ::setenv(entry.name, entry.value.c_str(), 1);
      else
        ::unsetenv(entry.name);
  }

  struct Saved {
    const char *name;
    std::string value;
    bool set;
  };
  std::vector<Saved> saved;
};

TEST_F(Launcher, NoneRecognized) {
  LaunchedRank rank = launchedRank();
  EXPECT_EQ(rank.launcher, nullptr);
  EXPECT_EQ(rank.rank, -1);
  EXPECT_EQ(rank.localRank, -1);
}

TEST_F(Launcher, EachLauncherByItsVariables) {
  ::setenv("SLURM_PROCID", "5", 1);
  ::setenv("SLURM_LOCALID", "1", 1);
  LaunchedRank slurm = launchedRank();
  EXPECT_STREQ(slurm.launcher, "Slurm");
  EXPECT_EQ(slurm.rank, 5);
  EXPECT_EQ(slurm.localRank, 1);

  // mpirun inside the allocation: its variables describe this process.
  ::setenv("PMI_RANK", "3", 1);
  ::setenv("MPI_LOCALRANKID", "0", 1);
  LaunchedRank mpich = launchedRank();
  EXPECT_STREQ(mpich.launcher, "MPICH");
  EXPECT_EQ(mpich.rank, 3);
  EXPECT_EQ(mpich.localRank, 0);

  ::setenv("OMPI_COMM_WORLD_RANK", "2", 1);
  LaunchedRank openMpi = launchedRank();
  EXPECT_STREQ(openMpi.launcher, "Open MPI");
  EXPECT_EQ(openMpi.rank, 2);
  EXPECT_EQ(openMpi.localRank, -1); // its local rank is not set here
}

TEST_F(Launcher, NotANumberIsNotARank) {
  ::setenv("OMPI_COMM_WORLD_RANK", "two", 1);
  ::setenv("SLURM_PROCID", "-1", 1);
  EXPECT_EQ(launchedRank().launcher, nullptr);
}

} // namespace
