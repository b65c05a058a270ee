//===- BlasCore.h - OpenBLAS's kernels for this CPU -----------------------===//
//
// Debian's OpenBLAS is built with DYNAMIC_ARCH: when it loads, it picks the
// kernels of one CPU family from the CPUID vendor, family and model numbers.
// A CPU it does not know by number -- a virtual machine that reports a
// generic model, as this project's CI machine does -- gets its Prescott
// (SSE3) kernels, whatever the CPU can run: a GPT-2 training step took 2.6x
// as long there as with the AVX-512 kernels (bench/README.md). OpenBLAS reads
// OPENBLAS_CORETYPE once, when it loads, so zrun checks before anything else
// and re-executes itself with that variable set when OpenBLAS's choice falls
// short of the CPU's features; a user who set the variable keeps it.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_BLASCORE_H
#define ZPLAN_RUNTIME_CPU_BLASCORE_H

#include <string>

namespace zplan::cpu {

/// OpenBLAS's name for the kernels it runs ("SkylakeX", "Prescott", ...).
std::string blasCoreName();

/// Whose kernel runs the f32 GEMMs: "zplan's AVX-512" where the CPU has
/// AVX-512 (Gemm.h) and ZPLAN_GEMM is not "openblas", else "OpenBLAS's".
std::string f32GemmName();

/// The core OpenBLAS should run instead of the one it chose: "SkylakeX" on
/// a CPU with AVX-512 (F, CD, BW, DQ, VL), "Haswell" on one with AVX2 and FMA,
/// when OpenBLAS chose a core without AVX2 (its detection did not know the
/// CPU); empty when its choice stands or OPENBLAS_CORETYPE is set.
std::string betterBlasCore();

/// Re-executes this process (/proc/self/exe, `argv`) with OPENBLAS_CORETYPE
/// set to betterBlasCore() when that is not empty; returns when there is
/// nothing to do or the exec failed (OpenBLAS's own choice then stands). To
/// be called first thing in main, before MPI or threads start.
void runWithBetterBlasCore(char **argv);

} // namespace zplan::cpu

#endif // ZPLAN_RUNTIME_CPU_BLASCORE_H
