//===- zcc.cpp - the zplan compiler driver --------------------------------===//
//
// Parses the command line of docs/design.md (section 4) into CompileOptions
// and calls compileModel(). Every failure is one `zcc: error: ...` line and
// exit 1: LLVM's own command-line messages (several lines, ending in "!",
// some written straight to stderr by the option that failed) are captured
// while parsing and reflowed into that form, and crashes go through the
// crash handler instead of LLVM's stack dump.
//
//===----------------------------------------------------------------------===//

#include "compiler/CrashHandler.h"
#include "compiler/Driver.h"
#include "compiler/DsConfig.h"
#include "compiler/import/OnnxImporter.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ManagedStatic.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <set>
#include <unistd.h>

using namespace llvm;

static cl::OptionCategory zccCategory("zcc options");
// Optional, so that a missing model is zcc's own message, not LLVM's.
static cl::opt<std::string> modelPath(cl::Positional, cl::Optional,
                                      cl::desc("<model.onnx>"),
                                      cl::cat(zccCategory));
static cl::opt<std::string> outputPath("o", cl::desc("Write the plan here"),
                                       cl::value_desc("OUT.zplan"),
                                       cl::cat(zccCategory));
static cl::opt<bool> noWeights(
    "no-weights",
    cl::desc("Compile from the graph alone: parameters' external data is not "
             "read and may be absent (no -o: the dumps only; ties are what "
             "the graph and --tie say)"),
    cl::cat(zccCategory));
static cl::opt<int64_t> worldSize("world-size", cl::init(1),
                                  cl::desc("Number of ranks (default 1)"),
                                  cl::cat(zccCategory));
// A string, parsed by zplan::parseCompileMode: a combined mode is a
// comma-separated list ("train,generate").
// The help text lists the spellings (set in main from the same table).
static cl::opt<std::string> mode("mode", cl::init("infer"),
                                 cl::cat(zccCategory));
// The enum options take their values from the spelling tables (added in
// main), so each spelling is written in one place.
static cl::list<std::string>
    inputShapes("input-shape", cl::desc("Bind an input's shape: NAME=2x16"),
                cl::value_desc("NAME=DIMS"), cl::cat(zccCategory));
static cl::opt<std::string>
    memoryBudget("memory-budget",
                 cl::desc("Per-rank memory budget, e.g. 16GiB"),
                 cl::cat(zccCategory));
static cl::opt<zplan::Hardware>
    hardware("hardware", cl::init(zplan::Hardware::Cpu),
             cl::desc("The hardware profile the plan is tuned for"),
             cl::cat(zccCategory));
static cl::opt<std::string> hardwareProfile(
    "hardware-profile",
    cl::desc("A calibrated profile (JSON, as bench/calibrate_cpu writes) "
             "whose numbers replace --hardware's"),
    cl::value_desc("FILE"), cl::cat(zccCategory));
static cl::list<std::string>
    dumps("dump", cl::CommaSeparated,
          cl::desc("Dumps to print: ir, schedule, memory, report"),
          cl::cat(zccCategory));
static cl::opt<std::string> dumpDir("dump-dir",
                                    cl::desc("Write dumps to files here"),
                                    cl::cat(zccCategory));
static cl::opt<zplan::SchedulePolicy>
    policy("policy", cl::init(zplan::SchedulePolicy::Default),
           cl::desc("How gathers are placed"), cl::cat(zccCategory));
static cl::opt<std::string>
    bucketSize("bucket-size", cl::init("32MiB"),
               cl::desc("Largest parameter group, e.g. 32MiB"),
               cl::cat(zccCategory));
static cl::opt<int64_t> persistenceThreshold(
    "persistence-threshold", cl::init(100000),
    cl::desc("Parameters with at most this many elements stay whole on every "
             "rank"),
    cl::cat(zccCategory));
static cl::opt<std::string> paramDtype(
    "param-dtype", cl::init("fp32"),
    cl::desc("Mixed precision: gather and compute parameters in fp32 or bf16 "
             "(over fp32 master shards; docs/mixed-precision.md)"),
    cl::cat(zccCategory));
static cl::opt<std::string>
    reduceDtype("reduce-dtype", cl::init("fp32"),
                cl::desc("Mixed precision: reduce gradients in fp32 or bf16 "
                         "(accumulated in fp32)"),
                cl::cat(zccCategory));
static cl::opt<std::string> computeDtype(
    "compute-dtype",
    cl::desc("Mixed precision: multiply matmul operands in fp32 or bf16 "
             "(accumulating in fp32; default: --param-dtype)"),
    cl::cat(zccCategory));
static cl::opt<int64_t> maxInFlight("max-in-flight", cl::init(2),
                                    cl::desc("Most gathers in flight at once"),
                                    cl::cat(zccCategory));
static cl::opt<std::string> maxInFlightBytes(
    "max-in-flight-bytes", cl::init("0"),
    cl::desc("Most bytes being gathered at once (0: no limit)"),
    cl::cat(zccCategory));
static cl::opt<bool> crossStepPrefetch(
    "cross-step-prefetch", cl::init(true),
    cl::desc("Generation: start decode's first streamed gather in the "
             "previous token's tail when that shortens a step (=false: off)"),
    cl::cat(zccCategory));

static cl::opt<std::string>
    loss("loss", cl::init("causal-lm"),
         cl::desc("--mode train: causal-lm (next-token cross-entropy on the "
                  "logits), output:NAME (the model's own scalar output), "
                  "grpo (TRL's clipped policy gradient) or dpo (TRL's "
                  "sigmoid DPO loss); see docs/rl.md"),
         cl::cat(zccCategory));
static cl::opt<std::string>
    lossType("loss-type", cl::init("dapo"),
             cl::desc("--loss grpo: TRL's loss_type, grpo (each sequence's "
                      "token mean, then the mean over sequences) or dapo "
                      "(the mean over all completion tokens of the step)"),
             cl::cat(zccCategory));
static cl::opt<double>
    beta("beta",
         cl::desc("--loss grpo: KL coefficient against the reference "
                  "log-probs (default 0: no ref_logprobs input); --loss dpo: "
                  "the temperature (default 0.1)"),
         cl::cat(zccCategory));
static cl::opt<double> epsilon("epsilon", cl::init(0.2),
                               cl::desc("--loss grpo: the ratio's lower clip "
                                        "is 1 - epsilon"),
                               cl::cat(zccCategory));
static cl::opt<double>
    epsilonHigh("epsilon-high",
                cl::desc("--loss grpo: the ratio's upper clip is 1 + "
                         "epsilon-high (default: --epsilon)"),
                cl::cat(zccCategory));
static cl::opt<bool> oldLogprobs(
    "old-logprobs",
    cl::desc("--loss grpo: the step takes the behaviour policy's per-token "
             "log-probs (old_logprobs); without, the ratio is 1 with "
             "logp's gradient (TRL with num_iterations 1)"),
    cl::cat(zccCategory));
static cl::opt<bool> biasCorrectionKl(
    "use-bias-correction-kl", cl::init(true),
    cl::desc("--loss grpo: multiply the KL term by the ratio, as TRL's "
             "use_bias_correction_kl (default on; =false: off)"),
    cl::cat(zccCategory));
static cl::opt<std::string> optimizer("optimizer", cl::init("adamw"),
                                      cl::desc("--mode train: adamw or sgd"),
                                      cl::cat(zccCategory));
static cl::opt<std::string> offloadOptimizer(
    "offload-optimizer", cl::init("none"),
    cl::desc("--mode train: where the optimizer's moments live: none (device "
             "memory), cpu (host memory) or nvme (a file per rank under "
             "--offload-dir); each group's are copied in for its update and "
             "back, or updated on the host: with cpu, and with nvme where the "
             "shards are in host memory (--host-optimizer-step; "
             "docs/offload.md)"),
    cl::cat(zccCategory));
static cl::opt<std::string> offloadParams(
    "offload-params", cl::init("none"),
    cl::desc("where the parameter shards live: none (device memory), cpu "
             "(host memory) or nvme (a file per rank under --offload-dir); "
             "each is copied in before the gather or update that reads it "
             "(docs/offload.md)"),
    cl::cat(zccCategory));
static cl::opt<std::string> offloadAuto(
    "offload", cl::init("none"),
    cl::desc("auto: offload only as much as --memory-budget requires, the "
             "optimizer moments first, then the parameter shards (nvme under "
             "--offload-dir, else cpu); none: as --offload-optimizer and "
             "--offload-params say (docs/offload.md)"),
    cl::cat(zccCategory));
static cl::opt<bool> hostOptimizerStep(
    "host-optimizer-step", cl::init(true),
    cl::desc("--mode train: run the update of each group whose moments live "
             "in host memory on the host, as ZeRO-Offload does (default; a "
             "shard on the device through a host master copy), and of each "
             "whose moments live in nvme and shard in host memory, over the "
             "moments staged through host memory; false stages them through "
             "the device and back instead (docs/offload.md)"),
    cl::cat(zccCategory));
static cl::opt<std::string> offloadDir(
    "offload-dir",
    cl::desc("--offload-optimizer nvme, --offload-params nvme: the directory "
             "of the ranks' tier files (zrun --offload-dir overrides it)"),
    cl::value_desc("DIR"), cl::cat(zccCategory));

static cl::list<std::string> ties(
    "tie",
    cl::desc("Train initializer COPY as PARAM itself (one parameter; "
             "transposed when its 2-D shape is PARAM's reversed), even when "
             "the tie rule would not"),
    cl::value_desc("COPY=PARAM"), cl::cat(zccCategory));
static cl::list<std::string>
    unties("untie",
           cl::desc("Keep initializer NAME a parameter of its own although "
                    "it equals another (the tie rule)"),
           cl::value_desc("NAME"), cl::cat(zccCategory));
static cl::list<std::string> freezePatterns(
    "freeze",
    cl::desc("--mode train: do not train the parameters whose initializer "
             "names match GLOB (sharded and gathered, no gradient or "
             "optimizer state)"),
    cl::value_desc("GLOB"), cl::cat(zccCategory));
static cl::list<std::string> trainPatterns(
    "train",
    cl::desc("--mode train: train the parameters matching GLOB although "
             "the buffer rule would freeze them"),
    cl::value_desc("GLOB"), cl::cat(zccCategory));

static cl::opt<int64_t>
    batch("batch",
          cl::desc("--mode generate: sequences generated together (B)"),
          cl::cat(zccCategory));
static cl::opt<int64_t> promptLength(
    "prompt-len",
    cl::desc("--mode generate: longest prompt in tokens (P; default L / 2)"),
    cl::cat(zccCategory));
static cl::opt<int64_t> maxSeqLength(
    "max-seq-len",
    cl::desc("--mode generate: prompt and generated tokens together (L, the "
             "KV cache length)"),
    cl::cat(zccCategory));

static cl::opt<std::string> dsConfig(
    "ds-config",
    cl::desc("A DeepSpeed config (ds_config.json): its ZeRO-3, bf16, batch "
             "and optimizer settings as these flags and as zrun train's "
             "defaults, each key named as mapped or ignored "
             "(docs/ds-config.md); a flag given as well must agree"),
    cl::value_desc("FILE"), cl::cat(zccCategory));

static cl::opt<bool>
    listOps("list-ops",
            cl::desc("Print the ONNX op types the importer takes, one a line: "
                     "NAME runtime|constant (constant: only when its inputs "
                     "are compile-time constants), and exit"),
            cl::cat(zccCategory));

static int fail(const Twine &message) {
  errs() << "zcc: error: " << message << "\n";
  return 1;
}

static int fail(Error error) { return fail(toString(std::move(error))); }

/// "a, b or c".
static std::string listAlternatives(ArrayRef<StringRef> names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i)
    text += (i == 0                  ? ""
             : i + 1 == names.size() ? " or "
                                     : ", ") +
            names[i].str();
  return text;
}

/// LLVM's "for the --hardware option: Cannot find option named 'tpu'" as
/// "unknown --hardware 'tpu'; expected h200, h100, a100 or cpu"; other
/// messages unchanged.
static std::string explainEnumError(StringRef message) {
  SmallVector<StringRef> hardwares, policies;
  for (const zplan::HardwareSpelling &spelling : zplan::getHardwareSpellings())
    hardwares.push_back(spelling.name);
  for (const zplan::SchedulePolicySpelling &spelling :
       zplan::getSchedulePolicySpellings())
    policies.push_back(spelling.name);
  for (auto [flag, names] : {std::make_pair("hardware", &hardwares),
                             std::make_pair("policy", &policies)}) {
    std::string prefix =
        (Twine("for the --") + flag + " option: Cannot find option named '")
            .str();
    if (!message.starts_with(prefix))
      continue;
    StringRef value = message.drop_front(prefix.size());
    value = value.take_until([](char c) { return c == '\''; });
    return (Twine("unknown --") + flag + " '" + value + "'; expected " +
            listAlternatives(*names))
        .str();
  }
  // "for the --world-size option: 'abc' value invalid for long argument"
  StringRef rest = message;
  if (rest.consume_front("for the ") && rest.contains(" option: '") &&
      rest.ends_with("' value invalid for long argument")) {
    auto [flag, value] = rest.split(" option: '");
    value.consume_back("' value invalid for long argument");
    return (flag + " expects an integer, got '" + value + "'").str();
  }
  return message.str();
}

/// Reflows what cl::ParseCommandLineOptions printed ("zcc: for the -x
/// option: ... !\nzcc: Did you mean ...?") into one line without the
/// repeated tool name.
static std::string reflowParseErrors(StringRef text) {
  SmallVector<StringRef> lines;
  text.split(lines, '\n', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  std::vector<std::string> parts;
  for (StringRef line : lines) {
    line = line.trim();
    line.consume_front("zcc:");
    line = line.trim().rtrim('!').rtrim('.');
    if (line.empty())
      continue;
    // Collapse the double spaces LLVM puts before "Try: 'zcc --help'".
    std::string part;
    for (char c : line)
      if (!(c == ' ' && !part.empty() && part.back() == ' '))
        part += c;
    parts.push_back(explainEnumError(part));
  }
  return join(parts, "; ");
}

/// Runs `body` with file descriptor 2 pointed at a temporary file and returns
/// what was written there: cl::Option::error() prints to llvm::errs()
/// whatever stream ParseCommandLineOptions is given.
static std::string captureStderr(function_ref<void()> body) {
  errs().flush();
  std::FILE *capture = std::tmpfile();
  int saved = capture ? dup(STDERR_FILENO) : -1;
  if (saved < 0 || dup2(fileno(capture), STDERR_FILENO) < 0) {
    if (saved >= 0)
      close(saved);
    if (capture)
      std::fclose(capture);
    body();
    return "";
  }
  body();
  errs().flush();
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string text;
  std::rewind(capture);
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), capture)) > 0;)
    text.append(buffer, n);
  std::fclose(capture);
  return text;
}

/// --ds-config into `options` (compiler/DsConfig.h), with what each key
/// became on stderr: "zcc: ds-config: KEY VALUE: --flag VALUE" for those
/// mapped, "zcc: warning: ds-config: ..." for those ignored.
static Error applyDsConfigFile(zplan::CompileOptions &options) {
  Expected<zplan::DsConfig> config =
      zplan::readDsConfig(dsConfig, options.worldSize);
  if (!config)
    return config.takeError();
  // Every flag given, by name: applyDsConfig looks up the ones it maps.
  std::set<std::string> given;
  for (const auto &entry : cl::getRegisteredOptions())
    if (entry.getValue()->getNumOccurrences())
      given.insert(entry.getKey().str());
  std::vector<std::string> warnings;
  if (Error error =
          zplan::applyDsConfig(*config, dsConfig, given, options, warnings))
    return error;
  for (const std::string &line : config->mapped)
    errs() << "zcc: ds-config: " << line << "\n";
  for (const std::string &line : warnings)
    errs() << "zcc: warning: ds-config: " << line << "\n";
  return Error::success();
}

int main(int argc, char **argv) {
  llvm_shutdown_obj shutdown;
  zplan::installCrashHandlers("zcc");
  zplan::setCrashPhase("reading the command line");

  static std::string modeHelp = "What the plan runs:";
  for (const zplan::CompileModeSpelling &spelling :
       zplan::getCompileModeSpellings())
    modeHelp +=
        (Twine(&spelling == zplan::getCompileModeSpellings().begin() ? " "
                                                                     : "; ") +
         spelling.name + " (" + spelling.description + ")")
            .str();
  mode.setDescription(modeHelp);
  for (const zplan::HardwareSpelling &spelling : zplan::getHardwareSpellings())
    hardware.getParser().addLiteralOption(spelling.name, spelling.hardware,
                                          spelling.description);
  for (const zplan::SchedulePolicySpelling &spelling :
       zplan::getSchedulePolicySpellings())
    policy.getParser().addLiteralOption(spelling.name, spelling.policy,
                                        spelling.description);
  cl::HideUnrelatedOptions(zccCategory);
  std::string parseErrors;
  raw_string_ostream parseErrorStream(parseErrors);
  bool parsed = false;
  std::string printed = captureStderr([&] {
    parsed = cl::ParseCommandLineOptions(
        argc, argv, "zcc: compile an ONNX model into a zplan plan\n",
        &parseErrorStream);
  });
  if (!parsed)
    return fail(reflowParseErrors(printed + parseErrors));
  errs() << printed;
  if (listOps) {
    for (const zplan::SupportedOpType &op : zplan::supportedOpTypes())
      outs() << op.name << (op.runtime ? " runtime\n" : " constant\n");
    return 0;
  }
  if (modelPath.empty())
    return fail("no model given; usage: zcc MODEL.onnx [-o OUT.zplan] "
                "[options] (see zcc --help)");

  zplan::CompileOptions options;
  options.modelPath = modelPath;
  options.outputPath = outputPath;
  options.worldSize = worldSize;
  Expected<zplan::CompileMode> parsedMode = zplan::parseCompileMode(mode);
  if (!parsedMode)
    return fail(parsedMode.takeError());
  options.mode = *parsedMode;
  options.hardware = hardware;
  options.hardwareProfile = hardwareProfile;
  options.dumps.insert(dumps.begin(), dumps.end());
  options.dumpDir = dumpDir;
  options.policy = policy;
  options.persistenceThreshold = persistenceThreshold;
  options.paramDtype = paramDtype;
  options.reduceDtype = reduceDtype;
  options.import.parameters.mastersFromBf16 = paramDtype == "bf16";
  options.import.readWeights = !noWeights;
  options.computeDtype =
      computeDtype.getNumOccurrences() ? computeDtype : paramDtype;
  options.maxInFlight = maxInFlight;
  options.crossStepPrefetch = crossStepPrefetch;
  options.loss = loss;
  options.optimizer = optimizer;
  options.offloadOptimizer = offloadOptimizer;
  options.offloadParams = offloadParams;
  options.offload = offloadAuto;
  options.offloadDir = offloadDir;
  options.hostOptimizerStep = hostOptimizerStep;
  options.lossType = lossType;
  if (beta.getNumOccurrences())
    options.beta = beta;
  options.epsilon = epsilon;
  if (epsilonHigh.getNumOccurrences())
    options.epsilonHigh = epsilonHigh;
  options.oldLogprobs = oldLogprobs;
  options.biasCorrectionKl = biasCorrectionKl;
  // Given or not is what validateOptions checks, so unset stays unset.
  for (auto [flag, target] :
       {std::make_pair(&batch, &options.batch),
        std::make_pair(&promptLength, &options.promptLength),
        std::make_pair(&maxSeqLength, &options.maxSeqLength)})
    if (flag->getNumOccurrences())
      *target = flag->getValue();
  if (!zplan::trains(options.mode) &&
      (loss.getNumOccurrences() || optimizer.getNumOccurrences()))
    return fail("--loss and --optimizer apply to --mode train only");
  bool rlFlags =
      lossType.getNumOccurrences() || beta.getNumOccurrences() ||
      epsilon.getNumOccurrences() || epsilonHigh.getNumOccurrences() ||
      oldLogprobs.getNumOccurrences() || biasCorrectionKl.getNumOccurrences();
  if (rlFlags && !zplan::isRlLoss(options.loss))
    return fail("--loss-type, --beta, --epsilon, --epsilon-high and "
                "--old-logprobs apply to --loss grpo or dpo only");
  if (options.loss == "dpo" &&
      (lossType.getNumOccurrences() || epsilon.getNumOccurrences() ||
       epsilonHigh.getNumOccurrences() || oldLogprobs.getNumOccurrences() ||
       biasCorrectionKl.getNumOccurrences()))
    return fail("--loss dpo takes --beta only (TRL's sigmoid loss); "
                "--loss-type, --epsilon, --epsilon-high and --old-logprobs "
                "are --loss grpo's");
  for (auto [flag, text, target] :
       {std::make_tuple("--bucket-size", &bucketSize, &options.bucketBytes),
        std::make_tuple("--max-in-flight-bytes", &maxInFlightBytes,
                        &options.maxInFlightBytes)}) {
    Expected<uint64_t> bytes = zplan::parseByteSize(*text);
    if (!bytes)
      return fail(Twine(flag) + ": " + toString(bytes.takeError()));
    *target = static_cast<int64_t>(*bytes);
  }
  if (Error error = zplan::parseInputShapes(inputShapes, options.import))
    return fail(std::move(error));
  if (Error error = zplan::parseParameterFlags(ties, unties, freezePatterns,
                                               trainPatterns, options.import))
    return fail(std::move(error));
  if (!memoryBudget.empty()) {
    Expected<uint64_t> bytes = zplan::parseByteSize(memoryBudget);
    if (!bytes)
      return fail("--memory-budget: " + toString(bytes.takeError()));
    options.memoryBudget = *bytes;
  }
  if (!dsConfig.empty())
    if (Error error = applyDsConfigFile(options))
      return fail(std::move(error));
  if (Error error = zplan::compileModel(options, outs(), errs()))
    return fail(std::move(error));
  return 0;
}
