//===- GenerateProgress.h - what `zrun generate` prints while it runs -----===//
//
// Rank 0 prints a progress line to stderr after prefill and then at most
// about once a second and after the last step,
//   token 5/16  2/2 rows active  1,234 tok/s  ETA 3s
// and a summary to stdout at the end (docs/generation.md section 5):
//   zrun: generated 32 tokens in 2 rows (16 steps) in 1.25 s
//   zrun: time to first token 0.210 s (generate_begin + prefill)
//   zrun: decode 30 tokens in 1.04 s: 28.8 tok/s
//   zrun: gathered per decode step: 0 B (plan), 0 B (counted)
//   zrun: resident 1,048,576 B, KV cache 65,536 B
// With N ranks (each generating its own rows) zrun combines every rank's
// figures (combine()): tokens add up, times are the slowest rank's, so the
// summary's tok/s is the global batch's. A lockstep line follows:
//   zrun: lockstep: every decode step; 9 agreements, 12 us each (0.1% of
//   decode); decode runs after a rank's rows finished: 0, 4
// Decode throughput counts the tokens of every row that decode steps
// produced (not the first token of each row, which is prefill's, nor the
// ignored logits of finished rows), over the wall time from the end of
// prefill to the end of the last decode step. A decode step feeds one token
// per row, so "per decode step" is per B tokens. The clock is injected (as
// runtime/train/Progress.h does), so that a test can fix every number.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_GENERATE_GENERATEPROGRESS_H
#define ZPLAN_RUNTIME_GENERATE_GENERATEPROGRESS_H

#include "runtime/train/Progress.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zplan::generate {

/// What the summary reports beyond times: from the plan and the run.
struct GenerationFacts {
  /// Bytes the decode program gathers per run, from its instructions.
  uint64_t planGatheredPerDecodeStep = 0;
  /// Bytes the communicator moved per decode step, counted during the run
  /// (--stats); unset when not counted or no decode step ran.
  std::optional<uint64_t> countedGatheredPerDecodeStep;
  /// RESIDENT buffers (gathered groups kept across tokens) per rank.
  uint64_t residentBytes = 0;
  /// CACHE buffers (the KV cache) per rank.
  uint64_t cacheBytes = 0;
};

/// One rank's figures of a generation, as doubles so that zrun can gather
/// them from every rank in one collective.
struct GenerationFigures {
  double prefillTokens = 0;
  double decodeTokens = 0;
  /// Steps (prefill's included) that produced a token.
  double steps = 0;
  double firstTokenSeconds = 0;
  double decodeSeconds = 0;
  double totalSeconds = 0;
  /// Lockstep (docs/generation.md section 8), from the session's result:
  /// the plan's period (0: none), decode runs made and those made after
  /// the rank's rows had finished, agreements and their seconds.
  double lockstepPeriod = 0;
  double decodeRuns = 0;
  double idleDecodeRuns = 0;
  double agreements = 0;
  double agreementSeconds = 0;
};

/// The ranks' figures as one: tokens and agreement seconds summed, times,
/// steps and counts the largest.
GenerationFigures combine(const std::vector<GenerationFigures> &ranks);

/// The summary lines (no "zrun: " prefix, no newlines) of `figures` over
/// `rows` rows; with `perRank` (two or more ranks) the lockstep line too.
std::vector<std::string>
summaryLines(const GenerationFigures &figures, uint64_t rows,
             const GenerationFacts &facts,
             const std::vector<GenerationFigures> &perRank = {});

class GenerateProgress {
public:
  /// A run of at most `maxSteps` steps over `rows` rows; the clock is read
  /// now as the start (before generate_begin).
  GenerateProgress(uint64_t maxSteps, uint64_t rows, train::Clock clock);

  /// Records that prefill is done, its `tokens` (one per row) included, and
  /// returns its line.
  std::string prefillDone(uint64_t tokens);
  /// Records decode step `step` (1-based), which produced `tokens` tokens
  /// with `activeRows` rows still unfinished after it, and returns its
  /// line, whether or not the caller prints it.
  std::string stepDone(uint64_t step, uint64_t tokens, uint64_t activeRows);
  /// Whether the line of the step just recorded is worth printing: the
  /// first, the last (`last`), or a second since the last printed one.
  /// Nothing after the last: in lockstep a rank whose rows have finished
  /// runs decode steps for the other ranks' rows.
  bool shouldPrint(bool last);

  /// Seconds from the start to the end of prefill.
  double timeToFirstToken() const { return prefillEnd - start; }
  /// Decode tokens per second (0 before any decode step).
  double decodeTokensPerSecond() const;

  /// This rank's figures so far (the lockstep fields left 0).
  GenerationFigures figures() const;
  /// summaryLines() of this rank's figures alone.
  std::vector<std::string> summary(const GenerationFacts &facts) const;

private:
  std::string line(uint64_t step, uint64_t activeRows) const;

  uint64_t maxSteps;
  uint64_t rows;
  train::Clock clock;
  double start;
  double prefillEnd;
  double lastTime;
  double lastPrinted = -1e300;
  bool printedLast = false;
  uint64_t lastStep = 0;
  uint64_t prefillTokens = 0;
  uint64_t decodeTokens = 0;
};

} // namespace zplan::generate

#endif // ZPLAN_RUNTIME_GENERATE_GENERATEPROGRESS_H
