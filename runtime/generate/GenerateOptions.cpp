//===- GenerateOptions.cpp - the flags of `zrun PLAN generate`, parsed ----===//

#include "runtime/generate/GenerateOptions.h"
#include "runtime/support/FlagWords.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <set>

using namespace zplan;
using namespace zplan::generate;

const char *const zplan::generate::kGenerateUsage =
    "       zrun PLAN generate --prompt PROMPTS.npy --output TOKENS.npy\n"
    "                       [--prompt-lengths LENS.npy] [--max-new-tokens M]\n"
    "                       [--eos ID] [--temperature T [--top-k K]\n"
    "                       [--top-p P] [--seed S]] [--logits-output FILE]\n"
    "                       [--check] [--stats] [--trace FILE] [--threads T]\n"
    "\n"
    "  --prompt PROMPTS.npy    int64 (or int32) [B, Pmax] token ids, Pmax at\n"
    "                          most the plan's prompt length; B the plan's\n"
    "  --prompt-lengths LENS   int64 (or int32) [B]: row b's prompt is its\n"
    "                          first LENS[b] ids (default: all Pmax)\n"
    "  --max-new-tokens M      tokens to generate per row (default 16, or\n"
    "                          --max-seq-len minus --prompt-len if less)\n"
    "  --eos ID                a row stops after generating ID; the rest of\n"
    "                          its output row is filled with ID\n"
    "  --temperature T         0 (default): greedy, the lowest id among\n"
    "                          equal maxima; above 0: sample from\n"
    "                          softmax(logits / T), after --top-k K (keep\n"
    "                          the K likeliest) and --top-p P (keep the\n"
    "                          likeliest ids whose probabilities reach P),\n"
    "                          drawn from a stream per (--seed S, row)\n"
    "  --output TOKENS.npy     int64 [B, M]: the generated ids (rank 0)\n"
    "  --logits-output FILE    f32 [M, B, V]: each step's logits (prefill's\n"
    "                          are step 0; zeros for finished rows)\n";

Status
zplan::generate::parseGenerateOptions(const std::vector<std::string> &words,
                                      GenerateOptions &options) {
  static const std::set<std::string> kFlags = {
      "--prompt",      "--prompt-lengths", "--max-new-tokens", "--eos",
      "--temperature", "--top-k",          "--top-p",          "--seed",
      "--output",      "--logits-output"};
  std::set<std::string> seen;
  auto apply = [&](const std::string &flag, const std::string &value) {
    Status status = Status::success();
    uint64_t number = 0;
    if (flag == "--prompt" || flag == "--prompt-lengths" ||
        flag == "--output" || flag == "--logits-output") {
      if (value.empty())
        return failure(flag, " needs a path");
      (flag == "--prompt"           ? options.promptPath
       : flag == "--prompt-lengths" ? options.promptLengthsPath
       : flag == "--output"         ? options.outputPath
                                    : options.logitsOutputPath) = value;
    } else if (flag == "--max-new-tokens")
      status =
          parseFlagInteger(flag, value, 1, 1000000000, options.maxNewTokens);
    else if (flag == "--eos") {
      status = parseFlagInteger(flag, value, 0, INT64_MAX, number);
      options.eos = static_cast<int64_t>(number);
    } else if (flag == "--temperature")
      status = parseFlagNumber(flag, value, {0, false, 1e6, false},
                               options.sampling.temperature);
    else if (flag == "--top-k")
      status =
          parseFlagInteger(flag, value, 1, INT64_MAX, options.sampling.topK);
    else if (flag == "--top-p")
      status = parseFlagNumber(flag, value, {0, true, 1, false},
                               options.sampling.topP);
    else if (flag == "--seed")
      status =
          parseFlagInteger(flag, value, 0, UINT64_MAX, options.sampling.seed);
    return status;
  };
  ZR_RETURN_IF_ERROR(forEachFlag(words, kFlags, "generate", seen, apply));
  if (options.promptPath.empty())
    return failure("generate needs --prompt PROMPTS.npy (int64 [batch, "
                   "prompt length])");
  if (options.outputPath.empty())
    return failure("generate needs --output TOKENS.npy");
  if (options.sampling.temperature == 0)
    for (const char *flag : {"--top-k", "--top-p", "--seed"})
      if (seen.count(flag))
        return failure(flag, " needs --temperature above 0 (temperature 0 "
                             "is greedy decoding, which draws nothing)");
  return Status::success();
}
