//===- calibrate_cpu.cpp - a CPU hardware profile measured on this machine ===//
//
// compiler/analysis/hardware/cpu.json held estimates; this writes one
// measured here, in the same format (every number with its source), through
// the runtime's own pieces: the CPU kernels (runKernel: the f32 GEMM behind
// `matmul`, zplan's AVX-512 kernel or OpenBLAS's SGEMM; the elementwise
// loops) and the MPI communicator zrun's comm thread uses. Run it as zrun runs,
// one rank per process:
//
//   mpirun -np 2 build/bin/calibrate_cpu -o bench/profiles/cpu-2core.json
//
// Every rank measures at once (a rank's rates are what it gets beside the
// others); the profile holds the ranks' mean. Besides the roofline rates it
// measures what overlap costs on a CPU: the compute thread runs a decode-
// shaped matmul while a comm thread issues all-gathers back to back, as the
// executor's two queues do, and compute_slowdown_during_collective is how
// much slower compute runs then (0: the collective is free, as on a GPU).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/cpu/BlasCore.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/tooling/Files.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace zplan;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

/// An f32 tensor the kernels read and write.
struct Buffer {
  std::vector<float> values;
  std::vector<int64_t> shape;
  explicit Buffer(std::vector<int64_t> extents) : shape(std::move(extents)) {
    int64_t count = 1;
    for (int64_t extent : shape)
      count *= extent;
    values.assign(count, 0.5f);
  }
  TensorRef ref() { return TensorRef{values.data(), shape, ElementType::F32}; }
  double bytes() const { return 4.0 * values.size(); }
};

/// `opcode` on `operands` into `result` through the CPU backend's kernels;
/// a failure ends the process (a calibration of a broken kernel is noise).
std::function<void()> kernel(plan::Opcode opcode,
                             std::vector<Buffer *> operands, Buffer &result) {
  auto instruction = std::make_shared<plan::Instruction>();
  instruction->set_opcode(opcode);
  std::vector<TensorRef> in;
  for (Buffer *operand : operands)
    in.push_back(operand->ref());
  std::vector<TensorRef> out{result.ref()};
  return [instruction, in, out] {
    Status status = cpu::runKernel(*instruction, in, out);
    if (!status.ok()) {
      std::fprintf(stderr, "calibrate_cpu: error: %s\n",
                   status.message().c_str());
      std::exit(1);
    }
  };
}

void check(Status status);

/// Seconds per call of `work`: the median of 5 rounds, each as many calls
/// as fill about `roundSeconds`. Every rank makes rank 0's count of calls, so
/// that a `work` holding a collective is called as often on every rank.
double secondsPerCall(comm::Communicator &comm,
                      const std::function<void()> &work,
                      double roundSeconds = 0.2) {
  work(); // Warm: pages touched, BLAS buffers allocated.
  Clock::time_point probe = Clock::now();
  work();
  double once = std::max(secondsSince(probe), 1e-7);
  int calls = std::max(1, static_cast<int>(roundSeconds / once));
  check(comm.broadcast(&calls, sizeof(calls), 0));
  std::vector<double> rounds;
  for (int round = 0; round < 5; ++round) {
    Clock::time_point start = Clock::now();
    for (int i = 0; i < calls; ++i)
      work();
    rounds.push_back(secondsSince(start) / calls);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

void check(Status status) {
  if (!status.ok()) {
    std::fprintf(stderr, "calibrate_cpu: error: %s\n",
                 status.message().c_str());
    std::exit(1);
  }
}

/// The mean of `value` over the ranks.
double meanOverRanks(comm::Communicator &comm, double value) {
  float sum = static_cast<float>(value);
  check(comm.allReduce(&sum, 1));
  return sum / comm.size();
}

std::string machineName() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  std::ostringstream os;
  os << model << ", " << std::thread::hardware_concurrency() << " cores, host "
     << host;
  return os.str();
}

std::string today() {
  std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return text;
}

std::string number(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.4g", value);
  return text;
}

} // namespace

int main(int argc, char **argv) {
  cpu::runWithBetterBlasCore(argv);
  std::string outputPath;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "-o") == 0)
      outputPath = argv[i + 1];
  std::unique_ptr<comm::MpiCommunicator> comm;
  check(comm::MpiCommunicator::create(&argc, &argv, comm));
  cpu::setKernelThreads(1); // One thread per rank, as zrun runs by default.
  int ranks = comm->size();
  auto say = [&](const std::string &line) {
    if (comm->rank() == 0)
      std::fprintf(stderr, "calibrate_cpu: %s\n", line.c_str());
  };

  // SGEMM: square 512 matrices, in cache-blocked BLAS territory (a prefill
  // or training matmul); 2 m n k FLOPs, as CostModel counts a matmul.
  const int64_t n = 512;
  Buffer a({n, n}), b({n, n}), c({n, n});
  check(comm->barrier());
  double gemm = secondsPerCall(*comm, kernel(plan::OPCODE_MATMUL, {&a, &b}, c));
  double matmulRate = meanOverRanks(*comm, 2.0 * n * n * n / gemm);
  say("f32 matmul 512^3: " + number(matmulRate / 1e9) + " GFLOP/s");

  // Vector units: SiLU over 64 Ki floats (256 KiB, cache-resident), at the
  // cost model's 12 FLOPs per element (kSiluFlops).
  Buffer small({64 * 1024}), smallOut({64 * 1024});
  check(comm->barrier());
  double silu =
      secondsPerCall(*comm, kernel(plan::OPCODE_SILU, {&small}, smallOut));
  double vectorRate = meanOverRanks(*comm, 12.0 * small.values.size() / silu);
  say("silu in cache: " + number(vectorRate / 1e9) + " GFLOP/s");

  // Memory: an add of two 32 MiB operands into a third, counted as the
  // cost model counts an elementwise op (operands read, result written).
  const int64_t big = 8 * 1024 * 1024;
  Buffer x({big}), y({big}), z({big});
  check(comm->barrier());
  double add = secondsPerCall(*comm, kernel(plan::OPCODE_ADD, {&x, &y}, z));
  double memoryRate = meanOverRanks(*comm, 3.0 * x.bytes() / add);
  say("add 3 x 32 MiB: " + number(memoryRate / 1e9) + " GB/s");

  // All-gather: latency from a 4-byte-per-rank gather, bus bandwidth from
  // one that leaves 64 MiB on every rank (nccl-tests' busbw: the bytes
  // times (N-1)/N over the time beyond the latency).
  std::vector<float> tiny(ranks);
  float one = 1;
  auto gatherTiny = [&] {
    check(comm->allGather(&one, tiny.data(), 1, ElementType::F32));
  };
  check(comm->barrier());
  double latency = meanOverRanks(*comm, secondsPerCall(*comm, gatherTiny, 0.1));
  const uint64_t perRank = 16 * 1024 * 1024 / ranks; // floats
  std::vector<float> shard(perRank, 1.0f), gathered(perRank * ranks);
  auto gatherBig = [&] {
    check(comm->allGather(shard.data(), gathered.data(), perRank,
                          ElementType::F32));
  };
  check(comm->barrier());
  double gatherSeconds = meanOverRanks(*comm, secondsPerCall(*comm, gatherBig));
  double gatheredBytes = 4.0 * perRank * ranks;
  double busRate = gatheredBytes * (ranks - 1) / ranks /
                   std::max(gatherSeconds - latency, 1e-9);
  say("all-gather: latency " + number(latency * 1e6) + " us, 64 MiB in " +
      number(gatherSeconds * 1e3) + " ms, busbw " + number(busRate / 1e9) +
      " GB/s");

  // Overlap. The compute is a decode step's matmul: one row against a
  // 4096 x 4096 weight (64 MiB, so memory-bound, as a decode is). A round
  // times it alone, then runs it over and over while a comm thread issues
  // `gathers` all-gathers back to back (the same count on every rank), as
  // the executor's two queues do. Beside the collectives compute runs at
  // alpha of its speed and they run at beta of theirs, so a window of
  // overlap gains alpha + beta - 1 of itself over running the two one
  // after the other (1 when overlap is free, as on a GPU; 0 when the two
  // share the cores as one queue would). The cost model's form of it
  // (CostModel::computeSecondsBesideCollective) keeps the collective at
  // full speed and charges compute the rest: the slowdown is
  // 1 - (alpha + beta - 1) = 2 - alpha - beta. The median of 5 rounds.
  Buffer row({1, 4096}), weight({4096, 4096}), rowOut({1, 4096});
  std::function<void()> decodeMatmul =
      kernel(plan::OPCODE_MATMUL, {&row, &weight}, rowOut);
  struct Overlap {
    double alone = 0, beside = 0, alpha = 0, beta = 0, slowdown = 0;
  };
  auto overlapRound = [&](const std::function<void()> &gather, int gathers,
                          double gatherAlone) {
    Overlap round;
    round.alone = secondsPerCall(*comm, decodeMatmul, 0.1);
    check(comm->barrier());
    std::atomic<bool> commDone{false};
    double commSeconds = 0;
    Clock::time_point start = Clock::now();
    std::thread commThread([&] {
      for (int i = 0; i < gathers; ++i)
        gather();
      commSeconds = secondsSince(start);
      commDone = true;
    });
    int64_t calls = 0;
    while (!commDone) {
      decodeMatmul();
      ++calls;
    }
    commThread.join();
    // The matmul in flight when the collectives ended ran partly alone:
    // half of it is counted in their window.
    round.beside = commSeconds / std::max<double>(calls - 0.5, 0.5);
    round.alpha = std::min(1.0, round.alone / round.beside);
    round.beta = std::min(1.0, gathers * gatherAlone / commSeconds);
    round.slowdown = std::max(0.0, 2 - round.alpha - round.beta);
    return round;
  };
  auto overlapMedian = [&](const std::function<void()> &gather, int gathers,
                           double gatherAlone) {
    std::vector<Overlap> rounds;
    for (int i = 0; i < 5; ++i) {
      Overlap round = overlapRound(gather, gathers, gatherAlone);
      round.slowdown = meanOverRanks(*comm, round.slowdown);
      round.alpha = meanOverRanks(*comm, round.alpha);
      round.beta = meanOverRanks(*comm, round.beta);
      rounds.push_back(round);
    }
    std::sort(rounds.begin(), rounds.end(),
              [](const Overlap &a, const Overlap &b) {
                return a.slowdown < b.slowdown;
              });
    return rounds[rounds.size() / 2];
  };
  Overlap large = overlapMedian(gatherBig, 24, gatherSeconds);
  say("decode matmul (1 x 4096 x 4096) beside 64 MiB all-gathers: compute at " +
      number(large.alpha * 100) + "% of its speed, the all-gathers at " +
      number(large.beta * 100) + "%: " + number(large.slowdown) +
      " of the collectives' time paid by compute");
  // Small gathers, as a tiny model's groups: latency and polling, not copies.
  const uint64_t smallPerRank = 64 * 1024 / 4 / ranks;
  std::vector<float> smallShard(smallPerRank, 1.0f),
      smallGathered(smallPerRank * ranks);
  auto gatherSmall = [&] {
    check(comm->allGather(smallShard.data(), smallGathered.data(), smallPerRank,
                          ElementType::F32));
  };
  double smallSeconds =
      meanOverRanks(*comm, secondsPerCall(*comm, gatherSmall, 0.1));
  // A fixed count: beside compute each one can take milliseconds (a rank's
  // comm thread waits for the other's to be scheduled), not microseconds.
  const int smallCount = 100;
  Overlap small64 = overlapMedian(gatherSmall, smallCount, smallSeconds);
  say("decode matmul beside 64 KiB all-gathers (" + number(smallSeconds * 1e6) +
      " us each alone): compute at " + number(small64.alpha * 100) +
      "%, the all-gathers at " + number(small64.beta * 100) + "%: " +
      number(small64.slowdown) + " of the collectives' time paid by compute");
  // The profile has one figure: the size whose overlap gains less.
  double computeSlowdown = std::max(large.slowdown, small64.slowdown);

  if (comm->rank() == 0) {
    std::string by = "measured by bench/calibrate_cpu.cpp (mpirun -np " +
                     std::to_string(ranks) + ", one BLAS thread per rank, " +
                     cpu::blasCoreName() + " kernels) on " + today() + ", " +
                     machineName() + ": ";
    std::string gemm = cpu::f32GemmName(); // "zplan's AVX-512", ...
    std::ostringstream json;
    json << "{\n"
         << "  \"name\": \"cpu\",\n"
         << "  \"description\": \"Measured on " << machineName() << " with "
         << ranks
         << " ranks (MPI processes) running the CPU reference runtime\",\n"
         << "  \"matmul_flops_per_second\": " << number(matmulRate) << ",\n"
         << "  \"f32_matmul_flops_per_second\": " << number(matmulRate) << ",\n"
         << "  \"vector_flops_per_second\": " << number(vectorRate) << ",\n"
         << "  \"memory_bytes_per_second\": " << number(memoryRate) << ",\n"
         << "  \"collective_bytes_per_second\": " << number(busRate) << ",\n"
         << "  \"collective_latency_seconds\": " << number(latency) << ",\n"
         << "  \"compute_slowdown_during_collective\": "
         << number(computeSlowdown) << ",\n"
         << "  \"sources\": {\n"
         << "    \"matmul_flops_per_second\": \"" << by
         << "the runtime's matmul kernel (" << gemm
         << " f32 GEMM, its operand packed per call, as a gathered weight's "
            "is) on 512 x 512 x 512, "
            "2 m n k FLOPs, median of 5 rounds, mean over ranks. The bf16 "
            "matmuls widen to the same f32 GEMM (no CPU sbgemm), so the same "
            "rate.\",\n"
         << "    \"f32_matmul_flops_per_second\": \"" << by
         << "the runtime's matmul kernel (" << gemm
         << " f32 GEMM) on 512 x 512 x 512, "
            "as matmul_flops_per_second.\",\n"
         << "    \"vector_flops_per_second\": \"" << by
         << "the runtime's silu kernel over 64 Ki floats in cache, at the "
            "cost model's 12 FLOPs per element.\",\n"
         << "    \"memory_bytes_per_second\": \"" << by
         << "the runtime's add kernel over two 32 MiB operands into a third, "
            "96 MiB of traffic per call.\",\n"
         << "    \"collective_bytes_per_second\": \"" << by
         << "MpiCommunicator::allGather leaving 64 MiB on every rank in "
         << number(gatherSeconds * 1e3)
         << " ms; bus bandwidth = bytes (N-1)/N / (time - latency).\",\n"
         << "    \"collective_latency_seconds\": \"" << by
         << "MpiCommunicator::allGather of 4 bytes per rank.\",\n"
         << "    \"compute_slowdown_during_collective\": \"" << by
         << "a decode-shaped matmul (1 x 4096 x 4096, "
         << number(large.alone * 1e3)
         << " ms alone) beside 64 MiB all-gathers issued back to back by a "
            "comm thread ran at "
         << number(large.alpha * 100) << "% of its speed and they at "
         << number(large.beta * 100) << "% of theirs, so overlap gained "
         << number(large.alpha + large.beta - 1)
         << " of the overlapped time and compute is charged 2 - alpha - "
            "beta = "
         << number(large.slowdown)
         << " of a collective's time beside it; beside 64 KiB all-gathers ("
         << number(smallSeconds * 1e6) << " us alone) compute ran at "
         << number(small64.alpha * 100) << "% and they at "
         << number(small64.beta * 100) << "%, " << number(small64.slowdown)
         << "; the larger of the two, medians of 5 rounds.\"\n"
            "  }\n"
         << "}\n";
    if (outputPath.empty()) {
      std::fputs(json.str().c_str(), stdout);
    } else {
      if (Status status = tooling::writeFileAtomically(outputPath, json.str(),
                                                       "the profile");
          !status.ok()) {
        std::fprintf(stderr, "calibrate_cpu: error: %s\n",
                     status.message().c_str());
        comm->abort(1);
      }
      say("wrote " + outputPath);
    }
  }
  check(comm->barrier());
  return 0;
}
