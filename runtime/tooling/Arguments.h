//===- Arguments.h - zrun's command line, parsed
//---------------------------===//
//
// What the user asked zrun to do, checked for form only (known options,
// values in range, no name bound twice). What the plan makes of it (does
// the input exist, does the file match) is the run's business
// (RunCommand.h); which files are the same file, too, since that needs the
// file system.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_ARGUMENTS_H
#define ZPLAN_RUNTIME_TOOLING_ARGUMENTS_H

#include "runtime/comm/Communicator.h"
#include "runtime/exec/TierStore.h"
#include "runtime/generate/GenerateOptions.h"
#include "runtime/session/RankDevice.h"
#include "runtime/support/Status.h"
#include "runtime/train/TrainOptions.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zplan::tooling {

/// `--input NAME=PATH` or `--output NAME=PATH`.
struct FileBinding {
  std::string name;
  std::string path;
};

struct Arguments {
  std::string planPath;
  /// train: the plan's defaults (zcc --ds-config) put among the words, as
  /// "--flag=value" (TrainCommand.h's withPlanTrainDefaults).
  std::vector<std::string> planDefaults;
  /// "run", "inspect", "train", "gradients", "export" or "generate".
  std::string command;
  std::vector<FileBinding> inputs;
  std::vector<FileBinding> outputs;
  std::string program;
  bool check = false;
  /// --backend: where the programs run (runtime/session/RankDevice.h).
  BackendChoice backend = BackendChoice::Auto;
  std::string tracePath;
  int64_t repeat = 1;
  bool repeatGiven = false;
  bool stats = false;
  int threads = 1;
  /// --offload-dir: where the NVME tier's file goes (docs/offload.md).
  std::string offloadDir;
  /// --nvme-io buffered|direct: how that file is read and written.
  NvmeIo nvmeIo = NvmeIo::Buffered;
  /// --collective-timeout: the deadline of every collective, in seconds
  /// (comm/Watchdog.h); 0: none.
  double collectiveTimeout = comm::kDefaultCollectiveTimeout;
  bool help = false;
  /// `train`'s options (see kUsage).
  train::TrainOptions train;
  /// `generate`'s options (see generate::kGenerateUsage); `train
  /// --generate-every` uses the prompt, lengths, --max-new-tokens and --eos.
  generate::GenerateOptions generate;
  /// `train --generate-every S`: generate after every S-th micro-step (0:
  /// never; docs/one-plan.md).
  uint64_t generateEvery = 0;
  /// `train --momentum M`: SGD's momentum (AdamW plans ignore it).
  double momentum = 0.0;
  /// `train --clip-grad-norm MAX`: scale the gradients so that their global
  /// L2 norm is at most MAX (0: no clipping), as
  /// torch.nn.utils.clip_grad_norm_ does.
  double clipGradNorm = 0.0;
  /// `gradients --output-dir DIR`.
  std::string outputDir;
  /// `export --checkpoint DIR`: a checkpoint root or step directory.
  std::string checkpointPath;
  /// `export -o FILE` (or --output-file FILE).
  std::string outputFile;
  /// `export --model ORIGINAL.onnx`; empty: the plan's Plan.model.
  std::string modelPath;
  /// `export --external-data`: weights in MODEL.onnx.data at any size.
  bool externalData = false;
  /// `export --dtype bf16`: the trained weights stored as bf16.
  bool exportBf16 = false;
};

/// zrun --help.
extern const char *const kUsage;

/// Parses argv; `arguments` holds what was parsed up to a failure (the
/// command in particular, which decides how the error is reported).
Status parseArguments(int argc, char **argv, Arguments &arguments);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_ARGUMENTS_H
