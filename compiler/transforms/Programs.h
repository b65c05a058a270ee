//===- Programs.h - the functions a module holds, and their programs -----===//
//
// A compiled module holds one function per plan program: @forward (the
// import's; program "infer"), and in a training module @train_micro_step
// (forward, loss, backward and the gradient reduce-scatters; built by
// zplan-autodiff) and @optimizer_step (one zero.optimizer_update per group;
// built by zplan-optimizer-step); a generation module holds the four
// functions below instead of @forward. Passes and the emitter find them by
// these names.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_TRANSFORMS_PROGRAMS_H
#define ZPLAN_COMPILER_TRANSFORMS_PROGRAMS_H

#include "llvm/ADT/StringRef.h"

namespace zplan {

inline constexpr llvm::StringLiteral kForwardName = "forward";
inline constexpr llvm::StringLiteral kTrainStepName = "train_micro_step";
inline constexpr llvm::StringLiteral kOptimizerStepName = "optimizer_step";
// A generation module (zcc --mode generate): the resident set is gathered in
// @generate_begin and released in @generate_end; @prefill fills the KV cache
// from the prompts, @decode appends one token per sequence.
inline constexpr llvm::StringLiteral kGenerateBeginName = "generate_begin";
inline constexpr llvm::StringLiteral kPrefillName = "prefill";
inline constexpr llvm::StringLiteral kDecodeName = "decode";
inline constexpr llvm::StringLiteral kGenerateEndName = "generate_end";
// The per-token log-probs and entropies of given tokens (zplan-logprobs):
// in a plan with an RL loss and in --mode logprobs.
inline constexpr llvm::StringLiteral kLogprobsName = "logprobs";

/// A unit attribute on @train_micro_step: its loss is a sum over completion
/// tokens that the runtime divides by the window's global token count
/// (plan LOSS_NORMALIZATION_TOKEN_SUM), not a mean over its rows.
inline constexpr llvm::StringLiteral kTokenSumLossAttr = "zplan.token_sum_loss";

/// Integer attributes on the module (zcc --offload-params,
/// --offload-optimizer, --offload auto; docs/offload.md): how many of the
/// sharded groups' shards, or of the trained groups' optimizer moments,
/// live outside the device, the largest groups first; -1: every group's
/// (which groups: compiler/analysis/OffloadSelection.h).
/// --memory-budget, which counts device bytes, does not count them
/// (LivenessAnalysis::residentBytes()), and the plan emitter puts them in
/// their tier.
inline constexpr llvm::StringLiteral kShardsOffloadedAttr =
    "zplan.shards_offloaded";
inline constexpr llvm::StringLiteral kMomentsOffloadedAttr =
    "zplan.moments_offloaded";
/// Beside kShardsOffloadedAttr: "nvme" when the offloaded shards live in
/// the nvme tier (else the host's), so that the prefetch's hoisting and
/// the replay of a program (GenerationCost.h) charge their fetches at that
/// tier's rate (OffloadSelection.h's shardFetchSeconds).
inline constexpr llvm::StringLiteral kShardsOffloadTierAttr =
    "zplan.shards_offload_tier";

/// The plan program a function becomes: "infer" for @forward, else the
/// function's own name.
inline llvm::StringRef programNameOf(llvm::StringRef function) {
  return function == kForwardName ? llvm::StringRef("infer") : function;
}

} // namespace zplan

#endif // ZPLAN_COMPILER_TRANSFORMS_PROGRAMS_H
