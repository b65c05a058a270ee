//===- GenerateProgress.cpp - what `zrun generate` prints while it runs ---===//

#include "runtime/generate/GenerateProgress.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace zplan;
using namespace zplan::generate;

namespace {

std::string fixed(double value, int digits) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", digits, value);
  return text;
}

std::string rounded(double value) {
  return train::withThousands(
      static_cast<uint64_t>(std::llround(value > 0 ? value : 0)));
}

} // namespace

GenerateProgress::GenerateProgress(uint64_t maxSteps, uint64_t rows,
                                   train::Clock clock)
    : maxSteps(maxSteps), rows(rows), clock(std::move(clock)) {
  start = this->clock();
  prefillEnd = start;
  lastTime = start;
}

std::string GenerateProgress::line(uint64_t step, uint64_t activeRows) const {
  double decodeSeconds = lastTime - prefillEnd;
  // Steps left at the mean decode step's time so far; an upper bound, as
  // every row may finish early.
  double eta = step > 1 ? decodeSeconds / static_cast<double>(step - 1) *
                              static_cast<double>(maxSteps - step)
                        : 0.0;
  // Lockstep decode steps past this rank's last token count no tokens.
  return "token " + std::to_string(std::min(step, maxSteps)) + "/" +
         std::to_string(maxSteps) + "  " + std::to_string(activeRows) + "/" +
         std::to_string(rows) + " rows active  " +
         rounded(decodeTokensPerSecond()) + " tok/s  ETA " +
         (activeRows == 0 ? "0s" : train::durationText(eta));
}

std::string GenerateProgress::prefillDone(uint64_t tokens) {
  prefillEnd = lastTime = clock();
  prefillTokens = tokens;
  lastStep = 1;
  return "token 1/" + std::to_string(maxSteps) + "  first token after " +
         fixed(timeToFirstToken(), 3) + " s";
}

std::string GenerateProgress::stepDone(uint64_t step, uint64_t tokens,
                                       uint64_t activeRows) {
  lastTime = clock();
  lastStep = step + 1;
  decodeTokens += tokens;
  return line(step + 1, activeRows);
}

bool GenerateProgress::shouldPrint(bool last) {
  if (printedLast || (!last && lastTime - lastPrinted < 1.0))
    return false;
  lastPrinted = lastTime;
  printedLast = last;
  return true;
}

double GenerateProgress::decodeTokensPerSecond() const {
  double seconds = lastTime - prefillEnd;
  return seconds > 0 ? static_cast<double>(decodeTokens) / seconds : 0.0;
}

GenerationFigures GenerateProgress::figures() const {
  GenerationFigures figures;
  figures.prefillTokens = static_cast<double>(prefillTokens);
  figures.decodeTokens = static_cast<double>(decodeTokens);
  figures.steps = static_cast<double>(lastStep);
  figures.firstTokenSeconds = timeToFirstToken();
  figures.decodeSeconds = lastTime - prefillEnd;
  figures.totalSeconds = lastTime - start;
  return figures;
}

std::vector<std::string>
GenerateProgress::summary(const GenerationFacts &facts) const {
  return summaryLines(figures(), rows, facts);
}

GenerationFigures
zplan::generate::combine(const std::vector<GenerationFigures> &ranks) {
  GenerationFigures all;
  for (const GenerationFigures &rank : ranks) {
    all.prefillTokens += rank.prefillTokens;
    all.decodeTokens += rank.decodeTokens;
    all.agreementSeconds += rank.agreementSeconds;
    all.steps = std::max(all.steps, rank.steps);
    all.firstTokenSeconds =
        std::max(all.firstTokenSeconds, rank.firstTokenSeconds);
    all.decodeSeconds = std::max(all.decodeSeconds, rank.decodeSeconds);
    all.totalSeconds = std::max(all.totalSeconds, rank.totalSeconds);
    all.lockstepPeriod = std::max(all.lockstepPeriod, rank.lockstepPeriod);
    all.decodeRuns = std::max(all.decodeRuns, rank.decodeRuns);
    all.idleDecodeRuns = std::max(all.idleDecodeRuns, rank.idleDecodeRuns);
    all.agreements = std::max(all.agreements, rank.agreements);
  }
  return all;
}

namespace {

uint64_t count(double value) {
  return static_cast<uint64_t>(std::llround(value > 0 ? value : 0));
}

/// "lockstep: ..." over the ranks' figures.
std::string lockstepLine(const GenerationFigures &all,
                         const std::vector<GenerationFigures> &perRank) {
  std::string runs;
  for (const GenerationFigures &rank : perRank)
    runs += (runs.empty() ? "" : ", ") + std::to_string(count(rank.decodeRuns));
  if (all.lockstepPeriod == 0)
    return "lockstep: none (decode has no collective; each rank stopped "
           "when its rows finished); decode runs per rank: " +
           runs;
  std::string idle;
  for (const GenerationFigures &rank : perRank)
    idle +=
        (idle.empty() ? "" : ", ") + std::to_string(count(rank.idleDecodeRuns));
  uint64_t period = count(all.lockstepPeriod);
  double agreements = 0;
  for (const GenerationFigures &rank : perRank)
    agreements += rank.agreements;
  double each = agreements > 0 ? all.agreementSeconds / agreements : 0.0;
  double decodeShare =
      all.decodeSeconds > 0
          ? 100.0 *
                (all.agreementSeconds / static_cast<double>(perRank.size())) /
                all.decodeSeconds
          : 0.0;
  return "lockstep: agreed every " +
         (period == 1 ? std::string("decode step")
                      : std::to_string(period) + " decode steps") +
         "; " + std::to_string(count(all.agreements)) +
         (count(all.agreements) == 1 ? " agreement, " : " agreements, ") +
         fixed(each * 1e6, 1) + " us each (" + fixed(decodeShare, 2) +
         "% of decode); decode runs per rank: " + runs +
         "; after the rank's rows finished: " + idle;
}

} // namespace

std::vector<std::string>
zplan::generate::summaryLines(const GenerationFigures &figures, uint64_t rows,
                              const GenerationFacts &facts,
                              const std::vector<GenerationFigures> &perRank) {
  std::vector<std::string> lines;
  uint64_t tokens = count(figures.prefillTokens + figures.decodeTokens);
  uint64_t steps = count(figures.steps);
  uint64_t decodeTokens = count(figures.decodeTokens);
  double tokensPerSecond = figures.decodeSeconds > 0
                               ? figures.decodeTokens / figures.decodeSeconds
                               : 0.0;
  std::string ranks = perRank.size() > 1
                          ? " on " + std::to_string(perRank.size()) + " ranks"
                          : "";
  lines.push_back("generated " + train::withThousands(tokens) + " tokens in " +
                  std::to_string(rows) + (rows == 1 ? " row" : " rows") +
                  ranks + " (" + std::to_string(steps) +
                  (steps == 1 ? " step) in " : " steps) in ") +
                  fixed(figures.totalSeconds, 3) + " s");
  lines.push_back("time to first token " + fixed(figures.firstTokenSeconds, 3) +
                  " s (generate_begin + prefill)");
  lines.push_back("decode " + train::withThousands(decodeTokens) +
                  " tokens in " + fixed(figures.decodeSeconds, 3) +
                  " s: " + fixed(tokensPerSecond, 1) + " tok/s");
  std::string gathered = "gathered per decode step: " +
                         train::withThousands(facts.planGatheredPerDecodeStep) +
                         " B (plan)";
  if (facts.countedGatheredPerDecodeStep)
    gathered += ", " +
                train::withThousands(*facts.countedGatheredPerDecodeStep) +
                " B (counted)";
  lines.push_back(gathered);
  lines.push_back("resident " + train::withThousands(facts.residentBytes) +
                  " B, KV cache " + train::withThousands(facts.cacheBytes) +
                  " B");
  if (perRank.size() > 1)
    lines.push_back(lockstepLine(figures, perRank));
  return lines;
}
