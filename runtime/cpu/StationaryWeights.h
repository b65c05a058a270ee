//===- StationaryWeights.h - weights packed once for the CPU GEMM ---------===//
//
// zplan's GEMM (Gemm.h) copies op(B) into 96-column panels on every call.
// For a weight that stays the same from one run to the next -- a forward
// (zrun run, logprobs) on one rank's whole weights -- that copy is the same
// every time: onnxruntime's MLAS packs each constant weight once, when its
// session loads, and the large forward of bench/train_vs_torch.py spends
// 2-3% of its matmul time packing. A matmul whose rhs the executor marks
// as a weight its program only reads (TensorRef::weightsVersion) keeps its
// packed copy here instead, and drops it when RankMemory's weights version
// moves (an optimizer step, a checkpoint restore: Executor.h).
//
// Packing is deferred to the second run that finds the version where the
// first left it: a single forward, or forwards with an optimizer step
// between each (RL's old-policy log-probs), never pay for a copy they use
// once. The copy is the kernel's own memory beside the plan's, like the
// threads' panels: as many bytes as the weight's f32 elements (columns
// rounded up to 96). `zrun --stats` prints the total (packedWeightBytes).
// A plan compiled for a memory budget keeps none: the executor marks no
// weight of it (Executor.h), as the budget counts every byte the plan
// holds.
// Packed or not, the tiles and the panels are the same: the same bits.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_CPU_STATIONARYWEIGHTS_H
#define ZPLAN_RUNTIME_CPU_STATIONARYWEIGHTS_H

#include "runtime/ops/KernelCall.h"

#include <atomic>
#include <cstdint>
#include <memory>

namespace zplan::cpu::detail {

using zplan::Status;

/// One matmul's packed rhs, kept across runs while the weights' version
/// stays put.
class PackedRhs {
public:
  PackedRhs() = default;
  PackedRhs(const PackedRhs &) = delete;
  PackedRhs &operator=(const PackedRhs &) = delete;
  ~PackedRhs();

  /// The packed op(B) (Gemm.h's packB) for a run at weights version
  /// `version`, or null when this run packs per call: the version moved
  /// since the previous run (the copy, if any, is dropped), or this is the
  /// first run.
  const float *forRun(uint64_t version, bool transposeB, int n, int k,
                      const float *b, int ldb);

private:
  void drop();

  struct Free {
    void operator()(float *p) const;
  };
  std::unique_ptr<float, Free> packed;
  int64_t floats = 0;
  uint64_t packedVersion = 0;
  /// The version the previous run found, once there was one.
  uint64_t lastVersion = 0;
  bool ranBefore = false;
};

/// The bytes every PackedRhs of the process holds now.
uint64_t packedWeightBytes();

/// nn.matmul (Matmul.cpp) whose rhs (operand 1, with weightsVersion set)
/// goes through `rhs`: packed once where the product takes zplan's GEMM
/// (f32, rows enough, one weight for the whole batch), per call elsewhere.
Status runMatmulStationary(const ops::KernelCall &call, PackedRhs &rhs);

} // namespace zplan::cpu::detail

#endif // ZPLAN_RUNTIME_CPU_STATIONARYWEIGHTS_H
