//===- gemm_bench.cpp - zplan's AVX-512 GEMM against OpenBLAS's SGEMM -----===//
//
// The f32 products of train_vs_torch.py's two Llamas' forwards (512 rows:
// batch 4 x 128; the projections, the MLP and the LM head, B transposed as
// the exports hand the weights over), on one thread, through
// runtime/cpu/Gemm.h's sgemmAvx512 and OpenBLAS's cblas_sgemm, in the same
// run:
//
//   build/bin/gemm_bench [--sets S] [--rounds R]
//
// "layers": S distinct operand sets (16 by default, 48-400 MiB, past the
// L3 of this machine) multiplied one after the other, as a forward meets
// its layers: A, B and C come from L3 or memory. "hot": one set, again and
// again, everything in cache. Each figure is the median over R rounds
// (5), in GFLOP/s; the ratio is zplan's over OpenBLAS's. "packed" is
// zplan's kernel on each B packed once beforehand (packB, as a forward's
// weights are kept: runtime/cpu/StationaryWeights.h), and "gain" its rate
// over zplan's packing per call. The products are compared as well: the
// largest difference from OpenBLAS's, relative to the largest |C|, is
// printed and must stay under 1e-5 (exit 1 otherwise); the packed product
// must be zplan's per call bit for bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/BlasCore.h"
#include "runtime/cpu/Gemm.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

using zplan::cpu::detail::sgemmAvx512;
using zplan::cpu::detail::useAvx512Gemm;

namespace {

struct Shape {
  const char *name;
  int m, n, k;
};

struct Operands {
  std::vector<float> a, b, c;
  /// B as packB packs it: 64-byte aligned.
  std::unique_ptr<float, decltype(&std::free)> packed{nullptr, &std::free};
};

double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The median over `rounds` of the time to call `product` on sets
/// 0 .. sets-1 in turn.
double medianSeconds(int rounds, int sets,
                     const std::function<void(int)> &product) {
  std::vector<double> times;
  for (int round = 0; round < rounds; ++round) {
    double start = seconds();
    for (int set = 0; set < sets; ++set)
      product(set);
    times.push_back(seconds() - start);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  int sets = 16, rounds = 5;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if ((flag == "--sets" || flag == "--rounds") && i + 1 < argc) {
      (flag == "--sets" ? sets : rounds) = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: gemm_bench [--sets S] [--rounds R]\n");
      return 2;
    }
  }
  openblas_set_num_threads(1); // one thread, as zrun keeps OpenBLAS's pool
  if (!useAvx512Gemm()) {
    std::printf("gemm_bench: no AVX-512 here (or ZPLAN_GEMM=openblas): "
                "zrun runs OpenBLAS's SGEMM, nothing to compare\n");
    return 0;
  }
  std::printf("# gemm_bench: one thread; OpenBLAS's %s kernels; %d operand "
              "sets, median of %d rounds; B transposed\n",
              zplan::cpu::blasCoreName().c_str(), sets, rounds);
  std::printf("%-16s %5s %5s %5s  %-6s %8s %8s %6s  %8s %6s  %s\n", "product",
              "M", "N", "K", "data", "zplan", "OpenBLAS", "ratio", "packed",
              "gain", "max diff");
  const Shape shapes[] = {
      {"small q_proj", 512, 256, 256},     {"small gate_proj", 512, 688, 256},
      {"small down_proj", 512, 256, 688},  {"small lm_head", 512, 8192, 256},
      {"large q_proj", 512, 512, 512},     {"large gate_proj", 512, 1376, 512},
      {"large down_proj", 512, 512, 1376}, {"large lm_head", 512, 8192, 512}};
  std::mt19937 generator(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  bool ok = true;
  for (const Shape &shape : shapes) {
    int m = shape.m, n = shape.n, k = shape.k;
    // The LM head's result is streamed past the caches, as Matmul.cpp
    // decides.
    bool stream = int64_t(m) * n * 4 > zplan::cpu::detail::kStreamedResultBytes;
    std::vector<Operands> operands(sets);
    for (Operands &set : operands) {
      set.a.resize(size_t(m) * k);
      set.b.resize(size_t(n) * k);
      set.c.assign(size_t(m) * n, 0.0f);
      for (float &x : set.a)
        x = value(generator);
      for (float &x : set.b)
        x = value(generator);
      size_t packedBytes =
          sizeof(float) *
          static_cast<size_t>(zplan::cpu::detail::packedBFloats(n, k));
      set.packed.reset(static_cast<float *>(
          std::aligned_alloc(64, (packedBytes + 63) / 64 * 64)));
      zplan::cpu::detail::packB(true, n, k, set.b.data(), k, set.packed.get());
    }
    auto zplan = [&](int set) {
      Operands &o = operands[set];
      sgemmAvx512(true, m, n, k, 1.0f, o.a.data(), k, o.b.data(), k, 0.0f,
                  o.c.data(), n, stream);
    };
    auto packed = [&](int set) {
      Operands &o = operands[set];
      zplan::cpu::detail::sgemmAvx512Packed(
          m, n, k, o.a.data(), k, o.packed.get(), 0.0f, o.c.data(), n, stream);
    };
    auto blas = [&](int set) {
      Operands &o = operands[set];
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f,
                  o.a.data(), k, o.b.data(), k, 0.0f, o.c.data(), n);
    };
    // The products agree (each kernel's own order of the same sums).
    blas(0);
    std::vector<float> expected = operands[0].c;
    zplan(0);
    double largest = 0, difference = 0;
    for (size_t i = 0; i < expected.size(); ++i) {
      largest = std::max(largest, double(std::fabs(expected[i])));
      difference = std::max(difference,
                            double(std::fabs(expected[i] - operands[0].c[i])));
    }
    double relative = difference / std::max(largest, 1e-30);
    if (!(relative < 1e-5))
      ok = false;
    std::vector<float> perCall = operands[0].c;
    packed(0);
    bool same = std::memcmp(perCall.data(), operands[0].c.data(),
                            sizeof(float) * perCall.size()) == 0;
    if (!same)
      ok = false;
    double flops = 2.0 * m * n * k;
    for (bool hot : {false, true}) {
      int count = hot ? 1 : sets;
      double zplanRate =
          flops * count / medianSeconds(rounds, count, zplan) / 1e9;
      double blasRate =
          flops * count / medianSeconds(rounds, count, blas) / 1e9;
      double packedRate =
          flops * count / medianSeconds(rounds, count, packed) / 1e9;
      std::printf(
          "%-16s %5d %5d %5d  %-6s %8.1f %8.1f %6.3f  %8.1f %6.3f  "
          "%.2g%s%s\n",
          shape.name, m, n, k, hot ? "hot" : "layers", zplanRate, blasRate,
          zplanRate / blasRate, packedRate, packedRate / zplanRate, relative,
          relative < 1e-5 ? "" : " FAIL", same ? "" : " FAIL (packed differs)");
    }
  }
  return ok ? 0 : 1;
}
