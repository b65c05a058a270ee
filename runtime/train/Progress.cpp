//===- Progress.cpp - what `zrun train` prints while it trains -----------===//

#include "runtime/train/Progress.h"

#include <chrono>
#include <cmath>
#include <cstdio>

using namespace zplan::train;

Clock zplan::train::steadyClock() {
  return [] {
    return std::chrono::duration<double>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
}

std::string zplan::train::withThousands(uint64_t value) {
  std::string digits = std::to_string(value), text;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      text += ',';
    text += digits[i];
  }
  return text;
}

std::string zplan::train::durationText(double seconds) {
  if (!(seconds >= 0.0))
    seconds = 0.0;
  uint64_t whole = static_cast<uint64_t>(std::llround(seconds));
  char text[48];
  if (whole < 60)
    std::snprintf(text, sizeof(text), "%llus",
                  static_cast<unsigned long long>(whole));
  else if (whole < 3600)
    std::snprintf(text, sizeof(text), "%llum%02llus",
                  static_cast<unsigned long long>(whole / 60),
                  static_cast<unsigned long long>(whole % 60));
  else
    std::snprintf(text, sizeof(text), "%lluh%02llum",
                  static_cast<unsigned long long>(whole / 3600),
                  static_cast<unsigned long long>(whole % 3600 / 60));
  return text;
}

std::string zplan::train::lossLogLine(uint64_t step, double loss, double lr) {
  char text[96];
  std::snprintf(text, sizeof(text), "%llu\t%.9g\t%.9g\n",
                static_cast<unsigned long long>(step), loss, lr);
  return text;
}

Progress::Progress(uint64_t firstStep, uint64_t totalSteps, Clock clock)
    : firstStep(firstStep), totalSteps(totalSteps), clock(std::move(clock)) {
  start = this->clock();
  lastTime = start;
  lastStep = firstStep;
}

namespace {

/// Tokens per second, or 0 when no time has passed.
double rate(uint64_t tokens, double seconds) {
  return seconds > 0.0 ? static_cast<double>(tokens) / seconds : 0.0;
}

} // namespace

std::string Progress::stepDone(uint64_t step, double loss, double lr,
                               uint64_t stepTokens) {
  lastTime = clock();
  lastStep = step;
  lastLoss = loss;
  tokens += stepTokens;
  double elapsed = lastTime - start;
  uint64_t done = step > firstStep ? step - firstStep : 0;
  uint64_t left = totalSteps > step ? totalSteps - step : 0;
  double eta =
      done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(left)
               : 0.0;
  char head[128];
  std::snprintf(head, sizeof(head), "step %llu/%llu  loss %.4f  lr %.2e  ",
                static_cast<unsigned long long>(step),
                static_cast<unsigned long long>(totalSteps), loss, lr);
  return std::string(head) +
         withThousands(
             static_cast<uint64_t>(std::llround(rate(tokens, elapsed)))) +
         " tok/s  ETA " + durationText(eta);
}

std::string Progress::summary() const {
  if (lastStep <= firstStep)
    return "trained no step";
  double elapsed = lastTime - start;
  char loss[32];
  std::snprintf(loss, sizeof(loss), "%.4f", lastLoss);
  return "trained steps " + std::to_string(firstStep + 1) + "-" +
         std::to_string(lastStep) + " (" +
         std::to_string(lastStep - firstStep) +
         (lastStep - firstStep == 1 ? " step): " : " steps): ") +
         withThousands(tokens) + " tokens in " + durationText(elapsed) + ", " +
         withThousands(
             static_cast<uint64_t>(std::llround(rate(tokens, elapsed)))) +
         " tok/s, final loss " + loss;
}
