//===- EmulatedCasesTest.cpp - cases only the emulation can check ---------===//
//
// KernelDiffTest.cpp's cases, run here, cover every launch site; these add
// what only the emulator observes: a decode launch with more than the
// default 48 KiB of dynamic shared memory, which CUDA refuses unless
// cudaFuncSetAttribute raised the kernel's limit first (the emulator
// enforces that, Runtime.cpp). Same harness and tolerance as
// KernelDiffTest's cached_attention cases.
//
//===----------------------------------------------------------------------===//

#include "test/gpu/KernelDiff.h"

#include "runtime/cpu/CpuBackend.h"
#include "runtime/cuda/CudaBackend.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace zplan;
using namespace zplan::testing;

namespace {

TEST(EmulatedCases, CachedAttentionWithMoreThan48KiBOfSharedMemory) {
  // Shared floats: width + min(slots, 2048) + 8 warps * valueWidth
  // = 64 + 2048 + 12000: 56 KiB.
  const int64_t slots = 2048, width = 64, valueWidth = 1500;
  CaseBuilder c("cached_attention", "dynamic_shared_over_48k");
  c.real("scale", 1.0 / std::sqrt(double(width)));
  c.uniform({1, 1, 1, width}, ElementType::F32, -2, 2)
      .uniform({1, 1, slots, width}, ElementType::F32, -2, 2)
      .uniform({1, 1, slots, valueWidth}, ElementType::F32, -1, 1);
  HostTensor positions({1, 1}, ElementType::I64);
  positions.setInt(0, slots - 1);
  c.operand(positions);
  c.result({1, 1, 1, valueWidth});
  c.tolerance(1e-4, 2e-5);
  DiffCase diffCase = c.build();

  std::unique_ptr<Backend> emulated;
  ASSERT_TRUE(cuda::createCudaBackend(0, emulated).ok());
  DiffRun reference = runCase(cpu::cpuBackend(), diffCase);
  DiffRun run = runCase(*emulated, diffCase);
  ASSERT_TRUE(reference.status.ok()) << reference.status.message();
  EXPECT_EQ(compareRuns(diffCase, reference, run), "");
}

} // namespace
