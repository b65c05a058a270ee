//===- GenerateProgress.cpp - what `zrun generate` prints while it runs ---===//

#include "runtime/generate/GenerateProgress.h"

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
  return "token " + std::to_string(step) + "/" + std::to_string(maxSteps) +
         "  " + std::to_string(activeRows) + "/" + std::to_string(rows) +
         " rows active  " + rounded(decodeTokensPerSecond()) + " tok/s  ETA " +
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
  if (!last && lastTime - lastPrinted < 1.0)
    return false;
  lastPrinted = lastTime;
  return true;
}

double GenerateProgress::decodeTokensPerSecond() const {
  double seconds = lastTime - prefillEnd;
  return seconds > 0 ? static_cast<double>(decodeTokens) / seconds : 0.0;
}

std::vector<std::string>
GenerateProgress::summary(const GenerationFacts &facts) const {
  std::vector<std::string> lines;
  uint64_t tokens = prefillTokens + decodeTokens;
  lines.push_back("generated " + train::withThousands(tokens) + " tokens in " +
                  std::to_string(rows) + (rows == 1 ? " row (" : " rows (") +
                  std::to_string(lastStep) +
                  (lastStep == 1 ? " step) in " : " steps) in ") +
                  fixed(lastTime - start, 3) + " s");
  lines.push_back("time to first token " + fixed(timeToFirstToken(), 3) +
                  " s (generate_begin + prefill)");
  lines.push_back("decode " + train::withThousands(decodeTokens) +
                  " tokens in " + fixed(lastTime - prefillEnd, 3) +
                  " s: " + fixed(decodeTokensPerSecond(), 1) + " tok/s");
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
  return lines;
}
