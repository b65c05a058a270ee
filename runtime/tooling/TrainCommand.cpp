//===- TrainCommand.cpp - zrun PLAN train and zrun PLAN gradients ---------===//

#include "runtime/tooling/TrainCommand.h"

#include "runtime/exec/Memory.h"
#include "runtime/plan/PlanLoading.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/session/Session.h"
#include "runtime/support/FlagWords.h"
#include "runtime/support/NumberText.h"
#include "runtime/support/ShapeText.h"
#include "runtime/tooling/Diagnostics.h"
#include "runtime/tooling/Files.h"
#include "runtime/tooling/Npy.h"
#include "runtime/tooling/ProgramInputs.h"
#include "runtime/tooling/PromptFiles.h"
#include "runtime/tooling/Stats.h"
#include "runtime/train/BatchSampler.h"
#include "runtime/train/NpyHeader.h"
#include "runtime/train/Progress.h"
#include "runtime/train/RowData.h"
#include "runtime/train/RowSampler.h"
#include "runtime/train/TokenData.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <sys/stat.h>

using namespace zplan;
using namespace zplan::tooling;

namespace {

/// The session `train` and `gradients` run on: zrun's flags as the
/// session's options.
Status openSession(const Arguments &arguments, comm::Communicator &communicator,
                   std::unique_ptr<session::Session> &out) {
  session::SessionOptions options;
  options.check = arguments.check;
  options.backend = arguments.backend;
  options.threads = arguments.threads;
  options.offloadDir = arguments.offloadDir;
  options.nvmeIo = arguments.nvmeIo;
  options.train = session::trainConfigOf(arguments.train);
  options.train.momentum = arguments.momentum;
  options.train.clipGradNorm = arguments.clipGradNorm;
  return session::Session::open(arguments.planPath, communicator, options, out);
}

//===----------------------------------------------------------------------===//
// gradients
//===----------------------------------------------------------------------===//

/// A file name for parameter `name`: '/' (a path separator) becomes '_'.
std::string gradientFileName(const std::string &name) {
  std::string file = name;
  std::replace(file.begin(), file.end(), '/', '_');
  return file + ".npy";
}

Status stageGradients(const plan::Plan &plan, const std::string &directory,
                      const std::vector<std::vector<float>> &groups, float loss,
                      StagedFiles &staged) {
  std::string index;
  std::string encoded;
  ZR_RETURN_IF_ERROR(
      npy::encodeNpy(plan::F32, {}, &loss, sizeof(loss), encoded));
  ZR_RETURN_IF_ERROR(staged.stage(directory + "/loss.npy", encoded,
                                  "the loss to " + inQuotes(directory)));
  for (const plan::Parameter &parameter : plan.parameters()) {
    // A frozen parameter has no gradient (and a tied copy is no parameter:
    // its parameter's gradient is the sum of both uses).
    if (plan.groups(parameter.group()).frozen())
      continue;
    const std::vector<float> &whole = groups[parameter.group()];
    std::vector<int64_t> shape(parameter.shape().begin(),
                               parameter.shape().end());
    std::string file = gradientFileName(parameter.name());
    ZR_RETURN_IF_ERROR(npy::encodeNpy(
        plan::F32, shape, whole.data() + parameter.offset_elements(),
        parameter.num_elements() * sizeof(float), encoded));
    ZR_RETURN_IF_ERROR(
        staged.stage(directory + "/" + file, encoded,
                     "the gradient of " + inQuotes(parameter.name())));
    index += parameter.name() + "\t" + file + "\n";
  }
  return staged.stage(directory + "/gradients.txt", index,
                      "the gradient index in " + inQuotes(directory));
}

/// Reads the micro-batch of `gradients` from its --input files and checks
/// that rank 0 can write --output-dir.
Status checkGradientInputs(const Arguments &arguments,
                           const session::Session &session, int rank,
                           std::vector<npy::Array> &inputs,
                           std::vector<session::ProgramInput> &fed) {
  ZR_RETURN_IF_ERROR(session.checkCanStep());
  const plan::Program &step =
      *plan::findProgram(session.plan(), plan::PROGRAM_KIND_TRAIN_MICRO_STEP);
  ZR_RETURN_IF_ERROR(checkInputNames(step, arguments.inputs));
  ZR_RETURN_IF_ERROR(
      readProgramInputs(session.plan(), step, arguments.inputs, inputs));
  fed = asProgramInputs(step, inputs);
  if (rank != 0)
    return Status::success();
  const std::string &directory = arguments.outputDir;
  struct stat info;
  if (stat(directory.c_str(), &info) != 0 && mkdir(directory.c_str(), 0777))
    return failure("cannot create --output-dir ", inQuotes(directory), ": ",
                   std::strerror(errno));
  return checkWritable(directory + "/loss.npy", "--output-dir");
}

//===----------------------------------------------------------------------===//
// train
//===----------------------------------------------------------------------===//

/// What `train` reads and writes besides the session: the data (a token
/// stream or rows) and the batches drawn from it, the loss log, the
/// generation it makes.
struct TrainRun {
  /// --resume: the optimizer and schedule flags that differ from the
  /// checkpoint's run (TrainOptions::changedOnResume), said on rank 0.
  std::vector<std::string> resumeChanges;
  /// --data is rows (a 2-D .npy: RowData, RowSampler), not a token stream
  /// (TokenData, BatchSampler).
  bool rows = false;
  train::TokenData tokens;
  std::unique_ptr<train::BatchSampler> sampler;
  train::RowData rowData;
  std::unique_ptr<train::RowSampler> rowSampler;
  std::vector<int64_t> shape;
  std::vector<int64_t> ids;
  /// The rows' labels, when --labels gave them.
  std::vector<int64_t> labels;
  uint64_t firstStep = 0;
  std::ofstream lossLog;
  /// --generate-every: the prompts.
  session::GenerateRequest generation;

  /// What batch selection depends on in the data (checkpoints record it).
  train::DataExtent dataExtent() const {
    if (!rows)
      return {tokens.size(), 0};
    return {rowData.rows() * rowData.rowTokens(), rowData.rows()};
  }

  /// Reads micro-step `micro` of optimizer step `step` for `rank` into ids
  /// (and labels).
  Status fill(uint64_t step, uint64_t micro, uint64_t rank) {
    if (!rows)
      return sampler->fill(tokens, step, micro, rank, ids.data());
    return rowSampler->fill(rowData, step, micro, rank, ids.data(),
                            rowData.hasLabels() ? labels.data() : nullptr);
  }
};

/// --data as rows: the row file, its labels, and how they fit the plan.
Status checkRows(const train::TrainOptions &options,
                 const session::Session &session,
                 const train::BatchShape &shape, TrainRun &run) {
  train::RowDataOptions rowOptions;
  rowOptions.vocabSize = session.vocabulary();
  ZR_RETURN_IF_ERROR(
      run.rowData.open(options.dataPath, options.labelsPath, rowOptions));
  if (options.dataType)
    return failure("--data-dtype is for raw token files; ",
                   run.rowData.subject(), " is a .npy of rows (",
                   run.rowData.shapeAndType(), ")");
  if (run.rowData.hasLabels() && !session.trainTakesLabels())
    return failure("--labels needs a plan whose 'train_micro_step' takes "
                   "labels (zcc --mode train --input-shape input_ids=BxT "
                   "--input-shape labels=BxT); this plan's takes input_ids ",
                   shapeText(run.shape), " only");
  ZR_RETURN_IF_ERROR(train::checkRowsFit(run.rowData, shape));
  run.rowSampler = std::make_unique<train::RowSampler>(
      options.seed, options.shuffle, run.rowData.rows(), shape);
  if (run.rowData.hasLabels())
    run.labels.assign(run.ids.size(), 0);
  return Status::success();
}

/// --data as a token stream; --labels and --shuffle are for rows only.
Status checkTokenStream(const train::TrainOptions &options,
                        const session::Session &session,
                        const train::BatchShape &shape, TrainRun &run) {
  train::TokenDataOptions dataOptions;
  dataOptions.rawType = options.dataType;
  dataOptions.rowTokens = shape.rowTokens;
  dataOptions.vocabSize = session.vocabulary();
  ZR_RETURN_IF_ERROR(run.tokens.open(options.dataPath, dataOptions));
  std::string stream = "token file " + inQuotes(run.tokens.path()) +
                       " is a token stream (not a 2-D .npy of rows)";
  if (!options.labelsPath.empty())
    return failure("--labels ", inQuotes(options.labelsPath),
                   " labels rows, a 2-D .npy --data [rows, tokens]; ", stream);
  if (options.shuffle)
    return failure("--shuffle orders rows, a 2-D .npy --data [rows, tokens]; ",
                   stream, ", whose rows --seed always draws at random");
  run.sampler = std::make_unique<train::BatchSampler>(options.seed,
                                                      run.tokens.size(), shape);
  return Status::success();
}

Status checkTrainInputs(const Arguments &arguments,
                        const session::Session &session,
                        comm::Communicator &communicator, TrainRun &run) {
  const train::TrainOptions &options = arguments.train;
  run.shape = session.trainInputShape();
  if (run.shape.size() != 2)
    return failure("program 'train_micro_step''s input 'input_ids' is not "
                   "int64 [batch, sequence]");
  run.ids.assign(static_cast<size_t>(run.shape[0] * run.shape[1]), 0);
  train::BatchShape shape;
  shape.rows = static_cast<uint64_t>(run.shape[0]);
  shape.rowTokens = static_cast<uint64_t>(run.shape[1]);
  shape.ranks = static_cast<uint64_t>(communicator.size());
  shape.microSteps = options.gradAccum;
  run.rows = train::isRowFile(options.dataPath);
  ZR_RETURN_IF_ERROR(run.rows ? checkRows(options, session, shape, run)
                              : checkTokenStream(options, session, shape, run));
  if (!options.lossLogPath.empty() && communicator.rank() == 0)
    ZR_RETURN_IF_ERROR(checkWritable(options.lossLogPath, "--loss-log"));
  if (arguments.generateEvery) {
    if (!session.canGenerate())
      return failure("--generate-every needs a plan compiled with zcc --mode "
                     "train,generate (",
                     session.checkCanGenerate().message(), ")");
    ZR_RETURN_IF_ERROR(readGenerateRequest(arguments.generate, run.generation));
    // Each rank generates its own rows of the prompt file, as it trains on
    // its own micro-batches (docs/generation.md section 8).
    ZR_RETURN_IF_ERROR(
        keepRankRows(run.generation, session.generationShape(),
                     static_cast<uint64_t>(communicator.rank()),
                     static_cast<uint64_t>(communicator.size())));
    ZR_RETURN_IF_ERROR(session.checkGenerateRequest(run.generation));
  }
  return Status::success();
}

/// Rank 0's line on what rows a run reads: an epoch's steps and what of it
/// is dropped.
std::string describeRows(const TrainRun &run,
                         const train::TrainOptions &options) {
  const train::RowSampler &sampler = *run.rowSampler;
  std::ostringstream text;
  text << "zrun: rows: " << run.rowData.subject() << " "
       << run.rowData.shapeAndType();
  if (run.rowData.hasLabels())
    text << ", labels " << inQuotes(run.rowData.labelsPath());
  else
    text << ", labels = the rows";
  text << "; " << sampler.globalRows() << " rows a step, "
       << sampler.stepsPerEpoch() << " steps an epoch ("
       << (options.shuffle
               ? "shuffled by --seed " + std::to_string(options.seed)
               : std::string("in file order"))
       << "), " << sampler.droppedPerEpoch() << " rows of each epoch dropped\n";
  return text.str();
}

/// Resumes from --resume: the state and the step; the batch rows are a
/// function of (seed, step), so a resumed run reads what an uninterrupted
/// one would have.
Status resume(const train::TrainOptions &options, session::Session &session,
              TrainRun &run) {
  train::LoadedCheckpoint loaded;
  ZR_RETURN_IF_ERROR(session.load(options.resumeFrom, loaded));
  ZR_RETURN_IF_ERROR(options.checkResume(loaded, run.dataExtent()));
  run.firstStep = loaded.step;
  run.resumeChanges = options.changedOnResume(loaded);
  return Status::success();
}

/// --generate-every: one generation after micro-step `micro` (counted from
/// 1 over the whole run), each rank of its own rows; rank 0 prints every
/// rank's tokens, in global row order, and the memory it held before,
/// during and after it.
void generateDuringTraining(session::Session &session, TrainRun &run,
                            uint64_t micro, uint64_t gradAccum,
                            comm::Communicator &communicator) {
  uint64_t before = session.memory().currentBytes;
  session::GenerateResult result;
  if (Status status = session.generate(run.generation, result); !status.ok())
    abortRun(communicator, status);
  session::GenerateResult all;
  if (Status status = session.gatherRows(result, all); !status.ok())
    abortRun(communicator, status);
  if (communicator.rank() != 0)
    return;
  std::ostringstream text;
  uint64_t inWindow = session.microStepsInWindow();
  text << "zrun: generated after micro-step " << micro;
  if (inWindow == 0)
    text << " (after optimizer step " << session.optimizerSteps() << ")";
  else
    text << " (inside step " << session.optimizerSteps() + 1 << ", " << inWindow
         << " of " << gradAccum << " micro-steps)";
  text << ": " << all.batch << " rows x " << result.maxNewTokens
       << " tokens; rank 0 held " << result.bytesDuring << " B during, "
       << session.memory().currentBytes << " B after (training " << before
       << " B)\n";
  for (uint64_t row = 0; row < all.batch; ++row) {
    text << "zrun:   row " << row << ":";
    for (uint64_t k = 0; k < result.maxNewTokens; ++k)
      text << " " << all.tokens[row * result.maxNewTokens + k];
    text << "\n";
  }
  std::cout << text.str() << std::flush;
}

} // namespace

int zplan::tooling::writeGradients(const Arguments &arguments,
                                   comm::Communicator &communicator) {
  std::unique_ptr<session::Session> session;
  std::vector<npy::Array> inputs;
  std::vector<session::ProgramInput> fed;
  Status checked = openSession(arguments, communicator, session);
  if (checked.ok())
    checked = checkGradientInputs(arguments, *session, communicator.rank(),
                                  inputs, fed);
  if (!agree(communicator, checked))
    return 1;
  float loss = 0;
  std::vector<std::vector<float>> groups;
  if (Status status = session->gradients(fed, loss, groups); !status.ok())
    abortRun(communicator, status);
  StagedFiles staged;
  bool rankZero = communicator.rank() == 0;
  if (!agree(communicator,
             rankZero ? stageGradients(session->plan(), arguments.outputDir,
                                       groups, loss, staged)
                      : Status::success()))
    return 1;
  return agree(communicator, rankZero ? staged.commitAll() : Status::success())
             ? 0
             : 1;
}

std::vector<std::string>
zplan::tooling::trainDefaultWords(const plan::TrainDefaults &defaults) {
  std::vector<std::string> words;
  if (defaults.has_grad_accum())
    words.push_back("--grad-accum=" + std::to_string(defaults.grad_accum()));
  if (defaults.has_clip_grad_norm())
    words.push_back("--clip-grad-norm=" +
                    shortestDecimal(defaults.clip_grad_norm()));
  if (defaults.has_lr())
    words.push_back("--lr=" + shortestDecimal(defaults.lr()));
  if (defaults.has_beta1())
    words.push_back("--beta1=" + shortestDecimal(defaults.beta1()));
  if (defaults.has_beta2())
    words.push_back("--beta2=" + shortestDecimal(defaults.beta2()));
  if (defaults.has_eps())
    words.push_back("--eps=" + shortestDecimal(defaults.eps()));
  if (defaults.has_weight_decay())
    words.push_back("--weight-decay=" +
                    shortestDecimal(defaults.weight_decay()));
  return words;
}

std::vector<std::string>
zplan::tooling::withPlanTrainDefaults(const std::vector<std::string> &words,
                                      std::vector<std::string> &added) {
  added.clear();
  plan::Plan plan;
  if (words.size() < 2 || words[1] != "train" ||
      !plan::loadPlan(words[0], plan).ok() || !plan.has_train_defaults())
    return words;
  std::set<std::string> given;
  for (const std::string &word : words)
    given.insert(splitFlagWord(word).flag);
  for (const std::string &word : trainDefaultWords(plan.train_defaults()))
    if (!given.count(splitFlagWord(word).flag))
      added.push_back(word);
  std::vector<std::string> result(words.begin(), words.begin() + 2);
  result.insert(result.end(), added.begin(), added.end());
  result.insert(result.end(), words.begin() + 2, words.end());
  return result;
}

int zplan::tooling::trainPlan(const Arguments &arguments,
                              comm::Communicator &communicator) {
  const train::TrainOptions &options = arguments.train;
  std::unique_ptr<session::Session> session;
  TrainRun run;
  Status checked = openSession(arguments, communicator, session);
  if (checked.ok())
    checked = session->checkCanTrain();
  // An RL loss needs per-row inputs (masks, advantages) a token file does
  // not have: those plans train from Python (docs/rl.md).
  if (checked.ok() && !session->trainRlInputs().empty())
    checked = failure("zrun train feeds token rows; this plan's loss also "
                      "takes RL inputs (completion_mask, ...): train it from "
                      "Python with Session.train_step (docs/rl.md), or check "
                      "one micro-step with zrun gradients --input NAME=FILE");
  if (checked.ok())
    checked = checkTrainInputs(arguments, *session, communicator, run);
  if (!agree(communicator, checked))
    return 1;
  if (!options.resumeFrom.empty() &&
      !agree(communicator, resume(options, *session, run)))
    return 1;
  bool rankZero = communicator.rank() == 0;
  if (rankZero && !arguments.planDefaults.empty()) {
    std::cout << "zrun: the plan's training defaults (zcc --ds-config):";
    for (const std::string &word : arguments.planDefaults)
      std::cout << " " << word;
    std::cout << "\n" << std::flush;
  }
  if (rankZero && !run.resumeChanges.empty()) {
    std::cout << "zrun: resuming at step " << run.firstStep
              << " with changed settings:";
    for (const std::string &change : run.resumeChanges)
      std::cout << " " << change << ";";
    std::cout << " every other setting is the checkpoint's run's\n"
              << std::flush;
  }

  train::Progress progress(run.firstStep, options.steps, train::steadyClock());
  uint64_t tokensPerStep = static_cast<uint64_t>(run.shape[0] * run.shape[1]) *
                           options.gradAccum *
                           static_cast<uint64_t>(communicator.size());
  session::TrainBatch batch;
  batch.inputIds = run.ids.data();
  batch.shape = run.shape;
  if (!run.labels.empty())
    batch.labels = run.labels.data();
  if (rankZero && run.rows)
    std::cout << describeRows(run, options) << std::flush;
  for (uint64_t step = run.firstStep; step < options.steps; ++step) {
    for (uint64_t micro = 0; micro < options.gradAccum; ++micro) {
      if (Status status =
              run.fill(step, micro, static_cast<uint64_t>(communicator.rank()));
          !status.ok())
        abortRun(communicator, status);
      double microLoss = 0;
      if (Status status = session->trainStep(batch, microLoss); !status.ok())
        abortRun(communicator, status);
      const session::WindowResult &window = session->lastWindow();
      if (window.optimizerStepped) {
        std::string line = progress.stepDone(window.step, window.loss,
                                             window.lr, tokensPerStep);
        if (rankZero) {
          if (window.step % options.logEvery == 0 ||
              window.step == options.steps)
            std::cout << "zrun: " << line << "\n" << std::flush;
          if (!options.lossLogPath.empty()) {
            // Written afresh by each run, line by line as it goes, from its
            // first optimizer step (a run that fails before it leaves no
            // empty log): a resumed run's log holds the steps it trained
            // (numbered from the checkpoint's).
            if (!run.lossLog.is_open()) {
              run.lossLog.open(options.lossLogPath, std::ios::trunc);
              if (!run.lossLog)
                abortRun(communicator, failure("cannot write --loss-log ",
                                               inQuotes(options.lossLogPath)));
            }
            run.lossLog << train::lossLogLine(window.step, window.loss,
                                              window.lr)
                        << std::flush;
          }
        }
      }
      // S counts micro-steps over the run (docs/one-plan.md): after one that
      // closes a window the generation follows its optimizer step; after any
      // other it runs inside the window, which it leaves untouched.
      uint64_t micros = step * options.gradAccum + micro + 1;
      if (arguments.generateEvery && micros % arguments.generateEvery == 0)
        generateDuringTraining(*session, run, micros, options.gradAccum,
                               communicator);
    }
    bool save = !options.saveDir.empty() &&
                ((options.saveEvery && (step + 1) % options.saveEvery == 0) ||
                 step + 1 == options.steps);
    if (save) {
      train::SaveResult saved;
      train::CheckpointOptions checkpointOptions;
      checkpointOptions.keepLast = options.keepLast;
      Status status = session->save(options.saveDir,
                                    options.checkpointValues(run.dataExtent()),
                                    checkpointOptions, saved);
      if (!status.ok())
        abortRun(communicator, status);
      if (rankZero) {
        std::cout << "zrun: saved " << saved.directory << "\n";
        for (const std::string &warning : saved.warnings)
          std::cout << "zrun: warning: " << warning << "\n";
        std::cout << std::flush;
      }
    }
  }
  if (rankZero)
    std::cout << "zrun: " << progress.summary() << "\n" << std::flush;
  if (arguments.stats && rankZero) {
    // What the last micro-step moved on this rank (every micro-step moves
    // the same): the gathered copies and the gradients sent into
    // reductions, in the plan's gather and reduce dtypes.
    const plan::Program &microStep = *plan::findProgram(
        session->plan(), plan::PROGRAM_KIND_TRAIN_MICRO_STEP);
    std::cout << "zrun: per micro-step: gathered "
              << session->bytesGatheredLastRun(microStep) << " B, reduced "
              << session->bytesReducedLastRun(microStep) << " B";
    if (uint64_t copied = session->bytesTierCopiedLastRun(microStep))
      std::cout << ", tier copies " << copied << " B";
    std::cout << "\n";
    // Offload: what the last optimizer step copied between the tiers.
    const plan::Program &step =
        *plan::findProgram(session->plan(), plan::PROGRAM_KIND_OPTIMIZER_STEP);
    if (uint64_t copied = session->bytesTierCopiedLastRun(step))
      std::cout << "zrun: per optimizer step: tier copies " << copied << " B\n";
    std::cout << std::flush;
  }
  if (arguments.stats && !printStats(communicator, session->rankMemory()))
    return 1;
  return 0;
}
