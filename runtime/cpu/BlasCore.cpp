//===- BlasCore.cpp - OpenBLAS's kernels for this CPU ---------------------===//
//
// See BlasCore.h. The CPU's features come from the compiler's CPUID builtins;
// the core OpenBLAS chose from openblas_get_corename().
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/BlasCore.h"
#include "runtime/cpu/Gemm.h"

#include <cblas.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>

namespace zplan::cpu {

std::string blasCoreName() {
  const char *name = openblas_get_corename();
  return name ? name : "";
}

std::string f32GemmName() {
  return detail::useAvx512Gemm() ? "zplan's AVX-512" : "OpenBLAS's";
}

std::string betterBlasCore() {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE"))
    return "";
  // OpenBLAS's x86-64 cores with AVX2 kernels (case differs across
  // versions, so compared as OpenBLAS prints them, in either case).
  std::string chosen = blasCoreName();
  for (std::string_view avx2 :
       {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids", "haswell",
        "zen", "skylakex", "cooperlake", "sapphirerapids"})
    if (chosen == avx2)
      return "";
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
#endif
  return "";
}

void runWithBetterBlasCore(char **argv) {
  std::string core = betterBlasCore();
  if (core.empty())
    return;
  if (setenv("OPENBLAS_CORETYPE", core.c_str(), /*overwrite=*/1) != 0)
    return;
  execv("/proc/self/exe", argv);
  // The exec failed: run on with OpenBLAS's choice, and without the
  // variable, which would name kernels this process does not run.
  unsetenv("OPENBLAS_CORETYPE");
}

} // namespace zplan::cpu
