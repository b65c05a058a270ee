//===- TrainOptions.cpp - the flags of `zrun PLAN train`, parsed ----------===//

#include "runtime/train/TrainOptions.h"
#include "runtime/support/FlagWords.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <set>

using namespace zplan;
using namespace zplan::train;

const char *const zplan::train::kTrainUsage =
    "       zrun PLAN train --data TOKENS|ROWS.npy [--labels LABELS.npy]\n"
    "                       [--shuffle] [--data-dtype uint16|uint32]\n"
    "                       [--steps S] [--grad-accum K] [--lr 3e-4]\n"
    "                       [--warmup W] [--lr-schedule constant|cosine]\n"
    "                       [--min-lr X] [--weight-decay 0.0] [--beta1 0.9]\n"
    "                       [--beta2 0.999] [--eps 1e-8] [--seed 0]\n"
    "                       [--save DIR] [--save-every S] [--keep-last K]\n"
    "                       [--resume DIR] [--log-every 1]\n"
    "                       [--loss-log FILE]\n"
    "\n"
    "  --data TOKENS           a token stream: .bin (uint16, or\n"
    "                          --data-dtype uint32) or a 1-D .npy; each\n"
    "                          row is T tokens at an offset --seed draws\n"
    "  --data ROWS.npy         rows: a 2-D .npy [R, T], int32 or int64,\n"
    "                          T = the plan's input_ids [B, T]; read in\n"
    "                          order, epoch after epoch, K*N*B rows a step\n"
    "                          (micro-step k, rank r: rows (k*N+r)*B ..);\n"
    "                          an epoch's last R mod K*N*B rows are dropped\n"
    "  --labels LABELS.npy     the rows' labels, [R, T] int32 or int64,\n"
    "                          -100 not scored (default: labels = the rows);\n"
    "                          needs a plan of zcc --input-shape labels=BxT\n"
    "  --shuffle               rows: each epoch in its own order, a\n"
    "                          permutation of --seed and the epoch\n"
    "  --seed N                token streams: the row offsets; rows: the\n"
    "                          --shuffle order (default 0)\n"
    "  --steps S               optimizer steps in all (default 100); a\n"
    "                          resumed run continues up to S\n"
    "  --grad-accum K          micro-steps per optimizer step (default 1)\n"
    "  --lr, --warmup W        peak learning rate, linear warmup from lr/W\n"
    "  --lr-schedule cosine    decay to --min-lr after warmup\n"
    "  --save DIR              checkpoint into DIR every --save-every steps\n"
    "                          (default: after the last), keeping the newest\n"
    "                          --keep-last (default: all)\n"
    "  --resume DIR            continue from DIR's latest (or a step-N dir)\n"
    "  --log-every N           print every Nth step (rank 0)\n"
    "  --loss-log FILE         write step<TAB>loss<TAB>lr per step\n"
    "  a step's loss is the mean of its K*N micro-batches' losses, each the\n"
    "  mean over that micro-batch's scored (not -100) next-token targets\n"
    "  a plan of zcc --ds-config carries defaults for --grad-accum,\n"
    "  --clip-grad-norm, --lr, --beta1, --beta2, --eps, --weight-decay\n"
    "  (zrun PLAN inspect shows them); a flag given wins\n";

LrSchedule TrainOptions::schedule() const {
  LrSchedule result;
  result.peak = lr;
  result.warmupSteps = warmup;
  result.decay = lrDecay;
  result.minimum = minLr;
  result.totalSteps = steps;
  return result;
}

OptimizerSettings TrainOptions::optimizer() const {
  OptimizerSettings settings;
  settings.beta1 = beta1;
  settings.beta2 = beta2;
  settings.eps = eps;
  settings.weightDecay = weightDecay;
  return settings;
}

namespace {

std::string numberText(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return text;
}

} // namespace

CheckpointValues TrainOptions::checkpointValues(DataExtent data) const {
  CheckpointValues values = {{"seed", std::to_string(seed)},
                             {"grad-accum", std::to_string(gradAccum)},
                             {"data-tokens", std::to_string(data.tokens)}};
  // A token stream's checkpoint records what it always has, so that
  // checkpoints written before rows existed still resume.
  if (data.rows) {
    values.push_back({"data-rows", std::to_string(data.rows)});
    values.push_back({"shuffle", shuffle ? "on" : "off"});
  }
  values.insert(
      values.end(),
      {{"lr", numberText(lr)},
       {"warmup", std::to_string(warmup)},
       {"lr-schedule", lrDecay == LrDecay::Cosine ? "cosine" : "constant"},
       {"min-lr", numberText(minLr)},
       {"weight-decay", numberText(weightDecay)},
       {"beta1", numberText(beta1)},
       {"beta2", numberText(beta2)},
       {"eps", numberText(eps)}});
  return values;
}

namespace {

/// The checkpoint values a resume must match, and the flag that sets each:
/// batch selection is a function of them, so resuming with another value
/// would train on other rows than the interrupted run.
const char *const kMustMatch[][2] = {
    {"seed", "--seed"},
    {"grad-accum", "--grad-accum"},
    {"data-tokens", "--data (its token count)"},
    {"data-rows", "--data (its row count)"},
    {"shuffle", "--shuffle"}};

/// The value of `key` among `values`, or null.
const std::string *valueNamed(const CheckpointValues &values,
                              const std::string &key) {
  for (const auto &[name, value] : values)
    if (name == key)
      return &value;
  return nullptr;
}

} // namespace

Status TrainOptions::checkResume(const LoadedCheckpoint &loaded,
                                 DataExtent data) const {
  CheckpointValues mine = checkpointValues(data);
  bool savedRows = valueNamed(loaded.values, "data-rows") != nullptr;
  if (savedRows != (data.rows != 0))
    return failure("checkpoint ", inQuotes(loaded.directory),
                   " was trained on ",
                   savedRows ? "rows (a 2-D .npy --data)" : "a token stream",
                   "; this run reads ",
                   savedRows ? "a token stream" : "rows (a 2-D .npy --data)",
                   ", so it would not continue that run");
  for (const auto &[key, flag] : kMustMatch) {
    const std::string *expected = valueNamed(mine, key);
    if (!expected)
      continue;
    const std::string *saved = valueNamed(loaded.values, key);
    if (!saved)
      return failure("checkpoint ", inQuotes(loaded.directory),
                     " does not record its ", key,
                     "; it was not written by zrun train");
    if (*saved != *expected)
      return failure("checkpoint ", inQuotes(loaded.directory),
                     " was trained with ", flag, " ", *saved, "; this run has ",
                     *expected, ", so it would not continue that run");
  }
  if (loaded.step >= steps)
    return failure("checkpoint ", inQuotes(loaded.directory), " is at step ",
                   loaded.step, "; --steps ", steps,
                   " leaves nothing to train");
  return Status::success();
}

std::vector<std::string>
TrainOptions::changedOnResume(const LoadedCheckpoint &loaded) const {
  std::vector<std::string> changed;
  for (const auto &[key, value] : checkpointValues(DataExtent())) {
    if (std::any_of(std::begin(kMustMatch), std::end(kMustMatch),
                    [&](const auto &entry) { return key == entry[0]; }))
      continue; // checkResume's: they must match.
    const std::string *saved = valueNamed(loaded.values, key);
    if (saved && *saved != value)
      changed.push_back("--" + key + " " + value +
                        " (the checkpoint's run: " + *saved + ")");
  }
  return changed;
}

Status zplan::train::parseTrainOptions(const std::vector<std::string> &words,
                                       TrainOptions &options) {
  constexpr uint64_t kMaxCount = 1000000000000ull;
  static const std::set<std::string> kFlags = {
      "--data",         "--data-dtype", "--steps",       "--grad-accum",
      "--lr",           "--warmup",     "--lr-schedule", "--min-lr",
      "--weight-decay", "--beta1",      "--beta2",       "--eps",
      "--seed",         "--save",       "--save-every",  "--keep-last",
      "--resume",       "--log-every",  "--loss-log",    "--labels",
      "--shuffle"};
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr NumberRange kPositive{0, true, kInf, true};
  constexpr NumberRange kNonNegative{0, false, kInf, true};
  constexpr NumberRange kFraction{0, false, 1, true};
  std::set<std::string> seen;
  bool minLrGiven = false;
  auto apply = [&](const std::string &flag, const std::string &value) {
    Status status = Status::success();
    if (flag == "--data" || flag == "--labels" || flag == "--save" ||
        flag == "--resume" || flag == "--loss-log") {
      if (value.empty())
        return failure(flag, " needs a path");
      (flag == "--data"     ? options.dataPath
       : flag == "--labels" ? options.labelsPath
       : flag == "--save"   ? options.saveDir
       : flag == "--resume" ? options.resumeFrom
                            : options.lossLogPath) = value;
    } else if (flag == "--shuffle")
      options.shuffle = true;
    else if (flag == "--data-dtype") {
      TokenType type;
      status = parseRawTokenType(value, type);
      options.dataType = type;
    } else if (flag == "--steps")
      status = parseFlagInteger(flag, value, 1, kMaxCount, options.steps);
    else if (flag == "--grad-accum")
      status = parseFlagInteger(flag, value, 1, 1000000, options.gradAccum);
    else if (flag == "--warmup")
      status = parseFlagInteger(flag, value, 0, kMaxCount, options.warmup);
    else if (flag == "--save-every")
      status = parseFlagInteger(flag, value, 1, kMaxCount, options.saveEvery);
    else if (flag == "--keep-last")
      status = parseFlagInteger(flag, value, 1, 1000000, options.keepLast);
    else if (flag == "--log-every")
      status = parseFlagInteger(flag, value, 1, kMaxCount, options.logEvery);
    else if (flag == "--seed")
      status = parseFlagInteger(flag, value, 0, UINT64_MAX, options.seed);
    else if (flag == "--lr")
      status = parseFlagNumber(flag, value, kPositive, options.lr);
    else if (flag == "--min-lr") {
      status = parseFlagNumber(flag, value, kNonNegative, options.minLr);
      minLrGiven = true;
    } else if (flag == "--lr-schedule")
      status = parseLrDecay(value, options.lrDecay);
    else if (flag == "--weight-decay")
      status = parseFlagNumber(flag, value, kNonNegative, options.weightDecay);
    else if (flag == "--beta1")
      status = parseFlagNumber(flag, value, kFraction, options.beta1);
    else if (flag == "--beta2")
      status = parseFlagNumber(flag, value, kFraction, options.beta2);
    else if (flag == "--eps")
      status = parseFlagNumber(flag, value, kPositive, options.eps);
    return status;
  };
  ZR_RETURN_IF_ERROR(
      forEachFlag(words, kFlags, "train", seen, apply, {"--shuffle"}));
  if (options.dataPath.empty())
    return failure("train needs --data TOKENS (a token file) or --data "
                   "ROWS.npy (rows)");
  if ((seen.count("--save-every") || seen.count("--keep-last")) &&
      options.saveDir.empty())
    return failure(seen.count("--save-every") ? "--save-every" : "--keep-last",
                   " needs --save DIR");
  if (minLrGiven && options.lrDecay != LrDecay::Cosine)
    return failure("--min-lr needs --lr-schedule cosine");
  if (options.minLr > options.lr)
    return failure("--min-lr ", options.minLr, " is above --lr ", options.lr);
  return Status::success();
}
