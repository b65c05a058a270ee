//===- GenerateOptions.h - the flags of `zrun PLAN generate`, parsed ------===//
//
// docs/generation.md section 5's flags, checked for form only (known flags,
// numbers in range, no flag twice, dependent flags together), in the style of
// `train`'s (runtime/train/TrainOptions.h): a one-line message naming the flag
// and what it takes. Whether the prompt file exists and fits the plan is the
// session's business (runtime/tooling/GenerateCommand.h). The flags that
// every running command shares (--check, --stats, --trace, --threads) are
// runtime/tooling/Arguments'; Cli hands this the other words after
// `PLAN generate`.
//
// Temperature 0 (the default) means greedy decoding: the argmax of the
// logits, the lowest token id among equal maxima. The sampling flags
// (--top-k, --top-p, --seed) only mean something when a draw is made, so
// they are refused without a --temperature above 0 rather than silently
// ignored.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_GENERATE_GENERATEOPTIONS_H
#define ZPLAN_RUNTIME_GENERATE_GENERATEOPTIONS_H

#include "runtime/generate/Sampler.h"
#include "runtime/support/Status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zplan::generate {

struct GenerateOptions {
  /// --prompt FILE.npy (required): int64 or int32 [B, Pmax].
  std::string promptPath;
  /// --prompt-lengths FILE.npy: int64 (or int32) [B]; empty: every row is
  /// Pmax tokens long.
  std::string promptLengthsPath;
  /// --max-new-tokens M: tokens generated per row, at most; 0 (not given):
  /// generate::defaultMaxNewTokens() of the plan, 16 where it has room.
  uint64_t maxNewTokens = 0;
  /// --eos ID: a row stops after generating it.
  std::optional<int64_t> eos;
  /// --temperature, --top-k, --top-p, --seed.
  SamplingSettings sampling;
  /// --output FILE.npy (required): int64 [B, M].
  std::string outputPath;
  /// --logits-output FILE.npy: f32 [M, B, V].
  std::string logitsOutputPath;
};

/// `zrun PLAN generate --help`'s lines.
extern const char *const kGenerateUsage;

/// Parses the words after `PLAN generate` that are not zrun's shared flags;
/// `options` holds what was parsed up to a failure.
Status parseGenerateOptions(const std::vector<std::string> &words,
                            GenerateOptions &options);

} // namespace zplan::generate

#endif // ZPLAN_RUNTIME_GENERATE_GENERATEOPTIONS_H
