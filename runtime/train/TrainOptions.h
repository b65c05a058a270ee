//===- TrainOptions.h - the flags of `zrun PLAN train`, parsed ------------===//
//
// `zrun train`'s flags (kTrainUsage below), checked for form only (known flags,
// numbers in range, no flag twice, dependent flags together), in the style of
// zrun's other commands (runtime/tooling/Arguments.h): a one-line message
// naming the flag and what it takes. Whether the data file exists and fits the
// plan is the run's business (TokenData, RowData). Cli calls this with the
// words after `PLAN train`.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TRAIN_TRAINOPTIONS_H
#define ZPLAN_RUNTIME_TRAIN_TRAINOPTIONS_H

#include "runtime/support/Status.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/LrSchedule.h"
#include "runtime/train/OptimizerHyper.h"
#include "runtime/train/TokenData.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace zplan::train {

/// What batch selection depends on in the --data file: its size in tokens
/// and, for rows, in rows.
struct DataExtent {
  uint64_t tokens = 0;
  /// 0: a token stream.
  uint64_t rows = 0;
};

struct TrainOptions {
  /// --data TOKENS|ROWS (required): a token stream, or rows (a 2-D .npy).
  std::string dataPath;
  /// --labels LABELS: the rows' labels (a 2-D .npy of --data's shape).
  std::string labelsPath;
  /// --shuffle: each epoch of rows in its own seeded order (RowSampler.h).
  bool shuffle = false;
  /// --data-dtype uint16|uint32 (raw files; unset: uint16, or the .npy's).
  std::optional<TokenType> dataType;
  uint64_t steps = 100;
  /// --grad-accum K: micro-steps per optimizer step.
  uint64_t gradAccum = 1;
  double lr = 3e-4;
  uint64_t warmup = 0;
  /// --lr-schedule constant|cosine and the cosine's --min-lr.
  LrDecay lrDecay = LrDecay::Constant;
  double minLr = 0.0;
  double weightDecay = 0.0;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  uint64_t seed = 0;
  /// --save DIR; empty: no checkpoints.
  std::string saveDir;
  /// --save-every S; 0: save only after the last step (when --save).
  uint64_t saveEvery = 0;
  /// --keep-last K: checkpoints kept in --save DIR; 0 keeps all.
  uint64_t keepLast = 0;
  /// --resume DIR: a checkpoint root or step directory.
  std::string resumeFrom;
  uint64_t logEvery = 1;
  /// --loss-log FILE (rank 0 writes it).
  std::string lossLogPath;

  /// The schedule these options describe.
  LrSchedule schedule() const;
  /// The optimizer's constants these options give.
  OptimizerSettings optimizer() const;

  /// The key=value lines a checkpoint of this run records: what batch
  /// selection depends on (seed, grad-accum, the data's token count; for
  /// rows also the row count and --shuffle) and, for the record, the
  /// optimizer and schedule flags.
  CheckpointValues checkpointValues(DataExtent data) const;
  /// Fails, naming the flag, when `loaded` was written by a run that chose
  /// its batches differently (another --seed or --grad-accum, another token
  /// or row count, rows against a token stream, another --shuffle), so that
  /// resuming would not continue it; or when it is already at or past
  /// --steps. Other flags (lr, schedule) may change on resume.
  Status checkResume(const LoadedCheckpoint &loaded, DataExtent data) const;
  /// The optimizer and schedule flags (--lr, --warmup, --lr-schedule,
  /// --min-lr, --weight-decay, --beta1, --beta2, --eps) whose values differ
  /// from those of the run that saved `loaded`, each as "--lr 0.001 (the
  /// checkpoint's run: 0.0003)": a resume may change them (a new phase of
  /// training), but says so.
  std::vector<std::string>
  changedOnResume(const LoadedCheckpoint &loaded) const;
};

/// `zrun PLAN train --help`'s lines.
extern const char *const kTrainUsage;

/// Parses the words after `PLAN train`; `options` holds what was parsed up
/// to a failure.
Status parseTrainOptions(const std::vector<std::string> &words,
                         TrainOptions &options);

} // namespace zplan::train

#endif // ZPLAN_RUNTIME_TRAIN_TRAINOPTIONS_H
