//===- TrainCommand.h - zrun PLAN train and zrun PLAN gradients -----------===//
//
// The commands of a plan compiled with `zcc --mode train`. Its programs:
// `train_micro_step` (inputs input_ids [B, T] and, optionally, labels;
// output loss; it accumulates every group's gradient into this rank's
// gradient shard) and `optimizer_step` (input hyper f32[8]; updates every
// shard from its gradient and clears the gradient).
//
// `train` runs K micro-steps then one optimizer step per training step, on
// batches read from a flat token file (runtime/train/BatchSampler.h: the
// same rows for any N and K with the same global batch) or from the rows of
// a 2-D .npy and their labels, epoch by epoch (runtime/train/RowData.h,
// RowSampler.h: split over N and K the same way), logs progress on
// rank 0, and saves and resumes sharded checkpoints
// (runtime/train/Checkpoint.h). On a plan of `zcc --mode train,generate`,
// `--generate-every S` generates from the prompts after every S-th
// micro-step, inside an accumulation window or after its optimizer step, and
// rank 0 prints the tokens and the bytes the rank held during and after
// (docs/one-plan.md section 5). `gradients` runs one micro-step on the
// same inputs on every rank and writes the loss and every parameter's
// whole gradient (rank 0 gathers the shards), for tests against autograd.
// Both run on the rank's session (runtime/session/Session.h), which owns
// the training and generation loops.
//
// Failures before the first step are agreed among the ranks (one line,
// exit 1), as `run`'s are; a failure during the steps prints one line and
// aborts every rank.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_TRAINCOMMAND_H
#define ZPLAN_RUNTIME_TOOLING_TRAINCOMMAND_H

#include "runtime/comm/Communicator.h"
#include "runtime/plan/plan.pb.h"
#include "runtime/tooling/Arguments.h"

#include <string>
#include <vector>

namespace zplan::tooling {

/// The plan's zrun train defaults (plan.proto's TrainDefaults, which
/// `zcc --ds-config` writes) as flag words, "--grad-accum=2", "--lr=0.001",
/// each value exact, in TrainDefaults' order; none for a plan without.
std::vector<std::string> trainDefaultWords(const plan::TrainDefaults &defaults);

/// zrun's words (argv after the program name) with the defaults of the plan
/// they name put before the first flag, each one whose flag the words do
/// not give: a flag given wins. `added` gets the words put in. Only for
/// `PLAN train`; a plan that cannot be read adds nothing (opening the
/// session reports why).
std::vector<std::string>
withPlanTrainDefaults(const std::vector<std::string> &words,
                      std::vector<std::string> &added);

/// `zrun PLAN train` on this rank; returns the exit status.
int trainPlan(const Arguments &arguments, comm::Communicator &communicator);

/// `zrun PLAN gradients` on this rank; returns the exit status.
int writeGradients(const Arguments &arguments,
                   comm::Communicator &communicator);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_TRAINCOMMAND_H
