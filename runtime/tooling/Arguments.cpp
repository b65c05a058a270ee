//===- Arguments.cpp - zrun's command line, parsed
//-------------------------===//

#include "runtime/tooling/Arguments.h"
#include "runtime/support/FlagWords.h"

#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <utility>

using namespace zplan;
using namespace zplan::tooling;

const char *const zplan::tooling::kUsage =
    "usage: zrun PLAN run --input NAME=FILE.npy ... [--output NAME=FILE.npy "
    "...]\n"
    "                     [--program NAME] [--check] [--trace FILE.json]\n"
    "                     [--repeat K] [--stats] [--threads T]\n"
    "                     [--backend cpu|cuda|auto]\n"
    "       zrun PLAN gradients --input NAME=FILE.npy ... --output-dir DIR\n"
    "       zrun PLAN inspect [--program NAME]\n"
    "       zrun PLAN train --data TOKENS|ROWS.npy [options below]\n"
    "       zrun PLAN export --checkpoint DIR -o MODEL.onnx [--model "
    "ORIGINAL.onnx]\n"
    "       zrun PLAN generate --prompt PROMPTS.npy --output TOKENS.npy "
    "[options below]\n"
    "\n"
    "Runs a plan compiled by zcc on the ranks mpirun launches (one per\n"
    "rank of the plan's world size), trains a plan compiled with --mode\n"
    "train, or prints what a plan holds.\n"
    "\n"
    "run:\n"
    "  --input NAME=FILE.npy   bind program input NAME (one per input)\n"
    "  --output NAME=FILE.npy  write program output NAME (rank 0)\n"
    "  --program NAME          the program to run (default: the only one,\n"
    "                          else 'infer')\n"
    "  --check                 poison released copies, fail on reads after\n"
    "                          release, check shard checksums\n"
    "  --trace FILE.json       write a Chrome/Perfetto trace of all ranks\n"
    "  --repeat K              run K times; print the last run's time\n"
    "  --stats                 print each rank's peak RSS and memory layout\n"
    "  --threads T             kernel threads per rank: BLAS and the CPU\n"
    "                          kernels (default 1)\n"
    "  --offload-dir DIR       where each rank keeps its nvme tier's file\n"
    "                          (default: the plan's, zcc --offload-dir)\n"
    "  --nvme-io buffered|direct  that file's I/O: through the page cache\n"
    "                          (default) or around it (O_DIRECT)\n"
    "  --collective-timeout S  end the job when a collective waits S seconds\n"
    "                          (a stopped or hung rank; default 300, 0: "
    "never)\n"
    "  --backend cpu|cuda|auto where programs run: one GPU per rank over\n"
    "                          NCCL, or the CPU over MPI (default auto: cuda\n"
    "                          when every rank has a GPU; also for train,\n"
    "                          gradients and generate)\n"
    "gradients:\n"
    "  --input NAME=FILE.npy   the micro-batch (the same on every rank)\n"
    "  --output-dir DIR        loss.npy and one .npy per parameter gradient\n"
    "export (one process, no mpirun):\n"
    "  --checkpoint DIR        a checkpoint root (its 'latest') or step-N\n"
    "                          directory of `zrun PLAN train --save`\n"
    "  -o, --output-file FILE  the ONNX model with the trained weights\n"
    "  --model ORIGINAL.onnx   the model the plan was compiled from\n"
    "                          (default: the plan's, beside the plan)\n"
    "  --external-data         weights in MODEL.onnx.data beside it (the\n"
    "                          default above 2 GiB only)\n"
    "  --dtype fp32|bf16       the trained weights' type (default fp32, the\n"
    "                          master); bf16: rounded, each read through a\n"
    "                          Cast to float\n"
    "train (also --check, --threads T, --stats; --momentum M for sgd plans;\n"
    "       --clip-grad-norm MAX to clip the gradients' global L2 norm;\n"
    "       on a plan of zcc --mode train,generate, --generate-every S\n"
    "       --prompt PROMPTS.npy [--prompt-lengths LENS.npy]\n"
    "       [--max-new-tokens M] [--eos ID] to generate greedily after every\n"
    "       S-th micro-step, inside an accumulation window or after its\n"
    "       optimizer step, and print the tokens on rank 0):\n";

namespace {

Status parseCount(const std::string &flag, const std::string &text, int64_t low,
                  int64_t high, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  // strtoll skips leading white space: a sign or digit first.
  bool leading =
      !text.empty() &&
      (std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '-');
  if (!leading || *end != '\0' || errno != 0 || value < low || value > high)
    return failure(flag, " takes an integer from ", low, " to ", high, ", got ",
                   inQuotes(text));
  out = value;
  return Status::success();
}

Status parseBinding(const std::string &flag, const std::string &text,
                    std::vector<FileBinding> &bindings) {
  size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == text.size())
    return failure(flag, " takes NAME=FILE.npy, got ", inQuotes(text));
  FileBinding binding{text.substr(0, equals), text.substr(equals + 1)};
  for (const FileBinding &other : bindings)
    if (other.name == binding.name)
      return failure(flag, " ", inQuotes(binding.name), " is given twice (",
                     inQuotes(other.path), " and ", inQuotes(binding.path),
                     ")");
  bindings.push_back(std::move(binding));
  return Status::success();
}

enum Command : unsigned {
  Run = 1,
  Inspect = 2,
  Train = 4,
  Gradients = 8,
  Export = 16,
  Generate = 32
};

struct Flag {
  const char *name;
  bool takesValue;
  unsigned commands;
};

constexpr Flag kFlags[] = {
    {"--input", true, Run | Gradients},
    {"--output", true, Run},
    {"--program", true, Run | Inspect},
    {"--trace", true, Run | Generate},
    {"--repeat", true, Run},
    {"--threads", true, Run | Train | Gradients | Generate},
    {"--offload-dir", true, Run | Train | Gradients | Generate},
    {"--nvme-io", true, Run | Train | Gradients | Generate},
    {"--collective-timeout", true, Run | Train | Gradients | Generate},
    {"--check", false, Run | Train | Gradients | Generate},
    {"--backend", true, Run | Train | Gradients | Generate},
    {"--stats", false, Run | Train | Generate},
    {"--output-dir", true, Gradients},
    {"--momentum", true, Train},
    {"--clip-grad-norm", true, Train},
    {"--checkpoint", true, Export},
    {"-o", true, Export},
    {"--output-file", true, Export},
    {"--model", true, Export},
    {"--external-data", false, Export},
    {"--dtype", true, Export},
    // Generation during training (generate's own flags are parsed by
    // GenerateOptions; these few are also train's).
    {"--generate-every", true, Train},
    {"--prompt", true, Train},
    {"--prompt-lengths", true, Train},
    {"--max-new-tokens", true, Train},
    {"--eos", true, Train},
};

constexpr std::pair<Command, const char *> kCommands[] = {
    {Run, "run"},       {Inspect, "inspect"},
    {Train, "train"},   {Gradients, "gradients"},
    {Export, "export"}, {Generate, "generate"}};

/// "'run', 'train' or 'gradients'".
std::string commandsOf(unsigned commands) {
  std::vector<std::string> names;
  for (auto [bit, name] : kCommands)
    if (commands & bit)
      names.push_back("'" + std::string(name) + "'");
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  return text;
}

/// Sets the option `flag` (known, allowed for the command) from `value`.
Status applyFlag(const std::string &flag, const std::string &value,
                 Arguments &arguments) {
  int64_t number = 0;
  if (flag == "--input")
    return parseBinding(flag, value, arguments.inputs);
  if (flag == "--output")
    return parseBinding(flag, value, arguments.outputs);
  if (flag == "--program")
    arguments.program = value;
  else if (flag == "--trace")
    arguments.tracePath = value;
  else if (flag == "--repeat") {
    arguments.repeatGiven = true;
    return parseCount(flag, value, 1, 1000000, arguments.repeat);
  } else if (flag == "--collective-timeout") {
    return parseFlagNumber(
        flag, value, {0, false, std::numeric_limits<double>::infinity(), true},
        arguments.collectiveTimeout);
  } else if (flag == "--threads") {
    Status status = parseCount(flag, value, 1, 1024, number);
    arguments.threads = static_cast<int>(number);
    return status;
  } else if (flag == "--offload-dir")
    arguments.offloadDir = value;
  else if (flag == "--nvme-io") {
    if (value != "buffered" && value != "direct")
      return failure("unknown --nvme-io '", value,
                     "'; expected buffered or direct");
    arguments.nvmeIo = value == "direct" ? NvmeIo::Direct : NvmeIo::Buffered;
  } else if (flag == "--check")
    arguments.check = true;
  else if (flag == "--backend")
    return parseBackendChoice(value, arguments.backend);
  else if (flag == "--stats")
    arguments.stats = true;
  else if (flag == "--output-dir")
    arguments.outputDir = value;
  else if (flag == "--momentum")
    return parseFlagNumber(flag, value, {0, false, 1, true},
                           arguments.momentum);
  else if (flag == "--clip-grad-norm")
    return parseFlagNumber(
        flag, value, {0, false, std::numeric_limits<double>::infinity(), true},
        arguments.clipGradNorm);
  else if (flag == "--checkpoint")
    arguments.checkpointPath = value;
  else if (flag == "-o" || flag == "--output-file")
    arguments.outputFile = value;
  else if (flag == "--model")
    arguments.modelPath = value;
  else if (flag == "--external-data")
    arguments.externalData = true;
  else if (flag == "--dtype") {
    if (value != "fp32" && value != "bf16")
      return failure("--dtype must be fp32 or bf16, got ", inQuotes(value));
    arguments.exportBf16 = value == "bf16";
  } else if (flag == "--generate-every")
    return parseFlagInteger(flag, value, 1, UINT64_MAX,
                            arguments.generateEvery);
  else if (flag == "--prompt")
    arguments.generate.promptPath = value;
  else if (flag == "--prompt-lengths")
    arguments.generate.promptLengthsPath = value;
  else if (flag == "--max-new-tokens")
    return parseFlagInteger(flag, value, 1, 1000000000,
                            arguments.generate.maxNewTokens);
  else if (flag == "--eos") {
    uint64_t eos = 0;
    ZR_RETURN_IF_ERROR(parseFlagInteger(flag, value, 0, INT64_MAX, eos));
    arguments.generate.eos = static_cast<int64_t>(eos);
  }
  return Status::success();
}

/// `train --generate-every S` needs its prompt, and the generation flags
/// need --generate-every: either alone would be silently ignored.
Status checkGenerationDuringTraining(const Arguments &arguments) {
  const generate::GenerateOptions &options = arguments.generate;
  bool generationFlags =
      !options.promptPath.empty() || !options.promptLengthsPath.empty() ||
      options.maxNewTokens != generate::GenerateOptions().maxNewTokens ||
      options.eos.has_value();
  if (arguments.generateEvery && options.promptPath.empty())
    return failure("--generate-every needs --prompt PROMPTS.npy (int64 "
                   "[batch, prompt length])");
  if (!arguments.generateEvery && generationFlags)
    return failure("--prompt, --prompt-lengths, --max-new-tokens and --eos "
                   "of 'train' need --generate-every S");
  return Status::success();
}

} // namespace

Status zplan::tooling::parseArguments(int argc, char **argv,
                                      Arguments &arguments) {
  std::vector<std::string> words(argv + 1, argv + argc);
  for (const std::string &word : words)
    if (word == "--help" || word == "-h") {
      arguments.help = true;
      return Status::success();
    }
  if (words.size() < 2 || words[0].rfind("--", 0) == 0)
    return failure("expected a plan and a command (run, train, gradients, "
                   "generate, export, inspect); see zrun --help");
  arguments.planPath = words[0];
  arguments.command = words[1];
  unsigned command = 0;
  for (auto [bit, name] : kCommands)
    if (arguments.command == name)
      command = bit;
  if (!command)
    return failure("unknown command ", inQuotes(arguments.command),
                   "; zrun runs 'run', 'train', 'gradients', 'generate', "
                   "'export' and 'inspect'");
  std::vector<std::string> trainWords;
  std::vector<std::string> generateWords;
  for (size_t i = 2; i < words.size(); ++i) {
    auto [flag, value, hasValue] = splitFlagWord(words[i]);
    const Flag *spec = nullptr;
    for (const Flag &candidate : kFlags)
      if (flag == candidate.name)
        spec = &candidate;
    if (!spec && command == Train) {
      // The training flags proper are runtime/train's (TrainOptions.h).
      trainWords.push_back(words[i]);
      continue;
    }
    if (command == Generate && !(spec && (spec->commands & Generate))) {
      // generate's own flags (GenerateOptions.h), --output among them
      // (one file, not run's NAME=FILE): all but the shared ones above.
      generateWords.push_back(words[i]);
      continue;
    }
    if (!spec)
      return failure("unknown option ", inQuotes(words[i]),
                     "; see zrun --help");
    if (!(spec->commands & command))
      return failure(flag, " is an option of ", commandsOf(spec->commands),
                     ", not of ", inQuotes(arguments.command));
    if (!spec->takesValue && hasValue)
      return failure(flag, " takes no value");
    if (spec->takesValue)
      ZR_RETURN_IF_ERROR(
          takeFlagValue(words, i, {flag, value, hasValue}, value));
    if (Status status = applyFlag(flag, value, arguments); !status.ok())
      return status;
  }
  if (command == Train) {
    ZR_RETURN_IF_ERROR(train::parseTrainOptions(trainWords, arguments.train));
    return checkGenerationDuringTraining(arguments);
  }
  if (command == Generate)
    return generate::parseGenerateOptions(generateWords, arguments.generate);
  if (command == Gradients && arguments.outputDir.empty())
    return failure("'gradients' needs --output-dir DIR");
  if (command == Export && arguments.checkpointPath.empty())
    return failure("'export' needs --checkpoint DIR");
  if (command == Export && arguments.outputFile.empty())
    return failure("'export' needs -o MODEL.onnx");
  return Status::success();
}
