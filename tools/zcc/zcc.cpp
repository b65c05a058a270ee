//===- zcc.cpp - the zplan compiler driver --------------------------------===//
//
// Parses the command line of DESIGN.md into CompileOptions and calls
// compileModel(). Every failure is one `zcc: error: ...` line and exit 1.
//
//===----------------------------------------------------------------------===//

#include "compiler/Driver.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/WithColor.h"

using namespace llvm;

static cl::OptionCategory zccCategory("zcc options");
static cl::opt<std::string> modelPath(cl::Positional, cl::Required,
                                      cl::desc("<model.onnx>"),
                                      cl::cat(zccCategory));
static cl::opt<std::string> outputPath("o", cl::desc("Write the plan here"),
                                       cl::value_desc("OUT.zplan"),
                                       cl::cat(zccCategory));
static cl::opt<int64_t> worldSize("world-size", cl::init(1),
                                  cl::desc("Number of ranks (default 1)"),
                                  cl::cat(zccCategory));
static cl::opt<std::string> mode("mode", cl::init("infer"),
                                 cl::desc("infer | train | generate"),
                                 cl::cat(zccCategory));
static cl::list<std::string>
    inputShapes("input-shape", cl::desc("Bind an input's shape: NAME=2x16"),
                cl::value_desc("NAME=DIMS"), cl::cat(zccCategory));
static cl::opt<std::string>
    memoryBudget("memory-budget", cl::desc("Per-rank memory budget, e.g. 16GiB"),
                 cl::cat(zccCategory));
static cl::opt<std::string> hardware("hardware", cl::init("cpu"),
                                     cl::desc("h200 | h100 | a100 | cpu"),
                                     cl::cat(zccCategory));
static cl::list<std::string>
    dumps("dump", cl::CommaSeparated,
          cl::desc("Dumps to print: ir, schedule, memory, report"),
          cl::cat(zccCategory));
static cl::opt<std::string> dumpDir("dump-dir",
                                    cl::desc("Write dumps to files here"),
                                    cl::cat(zccCategory));

static cl::opt<std::string>
    policy("policy", cl::init("default"),
           cl::desc("default | jit (hook-based ZeRO-3 baseline)"),
           cl::cat(zccCategory));
static cl::opt<std::string>
    bucketSize("bucket-size", cl::init("32MiB"),
               cl::desc("Largest parameter group, e.g. 32MiB"),
               cl::cat(zccCategory));
static cl::opt<int64_t> persistenceThreshold(
    "persistence-threshold", cl::init(100000),
    cl::desc("Parameters with at most this many elements stay whole on every "
             "rank"),
    cl::cat(zccCategory));
static cl::opt<int64_t>
    maxInFlight("max-in-flight", cl::init(2),
                cl::desc("Most gathers in flight at once"),
                cl::cat(zccCategory));
static cl::opt<std::string>
    maxInFlightBytes("max-in-flight-bytes", cl::init("0"),
                     cl::desc("Most bytes being gathered at once (0: no limit)"),
                     cl::cat(zccCategory));

static int fail(Error error) {
  std::string message = toString(std::move(error));
  errs() << "zcc: error: " << message << "\n";
  return 1;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(zccCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "zcc: compile an ONNX model into a zplan plan\n");

  zplan::CompileOptions options;
  options.modelPath = modelPath;
  options.outputPath = outputPath;
  options.worldSize = worldSize;
  options.mode = mode;
  options.hardware = hardware;
  options.dumps.insert(dumps.begin(), dumps.end());
  options.dumpDir = dumpDir;
  options.policy = policy;
  options.persistenceThreshold = persistenceThreshold;
  options.maxInFlight = maxInFlight;
  for (auto [flag, text, target] :
       {std::make_tuple("--bucket-size", &bucketSize, &options.bucketBytes),
        std::make_tuple("--max-in-flight-bytes", &maxInFlightBytes,
                        &options.maxInFlightBytes)}) {
    Expected<uint64_t> bytes = zplan::parseByteSize(*text);
    if (!bytes)
      return fail(joinErrors(createStringError(inconvertibleErrorCode(),
                                               Twine(flag) + ":"),
                             bytes.takeError()));
    *target = static_cast<int64_t>(*bytes);
  }
  for (const std::string &shape : inputShapes)
    if (Error error = zplan::parseInputShape(shape, options.import))
      return fail(std::move(error));
  if (!memoryBudget.empty()) {
    Expected<uint64_t> bytes = zplan::parseByteSize(memoryBudget);
    if (!bytes)
      return fail(bytes.takeError());
    options.memoryBudget = *bytes;
  }
  if (Error error = zplan::compileModel(options, outs(), errs()))
    return fail(std::move(error));
  return 0;
}
