//===- CostModel.h - roofline time of ops and collectives -------*- C++ -*-===//
//
// The scheduler decides how early to start a gather by comparing the time of
// the compute it can hide behind with the time of the collective, and the
// `report` dump prints simulated time; both come from this model. A compute
// op costs a roofline: the larger of its FLOPs at the unit's peak and its
// bytes at memory bandwidth. A collective costs a fixed latency plus its bytes
// at the ring bus bandwidth, as nccl-tests defines busbw. The rates come from
// hardware profiles, the JSON files under hardware/, which the build embeds
// into the binary so zcc needs no data path at run time.
//
// The model is an estimate for ranking schedules, not a simulator: FLOP counts
// per op are documented approximations (see CostModel.cpp), and peaks are
// datasheet figures that real kernels reach only in part.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_ANALYSIS_COSTMODEL_H
#define ZPLAN_COMPILER_ANALYSIS_COSTMODEL_H

#include "compiler/ScheduleChoices.h"

#include "mlir/IR/Operation.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>

namespace zplan {

/// The rates of one device (one GPU of an 8-GPU node, or one CPU host) that
/// the cost model needs. Members mirror the profile's JSON fields, named in
/// snake case there (matmul_flops_per_second, ...).
struct HardwareProfile {
  /// The --hardware name: h200, h100, a100 or cpu.
  std::string name;
  /// The machine the numbers describe, in words.
  std::string description;
  /// Dense matrix-unit peak of a 16-bit (bf16, f16) GEMM accumulating in f32:
  /// tensor cores on GPUs; on the CPU, the runtime's bf16 GEMM (widened to
  /// f32 SGEMM).
  double matmulFlopsPerSecond = 0;
  /// Peak of an f32 GEMM as the runtime issues it: CUBLAS_COMPUTE_32F
  /// without TF32, so the FP32 CUDA cores on GPUs (an f32 plan's matmuls and
  /// its f32 attention kernel); FP32 BLAS on CPU.
  double f32MatmulFlopsPerSecond = 0;
  /// Peak of the FP32 units that run everything but matmuls.
  double vectorFlopsPerSecond = 0;
  /// HBM (GPU) or DRAM (CPU) bandwidth.
  double memoryBytesPerSecond = 0;
  /// Per-rank all-gather bus bandwidth (nccl-tests busbw).
  double collectiveBytesPerSecond = 0;
  /// Fixed cost of one collective, whatever its size.
  double collectiveLatencySeconds = 0;
  /// What a collective on the comm queue costs the compute queue beside it,
  /// in compute seconds per second of the collective: 0 where it runs on
  /// units of its own (NCCL on a GPU: overlap is free); about 1 where the
  /// comm thread takes the cores compute needs (CPU ranks: overlap gains
  /// nothing); measured by bench/calibrate_cpu.cpp.
  double computeSlowdownDuringCollective = 0;
  /// JSON field name of each number -> where it comes from, and whether it
  /// is a datasheet peak or an estimate.
  std::map<std::string, std::string> sources;
};

/// The embedded profiles' names, in the order --hardware documents them.
llvm::ArrayRef<llvm::StringRef> getHardwareProfileNames();

/// The embedded profile of `hardware`.
llvm::Expected<HardwareProfile> getHardwareProfile(Hardware hardware);

/// The embedded profile `name`; an unknown name is an error that lists the
/// known ones.
llvm::Expected<HardwareProfile> getHardwareProfile(llvm::StringRef name);

/// The embedded profile of `hardware`, or, when `path` is not empty, the
/// profile in that JSON file (a calibrated one, bench/calibrate_cpu.cpp),
/// which must name itself as `hardware` is spelt. Errors name the file.
llvm::Expected<HardwareProfile> loadHardwareProfile(Hardware hardware,
                                                    llvm::StringRef path);

/// Parses a profile from JSON text. Every numeric field must be present and
/// positive (the latency may be zero) and carry a non-empty source; unknown
/// fields are errors, so a misspelt field cannot silently read as zero.
llvm::Expected<HardwareProfile> parseHardwareProfile(llvm::StringRef json);

/// What one op does, for the roofline.
struct OpCost {
  /// Floating-point (or integer) operations.
  double flops = 0;
  /// Bytes read plus bytes written, assuming each tensor crosses memory once.
  double bytes = 0;
  /// Runs on the matrix units (matmul, attention) rather than vector units.
  bool usesMatmulUnits = false;
  /// A matmul (or attention) of 16-bit float operands (mixed precision's
  /// bf16 matmuls, an f16 graph): the 16-bit matrix-unit rate
  /// (HardwareProfile::matmulFlopsPerSecond); otherwise the f32 one.
  bool halfOperands = false;
};

/// Time of compute ops and collectives on one hardware profile. A pure
/// analysis: it reads ops and never changes them.
class CostModel {
public:
  explicit CostModel(HardwareProfile profile);

  /// FLOPs and bytes of `op`. Ops that compute nothing are all zero:
  /// zero.* (collectives are costed by the *Seconds methods below), nn.constant
  /// (data in the plan), nn.reshape (a view), nn.parameter, func.*; so are ops
  /// of other dialects.
  OpCost estimate(mlir::Operation *op) const;

  /// Roofline time of `op`: max(flops / peak of its units, bytes / memory
  /// bandwidth); 0 for ops that compute nothing.
  double computeSeconds(mlir::Operation *op) const;

  /// How long a compute op of `seconds` takes when the comm queue still has
  /// `commAheadSeconds` of collectives to run as it starts: the compute
  /// pays computeSlowdownDuringCollective (s) for every second of them it
  /// runs beside, so it runs at 1 - s of its speed while they last (s >= 1:
  /// it waits them out, and pays s - 1 more). s = 0 gives `seconds`
  /// exactly.
  double computeSecondsBesideCollective(double seconds,
                                        double commAheadSeconds) const;

  /// One all-gather that leaves `gatheredBytes` (the full, padded group) on
  /// every rank: latency + gatheredBytes * (N-1)/N / bus bandwidth. Each rank
  /// already holds 1/N, so a single rank moves nothing and costs 0.
  double allGatherSeconds(uint64_t gatheredBytes, int64_t worldSize) const;

  /// One reduce-scatter of `fullBytes` per rank into 1/N shards: the same
  /// traffic as an all-gather of the full buffer; 0 for one rank.
  double reduceScatterSeconds(uint64_t fullBytes, int64_t worldSize) const;

  /// One all-reduce of `bytes`: a reduce-scatter then an all-gather, so
  /// latency + bytes * 2(N-1)/N / bus bandwidth; 0 for one rank.
  double allReduceSeconds(uint64_t bytes, int64_t worldSize) const;

  /// One optimizer update over `shardBytes` of parameters: memory-bound,
  /// reading the parameters, gradient and two moments and writing all four
  /// back (AdamW's traffic; SGD moves less, but the step is small either
  /// way).
  double optimizerSeconds(uint64_t shardBytes) const;

  /// Setting `bytes` of device memory to zero: one write at its bandwidth
  /// (the host-side optimizer step's zero of a gradient accumulator).
  double zeroSeconds(uint64_t bytes) const;

  /// One copy of `bytes` between the device and host memory (`nvme`
  /// false) or a file on NVMe (true), for offload (docs/offload.md). The
  /// profiles hold no measured link rates yet: the CPU's host copy is a
  /// memcpy at its memory bandwidth, a GPU's a PCIe 5 x16 transfer at an
  /// assumed 25 GB/s, and NVMe an assumed 2 GB/s. Estimates that rank
  /// choices, like every rate here.
  double tierCopySeconds(uint64_t bytes, bool nvme) const;

  const HardwareProfile &profile() const { return hardware; }

private:
  HardwareProfile hardware;
};

} // namespace zplan

#endif // ZPLAN_COMPILER_ANALYSIS_COSTMODEL_H
