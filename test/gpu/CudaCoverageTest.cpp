//===- CudaCoverageTest.cpp - CUDA has a kernel for every CPU opcode ------===//
//
// A plan zcc writes may hold any opcode the CPU backend runs; zrun --backend
// cuda refuses a plan with an opcode it has no kernel for before any work.
// So the CUDA table must cover the CPU's: checked here on any machine with
// the CUDA toolkit (no device needed), naming every opcode that is missing.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/plan/Opcodes.h"

#include <gtest/gtest.h>

#include <string>

using namespace zplan;

namespace {

TEST(CudaCoverage, EveryCpuOpcodeHasACudaKernel) {
  std::string missing;
  int kernels = 0;
  for (const plan::OpcodeInfo *info = plan::opcodesBegin();
       info != plan::opcodesEnd(); ++info) {
    if (!cpu::hasKernel(info->opcode))
      continue;
    ++kernels;
    if (!cuda::hasCudaKernel(info->opcode))
      missing += (missing.empty() ? "" : ", ") + std::string(info->name);
  }
  EXPECT_GE(kernels, 50) << "the CPU table looks empty";
  EXPECT_TRUE(missing.empty())
      << "opcodes with a CPU kernel but no CUDA kernel: " << missing;
}

TEST(CudaCoverage, NoCudaKernelWithoutACpuReference) {
  // A CUDA kernel the CPU lacks could not be checked by KernelDiffTest.
  for (const plan::OpcodeInfo *info = plan::opcodesBegin();
       info != plan::opcodesEnd(); ++info) {
    EXPECT_TRUE(!cuda::hasCudaKernel(info->opcode) ||
                cpu::hasKernel(info->opcode))
        << info->name;
  }
}

} // namespace
