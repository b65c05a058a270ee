//===- Cli.cpp - zrun's command line --------------------------------------===//
//
// `run` goes through three phases, each ending in an agreement among the
// ranks (agree()): check (arguments, plan, inputs, outputs: no memory beyond
// the plan and the inputs), load (weights, arena, executor), and run. A
// failure in the first two phases is collected on every rank, the ranks
// agree that one of them failed, the lowest failing rank prints its one
// line, and every rank exits with status 1: no rank is left waiting and the
// message is not repeated N times. During the runs a rank cannot wait for
// the others to agree (they may be blocked in a collective it will never
// join), so an error there prints one line and aborts every rank.
//
//===----------------------------------------------------------------------===//

#include "runtime/Cli.h"

#include "runtime/Executor.h"
#include "runtime/Memory.h"
#include "runtime/Npy.h"
#include "runtime/Trace.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/plan/Opcodes.h"
#include "runtime/plan/PlanLoader.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>

using namespace zplan;
using plan::Status;
using plan::failure;
using plan::inQuotes;

namespace {



/// Prints `zrun: error: MESSAGE` as one write, so that lines from several
/// ranks (mpirun merges their stderr) do not interleave.
void printError(const std::string &message) {
  std::string line = "zrun: error: " + message + "\n";
  const char *cursor = line.data();
  size_t left = line.size();
  while (left > 0) {
    ssize_t written = ::write(STDERR_FILENO, cursor, left);
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return;
    cursor += written;
    left -= static_cast<size_t>(written);
  }
}

constexpr const char *kUsage =
    "usage: zrun PLAN run --input NAME=FILE.npy ... [--output NAME=FILE.npy "
    "...]\n"
    "                     [--program NAME] [--check] [--trace FILE.json]\n"
    "                     [--repeat K] [--stats] [--threads T]\n"
    "       zrun PLAN inspect [--program NAME]\n"
    "\n"
    "Runs a plan compiled by zcc on the ranks mpirun launches (one per\n"
    "rank of the plan's world size), or prints what a plan holds.\n"
    "\n"
    "  --input NAME=FILE.npy   bind program input NAME (one per input)\n"
    "  --output NAME=FILE.npy  write program output NAME (rank 0)\n"
    "  --program NAME          the program to run (default: the only one,\n"
    "                          else 'infer')\n"
    "  --check                 poison released copies, fail on reads after\n"
    "                          release, check shard checksums\n"
    "  --trace FILE.json       write a Chrome/Perfetto trace of all ranks\n"
    "  --repeat K              run K times; print the last run's time\n"
    "  --stats                 print each rank's peak RSS and memory layout\n"
    "  --threads T             BLAS threads per rank (default 1)\n";

//===----------------------------------------------------------------------===//
// Arguments
//===----------------------------------------------------------------------===//

struct Binding {
  std::string name;
  std::string path;
};

struct Arguments {
  std::string planPath;
  std::string command;
  std::vector<Binding> inputs;
  std::vector<Binding> outputs;
  std::string program;
  bool check = false;
  std::string tracePath;
  int64_t repeat = 1;
  bool repeatGiven = false;
  bool stats = false;
  int threads = 1;
  bool help = false;
};

Status parseCount(const std::string &flag, const std::string &text, int64_t low,
                  int64_t high, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || value < low || value > high)
    return failure(flag, " takes an integer from ", low, " to ", high, ", got ",
                   inQuotes(text));
  out = value;
  return Status::success();
}

Status parseBinding(const std::string &flag, const std::string &text,
                    std::vector<Binding> &bindings) {
  size_t equals = text.find('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == text.size())
    return failure(flag, " takes NAME=FILE.npy, got ", inQuotes(text));
  Binding binding{text.substr(0, equals), text.substr(equals + 1)};
  for (const Binding &other : bindings)
    if (other.name == binding.name)
      return failure(flag, " ", inQuotes(binding.name), " is given twice (",
                     inQuotes(other.path), " and ", inQuotes(binding.path),
                     ")");
  bindings.push_back(std::move(binding));
  return Status::success();
}

Status parseArguments(int argc, char **argv, Arguments &arguments) {
  std::vector<std::string> words(argv + 1, argv + argc);
  for (const std::string &word : words)
    if (word == "--help" || word == "-h") {
      arguments.help = true;
      return Status::success();
    }
  if (words.size() < 2 || words[0].rfind("--", 0) == 0)
    return failure("expected a plan and a command (run, inspect); see "
                   "zrun --help");
  arguments.planPath = words[0];
  arguments.command = words[1];
  if (arguments.command != "run" && arguments.command != "inspect")
    return failure("unknown command ", inQuotes(arguments.command),
                   "; zrun runs 'run' and 'inspect'");
  bool run = arguments.command == "run";
  for (size_t i = 2; i < words.size(); ++i) {
    std::string flag = words[i], value;
    bool hasValue = false;
    if (size_t equals = flag.find('=');
        flag.rfind("--", 0) == 0 && equals != std::string::npos) {
      value = flag.substr(equals + 1);
      flag = flag.substr(0, equals);
      hasValue = true;
    }
    auto takeValue = [&]() -> Status {
      if (hasValue)
        return Status::success();
      if (i + 1 >= words.size())
        return failure(flag, " needs a value");
      value = words[++i];
      return Status::success();
    };
    auto runOnly = [&]() -> Status {
      if (!run)
        return failure(flag, " is an option of 'run', not of ",
                       inQuotes(arguments.command));
      return Status::success();
    };
    bool takesValue = flag == "--input" || flag == "--output" ||
                      flag == "--program" || flag == "--trace" ||
                      flag == "--repeat" || flag == "--threads";
    bool isSwitch = flag == "--check" || flag == "--stats";
    if (!takesValue && !isSwitch)
      return failure("unknown option ", inQuotes(words[i]),
                     "; see zrun --help");
    if (isSwitch && hasValue)
      return failure(flag, " takes no value");
    if (flag != "--program")
      if (Status status = runOnly(); !status.ok())
        return status;
    if (takesValue)
      if (Status status = takeValue(); !status.ok())
        return status;
    Status status = Status::success();
    if (flag == "--input")
      status = parseBinding(flag, value, arguments.inputs);
    else if (flag == "--output")
      status = parseBinding(flag, value, arguments.outputs);
    else if (flag == "--program")
      arguments.program = value;
    else if (flag == "--trace")
      arguments.tracePath = value;
    else if (flag == "--repeat") {
      status = parseCount(flag, value, 1, 1000000, arguments.repeat);
      arguments.repeatGiven = true;
    } else if (flag == "--threads") {
      int64_t threads = 1;
      status = parseCount(flag, value, 1, 1024, threads);
      arguments.threads = static_cast<int>(threads);
    } else if (flag == "--check")
      arguments.check = true;
    else if (flag == "--stats")
      arguments.stats = true;
    if (!status.ok())
      return status;
  }
  if (run) {
    std::set<std::string> paths;
    for (const Binding &output : arguments.outputs)
      if (!paths.insert(output.path).second)
        return failure("two outputs are written to ", inQuotes(output.path));
    // The trace is written last: it would replace an output silently.
    for (const Binding &output : arguments.outputs)
      if (output.path == arguments.tracePath)
        return failure("the trace and output ", inQuotes(output.name),
                       " are both written to ", inQuotes(output.path));
  }
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Plan helpers
//===----------------------------------------------------------------------===//

/// NumPy's name for a type ("float32"), as users see it in their arrays.
std::string typeName(plan::DataType type) {
  switch (type) {
  case plan::F32:
    return "float32";
  case plan::F16:
    return "float16";
  case plan::BF16:
    return "bfloat16";
  case plan::F64:
    return "float64";
  case plan::I64:
    return "int64";
  case plan::I32:
    return "int32";
  case plan::I8:
    return "int8";
  case plan::U8:
    return "uint8";
  case plan::BOOL:
    return "bool";
  default:
    return "dtype " + std::to_string(static_cast<int>(type));
  }
}

std::vector<int64_t> shapeOf(const plan::Buffer &buffer) {
  return {buffer.shape().begin(), buffer.shape().end()};
}

uint64_t elementCount(const plan::Buffer &buffer) {
  uint64_t count = 1;
  for (int64_t dimension : buffer.shape())
    count *= static_cast<uint64_t>(dimension);
  return count;
}

const plan::Buffer &bufferOf(const plan::Plan &plan, uint32_t id) {
  return plan.buffers(id - 1);
}

Status selectProgram(const plan::Plan &plan, const std::string &name,
                     const plan::Program *&program) {
  std::string names;
  for (const plan::Program &candidate : plan.programs()) {
    if (candidate.name() == name ||
        (name.empty() &&
         (plan.programs_size() == 1 || candidate.name() == "infer"))) {
      program = &candidate;
      return Status::success();
    }
    names += (names.empty() ? "" : ", ") + inQuotes(candidate.name());
  }
  if (name.empty())
    return failure("the plan has several programs (", names,
                   "); choose one with --program");
  return failure("the plan has no program ", inQuotes(name), "; it has ",
                 names);
}

/// The directory a file would be created in exists and is writable.
Status checkWritable(const std::string &path, const std::string &what) {
  std::filesystem::path directory = std::filesystem::path(path).parent_path();
  if (directory.empty())
    directory = ".";
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error))
    return failure("cannot write ", what, " to ", inQuotes(path), ": ",
                   "directory ", inQuotes(directory.string()),
                   " does not exist");
  if (::access(directory.c_str(), W_OK) != 0)
    return failure("cannot write ", what, " to ", inQuotes(path), ": ",
                   "directory ", inQuotes(directory.string()), ": ",
                   std::strerror(errno));
  if (std::filesystem::is_directory(path, error))
    return failure("cannot write ", what, " to ", inQuotes(path),
                   ": it is a directory");
  return Status::success();
}

//===----------------------------------------------------------------------===//
// inspect
//===----------------------------------------------------------------------===//

std::string groupLabel(const plan::Plan &plan, uint32_t group) {
  const plan::Group &entry = plan.groups(group);
  std::string text = "@" + entry.name() + " [";
  for (int i = 0; i < entry.parameters_size(); ++i)
    text += (i ? ", " : "") + plan.parameters(entry.parameters(i)).name();
  return text + "]";
}

std::string bufferList(const plan::Plan &plan,
                       const google::protobuf::RepeatedField<uint32_t> &ids) {
  std::string text;
  for (int i = 0; i < ids.size(); ++i)
    text += (i ? ", " : "") + bufferOf(plan, ids[i]).name();
  return text;
}

void printInspect(const std::string &path, const plan::Plan &plan,
                  const plan::Program *only, std::ostream &os) {
  uint64_t persistent = plan::persistentWeightsBytes(plan);
  os << "plan: " << path << "\n"
     << "version: " << plan.version() << "\n"
     << "world size: " << plan.world_size() << "\n"
     << "hardware: " << plan.hardware() << "\n"
     << "model: " << plan.model() << "\n"
     << "memory budget: "
     << (plan.memory_budget() ? std::to_string(plan.memory_budget()) + " B"
                              : std::string("none"))
     << " per rank\n"
     << "arena: " << plan.arena_bytes() << " B per rank\n"
     << "weights: " << inQuotes(plan.weights_file()) << ", "
     << plan.weights_bytes_per_rank() << " B of shards per rank, " << persistent
     << " B persistent\n"
     << "parameters: " << plan.parameters_size()
     << ", buffers: " << plan.buffers_size()
     << ", constants: " << plan.constants_size() << "\n";

  os << "groups: " << plan.groups_size() << "\n";
  for (int index = 0; index < plan.groups_size(); ++index) {
    const plan::Group &group = plan.groups(index);
    uint64_t used = 0;
    for (uint32_t parameter : group.parameters())
      used += plan.parameters(parameter).num_elements();
    os << "  " << index << "  @" << group.name() << "  "
       << group.parameters_size() << " params, " << used << " elements, "
       << group.padded_elements() << " padded elements, "
       << typeName(group.dtype())
       << (group.persistent() ? ", persistent" : ", sharded") << ":";
    for (uint32_t parameter : group.parameters())
      os << " " << plan.parameters(parameter).name();
    os << "\n";
  }

  for (const plan::Program &program : plan.programs()) {
    if (only && &program != only)
      continue;
    std::map<std::string, int> byOp;
    int compute = 0, comm = 0;
    for (const plan::Instruction &instruction : program.instructions()) {
      ++byOp[plan::opcodeName(instruction.opcode())];
      ++(instruction.queue() == plan::COMM ? comm : compute);
    }
    os << "program " << inQuotes(program.name()) << ": "
       << program.instructions_size() << " instructions (" << compute
       << " compute, " << comm << " comm), peak arena "
       << program.peak_arena_bytes() << " B\n  ops:";
    const char *separator = " ";
    for (const auto &[op, count] : byOp) {
      os << separator << op << " " << count;
      separator = ", ";
    }
    os << "\n";
    for (const auto &[bindings, kind] :
         {std::pair{&program.inputs(), "input"},
          std::pair{&program.outputs(), "output"}})
      for (const plan::Binding &binding : *bindings) {
        const plan::Buffer &buffer = bufferOf(plan, binding.buffer());
        os << "  " << kind << " " << binding.name() << ": "
           << npy::shapeText(shapeOf(buffer)) << " " << typeName(buffer.dtype())
           << " (buffer " << binding.buffer() << ")\n";
      }
    for (const plan::Instruction &instruction : program.instructions()) {
      char head[64];
      std::snprintf(head, sizeof(head), "  %5u  %-8s %-14s",
                    instruction.index(),
                    instruction.queue() == plan::COMM ? "comm" : "compute",
                    plan::opcodeName(instruction.opcode()).c_str());
      os << head;
      const plan::Opcode opcode = instruction.opcode();
      const plan::OpcodeInfo *info = plan::findOpcode(opcode);
      bool namesGroup = info && info->showsGroup;
      if (namesGroup)
        os << groupLabel(plan, instruction.group());
      else
        os << bufferList(plan, instruction.operands()) << " -> "
           << bufferList(plan, instruction.results());
      if (instruction.wait_for_size() > 0) {
        os << "  wait_for";
        for (uint32_t waited : instruction.wait_for())
          os << " #" << waited;
      }
      // A compute result is named after its ONNX node: print the location
      // only when it says something the names do not.
      bool namedByResult = instruction.results_size() > 0 &&
                           bufferOf(plan, instruction.results(0)).name() ==
                               instruction.location();
      if (!instruction.location().empty() && !namedByResult &&
          !namesGroup)
        os << "  at " << instruction.location();
      os << "\n";
    }
  }
}

int inspect(const Arguments &arguments) {
  plan::Plan plan;
  Status status = plan::loadPlan(arguments.planPath, plan);
  if (status.ok())
    status = plan::validatePlan(plan, plan.world_size());
  const plan::Program *program = nullptr;
  if (status.ok() && !arguments.program.empty())
    status = selectProgram(plan, arguments.program, program);
  if (!status.ok()) {
    printError(status.message());
    return 1;
  }
  printInspect(arguments.planPath, plan, program, std::cout);
  return 0;
}

//===----------------------------------------------------------------------===//
// run
//===----------------------------------------------------------------------===//

/// One rank's state for `run`, built phase by phase.
struct RunSession {
  Arguments arguments;
  comm::Communicator *communicator = nullptr;
  plan::Plan plan;
  const plan::Program *program = nullptr;
  /// Input arrays, in the program's input order.
  std::vector<npy::Array> inputs;
  std::unique_ptr<RankMemory> memory;
  TraceRecorder trace;
  std::unique_ptr<Executor> executor;
};

std::string withRank(const comm::Communicator &communicator,
                     const std::string &message) {
  if (communicator.size() == 1 || message.rfind("[rank ", 0) == 0)
    return message;
  return "[rank " + std::to_string(communicator.rank()) + "] " + message;
}

/// Collective: every rank passes its status; true when all succeeded.
/// Otherwise the lowest failing rank prints its message (naming the rank
/// when not every rank failed) and every rank gets false.
bool agree(comm::Communicator &communicator, const Status &status) {
  int size = communicator.size();
  std::vector<float> failedRanks(size, 0.0f);
  failedRanks[communicator.rank()] = status.ok() ? 0.0f : 1.0f;
  if (Status reduced = communicator.allReduce(failedRanks.data(), size);
      !reduced.ok()) {
    printError(withRank(communicator, reduced.message()));
    communicator.abort(1);
  }
  int failures = 0, first = -1;
  for (int rank = 0; rank < size; ++rank)
    if (failedRanks[rank] != 0.0f) {
      ++failures;
      if (first < 0)
        first = rank;
    }
  if (failures == 0)
    return true;
  if (communicator.rank() == first)
    printError(failures == size ? status.message()
                                : withRank(communicator, status.message()));
  return false;
}

/// Prints one line and ends every rank: for errors a rank cannot agree on.
///
/// Every rank runs the same instructions, so a schedule bug or a failed
/// collective usually fails on all of them at once. Ranks other than 0 wait
/// a moment before they print, so that rank 0's abort usually ends them
/// first and the user reads one line, not N; a failure on one rank alone
/// still ends every rank within seconds.
[[noreturn]] void abortRun(comm::Communicator &communicator,
                           const Status &status) {
  if (communicator.rank() != 0)
    std::this_thread::sleep_for(std::chrono::seconds(1));
  printError(withRank(communicator, status.message()));
  communicator.abort(1);
  std::_Exit(1); // abort() does not return; say so to the compiler.
}

/// Phase 1: everything that can be checked before touching weights.
Status checkRun(RunSession &session) {
  const Arguments &arguments = session.arguments;
  comm::Communicator &communicator = *session.communicator;
  plan::Plan &plan = session.plan;
  if (Status status = plan::loadPlan(arguments.planPath, plan); !status.ok())
    return status;
  if (Status status =
          plan::validatePlan(plan, static_cast<uint32_t>(communicator.size()));
      !status.ok())
    return status;
  if (Status status = selectProgram(plan, arguments.program, session.program);
      !status.ok())
    return status;
  const plan::Program &program = *session.program;
  if (Status status = checkProgramSupported(plan, program); !status.ok())
    return status;

  auto namesOf = [](const auto &bindings) {
    std::string names;
    for (const plan::Binding &binding : bindings)
      names += (names.empty() ? "" : ", ") + inQuotes(binding.name());
    return names.empty() ? std::string("none") : names;
  };
  for (const Binding &input : arguments.inputs)
    if (std::none_of(program.inputs().begin(), program.inputs().end(),
                     [&](const plan::Binding &binding) {
                       return binding.name() == input.name;
                     }))
      return failure("--input ", inQuotes(input.name), " names no input of ",
                     "program ", inQuotes(program.name()),
                     " (its inputs: ", namesOf(program.inputs()), ")");
  for (const Binding &output : arguments.outputs)
    if (std::none_of(program.outputs().begin(), program.outputs().end(),
                     [&](const plan::Binding &binding) {
                       return binding.name() == output.name;
                     }))
      return failure("--output ", inQuotes(output.name), " names no output ",
                     "of program ", inQuotes(program.name()),
                     " (its outputs: ", namesOf(program.outputs()), ")");

  for (const plan::Binding &binding : program.inputs()) {
    auto given = std::find_if(
        arguments.inputs.begin(), arguments.inputs.end(),
        [&](const Binding &input) { return input.name == binding.name(); });
    const plan::Buffer &buffer = bufferOf(plan, binding.buffer());
    std::string expected =
        npy::shapeText(shapeOf(buffer)) + " " + typeName(buffer.dtype());
    if (given == arguments.inputs.end())
      return failure("missing --input ", binding.name(), "=FILE.npy for ",
                     "program input ", inQuotes(binding.name()), " (", expected,
                     ")");
    if (buffer.kind() != plan::Buffer::ARENA)
      return failure("program input ", inQuotes(binding.name()),
                     " is bound to buffer ", buffer.id(), " ",
                     inQuotes(buffer.name()),
                     ", which is not an arena buffer zrun can fill");
    npy::Array array;
    if (Status status = npy::readNpy(given->path, array); !status.ok())
      return failure("input ", inQuotes(binding.name()), ": ",
                     status.message());
    if (array.shape != shapeOf(buffer) || array.dtype != buffer.dtype())
      return failure("input ", inQuotes(binding.name()), " from ",
                     inQuotes(given->path), " is ", npy::shapeText(array.shape),
                     " ", typeName(array.dtype), ", the program expects ",
                     expected);
    session.inputs.push_back(std::move(array));
  }

  for (const plan::Binding &binding : program.outputs()) {
    const plan::Buffer &buffer = bufferOf(plan, binding.buffer());
    bool requested = std::any_of(
        arguments.outputs.begin(), arguments.outputs.end(),
        [&](const Binding &output) { return output.name == binding.name(); });
    if (requested && npy::descrOf(buffer.dtype()).empty())
      return failure("program output ", inQuotes(binding.name()), " is ",
                     typeName(buffer.dtype()),
                     ", which a .npy file cannot hold");
  }
  // Only rank 0 writes files; only it checks where they go.
  if (communicator.rank() == 0) {
    for (const Binding &output : arguments.outputs)
      if (Status status =
              checkWritable(output.path, "output " + inQuotes(output.name));
          !status.ok())
        return status;
    if (!arguments.tracePath.empty())
      if (Status status = checkWritable(arguments.tracePath, "the trace");
          !status.ok())
        return status;
  }
  return Status::success();
}

/// Phase 2: this rank's weights, the arena, the executor.
Status loadRun(RunSession &session) {
  comm::Communicator &communicator = *session.communicator;
  if (Status status = RankMemory::load(
          session.arguments.planPath, session.plan,
          static_cast<uint32_t>(communicator.rank()), session.memory);
      !status.ok())
    return status;
  ExecutorOptions options;
  options.check = session.arguments.check;
  if (!session.arguments.tracePath.empty()) {
    // Every run's events, up to a cap (24 MiB per queue) that a long
    // --repeat would pass; the rest are counted as dropped.
    constexpr int64_t kMaxEventsPerQueue = int64_t(1) << 20;
    session.trace.reserve(static_cast<size_t>(
        std::min(kMaxEventsPerQueue, session.program->instructions_size() *
                                         session.arguments.repeat)));
    options.trace = &session.trace;
  }
  return Executor::create(session.plan, *session.program, *session.memory,
                          communicator, options, session.executor);
}

/// Rank 0: stages every requested output, then commits them all.
Status writeOutputs(RunSession &session) {
  const plan::Program &program = *session.program;
  std::vector<npy::StagedFile> staged;
  for (const Binding &output : session.arguments.outputs) {
    const plan::Binding &binding =
        *std::find_if(program.outputs().begin(), program.outputs().end(),
                      [&](const plan::Binding &candidate) {
                        return candidate.name() == output.name;
                      });
    const plan::Buffer &buffer = bufferOf(session.plan, binding.buffer());
    uint64_t bytes = elementCount(buffer) * plan::dataTypeSize(buffer.dtype());
    std::string encoded;
    if (Status status = npy::encodeNpy(
            buffer.dtype(), shapeOf(buffer),
            session.memory->address(binding.buffer()), bytes, encoded);
        !status.ok())
      return failure("output ", inQuotes(output.name), ": ", status.message());
    staged.emplace_back();
    if (Status status = staged.back().stage(output.path, encoded,
                                            "output " + inQuotes(output.name) +
                                                " to " + inQuotes(output.path));
        !status.ok())
      return status;
  }
  for (npy::StagedFile &file : staged)
    if (Status status = file.commit(); !status.ok())
      return status;
  return Status::success();
}

int run(RunSession &session) {
  comm::Communicator &communicator = *session.communicator;
  if (!agree(communicator, checkRun(session)))
    return 1;
  if (!agree(communicator, loadRun(session)))
    return 1;

  const Arguments &arguments = session.arguments;
  const plan::Program &program = *session.program;
  cpu::setBlasThreads(arguments.threads);
  if (Status status = communicator.barrier(); !status.ok())
    abortRun(communicator, status);
  session.trace.setOrigin();
  double lastSeconds = 0;
  for (int64_t repetition = 0; repetition < arguments.repeat; ++repetition) {
    // Inputs live in the arena, which a run reuses once they are dead:
    // copy them in before every run.
    for (int i = 0; i < program.inputs_size(); ++i) {
      const npy::Array &input = session.inputs[i];
      std::memcpy(session.memory->address(program.inputs(i).buffer()),
                  input.data.data(), input.data.size());
    }
    if (repetition > 0)
      if (Status status = communicator.barrier(); !status.ok())
        abortRun(communicator, status);
    auto start = std::chrono::steady_clock::now();
    if (Status status = session.executor->run(); !status.ok())
      abortRun(communicator, status);
    lastSeconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  }
  session.executor.reset(); // Joins the comm thread.

  Status written =
      communicator.rank() == 0 ? writeOutputs(session) : Status::success();
  if (!agree(communicator, written))
    return 1;
  if (!arguments.tracePath.empty())
    if (Status status =
            writeTrace(communicator, arguments.tracePath,
                       session.trace.eventsJson(session.plan, program,
                                                communicator.rank()));
        !agree(communicator, status))
      return 1;
  if (arguments.repeatGiven && communicator.rank() == 0) {
    char line[64];
    std::snprintf(line, sizeof(line), "zrun: run time %.9f s\n", lastSeconds);
    std::cout << line << std::flush;
  }
  if (arguments.stats) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    std::ostringstream line;
    line << "zrun: rank " << communicator.rank() << ": peak RSS "
         << static_cast<uint64_t>(usage.ru_maxrss) * 1024 << " B, arena "
         << session.memory->arenaBytes() << " B, shards "
         << session.memory->shardBytes() << " B, persistent "
         << session.memory->persistentBytes() << " B\n";
    std::vector<std::string> lines;
    Status status = communicator.gatherText(line.str(), lines);
    if (!agree(communicator, status))
      return 1;
    for (const std::string &text : lines)
      std::cout << text;
    std::cout << std::flush;
  }
  return 0;
}

} // namespace

int zplan::zrunMain(int argc, char **argv) {
  Arguments arguments;
  Status parsed = parseArguments(argc, argv, arguments);
  if (arguments.help) {
    std::cout << kUsage;
    return 0;
  }
  // Only `run` starts MPI: a usage error outside it, or inspect, needs none,
  // unless mpirun launched this process. Then a rank that exits non-zero
  // gets mpirun to kill the others, perhaps before the one chosen to print
  // has printed: agree through MPI, as `run` does, so that the line is
  // printed before any rank exits.
  bool launchedByMpirun = std::getenv("OMPI_COMM_WORLD_RANK") != nullptr;
  if (!parsed.ok() && arguments.command != "run" && !launchedByMpirun) {
    printError(parsed.message());
    return 1;
  }
  if (parsed.ok() && arguments.command == "inspect")
    return inspect(arguments);

  std::unique_ptr<comm::MpiCommunicator> communicator;
  if (Status status = comm::MpiCommunicator::create(&argc, &argv, communicator);
      !status.ok()) {
    printError("cannot start MPI: " + status.message());
    return 1;
  }
  int exitCode;
  {
    RunSession session;
    session.arguments = std::move(arguments);
    session.communicator = communicator.get();
    // Usage errors go through agree() too, so that N ranks print one line.
    if (!agree(*communicator, parsed))
      exitCode = 1;
    else
      exitCode = run(session);
  }
  communicator.reset(); // MPI_Finalize, after the executor's thread ended.
  return exitCode;
}
