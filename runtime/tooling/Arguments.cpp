//===- Arguments.cpp - zrun's command line, parsed
//-------------------------===//

#include "runtime/tooling/Arguments.h"

#include <cerrno>
#include <cstdlib>

using namespace zplan;
using namespace zplan::tooling;

const char *const zplan::tooling::kUsage =
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

namespace {

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
  return Status::success();
}
