//===- ZplanModule.cpp - the Python module zplan --------------------------===//
//
// zplan.Session(plan, ...) is runtime/session/Session.h on this rank, over
// numpy arrays (README, "Python"). A script that imports zplan runs under
// mpirun like zrun, one process per rank, and every rank makes the same
// calls in the same order: the methods are collective, as Session's are.
//
// MPI belongs to the module: importing it initializes MPI (through the
// MpiCommunicator zrun uses), and the interpreter's exit finalizes it, after
// every Session still open has been closed (a Session's executor threads
// must end before MPI does). An exception that no one catches aborts every
// rank (MPI_Abort) once Python has printed it: the other ranks may be
// waiting in a collective for the one that stopped.
//
// Failures raise RuntimeError with zrun's one-line message (the text after
// "zrun: error: "). Before anything runs, the ranks agree on the checks of
// a call (the arrays' types and shapes, the options, the plan), so that
// every rank raises the same error and the session stays usable. A failure
// while the programs run leaves the other ranks blocked in a collective;
// the module then does what zrun does: it prints the message and aborts
// every rank.
//
// Keyword options are zrun's flags spelled as Python names (grad_accum is
// --grad-accum), parsed by zrun's own parsers, so that a value means what
// it means to zrun, bit for bit (floats travel as repr(), which round-trips
// exactly), and is refused with zrun's message.
//
//===----------------------------------------------------------------------===//

#include "python/Arrays.h"

#include "runtime/comm/Agreement.h"
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/cpu/BlasCore.h"
#include "runtime/generate/GenerateOptions.h"
#include "runtime/plan/ReadableFile.h"
#include "runtime/session/Session.h"
#include "runtime/support/Checksum.h"
#include "runtime/support/ShapeText.h"
#include "runtime/train/Checkpoint.h"
#include "runtime/train/TrainOptions.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace py = pybind11;
using namespace zplan;
using namespace zplan::arrays;

namespace {

//===----------------------------------------------------------------------===//
// MPI's lifetime
//===----------------------------------------------------------------------===//

/// The world communicator, from import to the interpreter's exit.
std::unique_ptr<comm::MpiCommunicator> world;

comm::MpiCommunicator &theWorld() {
  if (!world)
    throw std::runtime_error("MPI is finalized (the interpreter is exiting)");
  return *world;
}

/// Raises RuntimeError with `status`'s message when it failed.
void raiseIfFailed(const Status &status) {
  if (!status.ok())
    throw std::runtime_error(status.message());
}

/// Collective: every rank raises the same error when any rank's `local`
/// failed (the lowest failing rank's message), so that none goes on alone
/// into the collectives of a call the others refused.
void agreeOrRaise(const Status &local) {
  raiseIfFailed(comm::agreeOnStatus(local, theWorld()));
}

/// Collective, first thing in every call that runs collectives: every rank
/// made the same call with the arguments that must agree, which `call`
/// spells ("generate(prompts [3, 4], max_new_tokens=8, temperature=0, ...)";
/// not the data each rank holds: prompts and ids differ per rank). A rank
/// that calls train_step while another calls generate, or asks for another
/// temperature, would otherwise go on into collectives that never match:
/// every rank raises RuntimeError naming each rank's call instead. One
/// all-gather of a hash; the calls' texts only on a mismatch.
void agreeOnCall(const std::string &call) {
  comm::MpiCommunicator &world = theWorld();
  int64_t mine = static_cast<int64_t>(checksum(call.data(), call.size()));
  std::vector<int64_t> hashes(static_cast<size_t>(world.size()));
  {
    comm::CollectiveContext named(
        world, "the ranks' agreement on the call " + call +
                   " (a rank that left, or is in another call, never "
                   "arrives)");
    raiseIfFailed(world.allGather(&mine, hashes.data(), 1, ElementType::I64));
  }
  if (std::all_of(hashes.begin(), hashes.end(),
                  [&](int64_t hash) { return hash == hashes[0]; }))
    return;
  std::vector<std::string> calls;
  raiseIfFailed(world.gatherText(call, calls));
  std::string message;
  if (world.rank() == 0) {
    message = "the ranks made different calls (every rank must make the "
              "same call with the same settings):";
    for (size_t r = 0; r < calls.size(); ++r)
      message +=
          (r ? "; rank " : " rank ") + std::to_string(r) + ": " + calls[r];
  }
  raiseIfFailed(comm::broadcastText(world, message, 0));
  throw std::runtime_error(message);
}

/// The text of an array argument for a call's signature: its shape, the
/// type of what is not an array, or "None".
std::string describeArgument(py::handle object) {
  if (object.is_none())
    return "None";
  py::array array = py::array::ensure(object);
  if (!array) {
    PyErr_Clear();
    return py::str(py::type::of(object)).cast<std::string>();
  }
  return shapeText(shapeOf(array));
}

/// repr(object), for a call's signature.
std::string reprOf(py::handle object) {
  return py::repr(object).cast<std::string>();
}

/// A failure while programs ran: the other ranks may be blocked in a
/// collective this rank will never join. Prints zrun's line and aborts them
/// all, as zrun's abortRun does.
[[noreturn]] void abortEveryRank(const Status &status) {
  std::fprintf(stderr, "zplan: error: %s\n", status.message().c_str());
  std::fflush(stderr);
  theWorld().abort(1);
}

//===----------------------------------------------------------------------===//
// Keyword options as zrun's flags
//===----------------------------------------------------------------------===//

/// "--grad-accum" for grad_accum.
std::string flagOf(const std::string &name) {
  std::string flag = "--" + name;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

/// `value` as zrun reads it on its command line: an integer (numpy's
/// too) as str(int(value)), any other real number as repr(float(value))
/// (the shortest text that reads back as the same double), a str as is.
/// Anything else (a bool, None, a list) fails naming `name`.
Status flagValue(const std::string &name, py::handle value, std::string &out) {
  py::module_ numbers = py::module_::import("numbers");
  py::object text;
  if (py::isinstance<py::str>(value))
    text = py::reinterpret_borrow<py::object>(value);
  else if (py::isinstance<py::bool_>(value) ||
           py::isinstance(value, py::module_::import("numpy").attr("bool_")))
    text = py::none();
  else if (py::isinstance(value, numbers.attr("Integral")))
    text = py::str(py::int_(py::reinterpret_borrow<py::object>(value)));
  else if (py::isinstance(value, numbers.attr("Real")))
    text = py::repr(py::float_(py::reinterpret_borrow<py::object>(value)));
  if (text.is_none())
    return failure(name, " takes a number or a word, got ",
                   py::repr(value).cast<std::string>());
  out = text.cast<std::string>();
  return Status::success();
}

/// The `zrun PLAN train` flags a Session takes: the optimizer's and the
/// schedule's. The others are about the data (a token file or rows),
/// checkpoints and logs, which the caller of train_step, save and load
/// holds.
const std::set<std::string> kNotSessionFlags = {
    "--data",       "--data-dtype", "--seed",   "--save",
    "--save-every", "--keep-last",  "--resume", "--log-every",
    "--loss-log",   "--labels",     "--shuffle"};

/// The training configuration `zrun PLAN train` would use with the flags
/// `options` names.
Status trainConfigOf(const py::dict &options, session::TrainConfig &config) {
  std::vector<std::string> words;
  for (auto [key, value] : options) {
    std::string name = py::str(key).cast<std::string>();
    std::string flag = flagOf(name);
    if (kNotSessionFlags.count(flag))
      return failure("Session takes the optimizer and schedule options of "
                     "'zrun PLAN train', not ",
                     inQuotes(name),
                     " (the script feeds the batches and saves)");
    std::string text;
    ZR_RETURN_IF_ERROR(flagValue(name, value, text));
    words.push_back(flag);
    words.push_back(text);
  }
  // The parser requires the token file, which a session never reads.
  words.push_back("--data");
  words.push_back("(none)");
  train::TrainOptions parsed;
  ZR_RETURN_IF_ERROR(train::parseTrainOptions(words, parsed));
  // zrun's --steps is how many steps it runs; a script decides that by
  // calling train_step. It still sets a cosine schedule's length.
  if (options.contains("steps") && parsed.lrDecay != train::LrDecay::Cosine)
    return failure("Session's steps only sets lr_schedule='cosine''s length "
                   "(the script takes its steps by calling train_step); "
                   "without it, leave steps out");
  config = session::trainConfigOf(parsed);
  return Status::success();
}

/// generate()'s keywords as zrun PLAN generate's flags.
struct GenerateKeywords {
  py::object maxNewTokens, eos, temperature, topK, topP, seed;
};

/// What `zrun PLAN generate` would do with these flags: --max-new-tokens
/// always, --eos unless None, and the sampling flags unless they hold zrun's
/// defaults (its parser refuses --top-k, --top-p and --seed given without a
/// --temperature above 0, so a default value must not count as given).
Status generateOptionsOf(const GenerateKeywords &keywords,
                         generate::GenerateOptions &parsed) {
  // The parser requires the files, which the arrays replace here.
  std::vector<std::string> words = {"--prompt", "(none)", "--output", "(none)"};
  auto add = [&](const char *name, const py::object &value) {
    std::string text;
    ZR_RETURN_IF_ERROR(flagValue(name, value, text));
    words.push_back(flagOf(name));
    words.push_back(text);
    return Status::success();
  };
  auto given = [](const py::object &value, const py::object &otherwise) {
    return !value.is_none() && !value.equal(otherwise);
  };
  if (!keywords.maxNewTokens.is_none())
    ZR_RETURN_IF_ERROR(add("max_new_tokens", keywords.maxNewTokens));
  if (!keywords.eos.is_none())
    ZR_RETURN_IF_ERROR(add("eos", keywords.eos));
  if (given(keywords.temperature, py::float_(0.0)))
    ZR_RETURN_IF_ERROR(add("temperature", keywords.temperature));
  if (given(keywords.topK, py::int_(0)))
    ZR_RETURN_IF_ERROR(add("top_k", keywords.topK));
  if (given(keywords.topP, py::float_(1.0)))
    ZR_RETURN_IF_ERROR(add("top_p", keywords.topP));
  if (given(keywords.seed, py::int_(0)))
    ZR_RETURN_IF_ERROR(add("seed", keywords.seed));
  return generate::parseGenerateOptions(words, parsed);
}

//===----------------------------------------------------------------------===//
// numpy arrays in
//===----------------------------------------------------------------------===//

/// "a, b, c".
std::string joined(const std::vector<std::string> &names) {
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : ", ") + name;
  return text;
}

//===----------------------------------------------------------------------===//
// zplan.gather_rows
//===----------------------------------------------------------------------===//

/// Every rank's `object` stacked along the first axis in rank order
/// ([N * rows, ...], the global batch of a data-parallel step): integer and
/// bool arrays as int64, others as float64. Collective; an array whose
/// shape or kind differs from rank 0's raises on every rank, naming both.
py::array gatherRows(py::handle object) {
  constexpr int kMaxDimensions = 8;
  py::array array = py::array::ensure(object);
  Status local = Status::success();
  if (!array)
    local = failure("gather_rows takes a numpy array");
  else if (array.ndim() < 1 || array.ndim() > kMaxDimensions)
    local = failure("gather_rows takes an array of 1 to ", kMaxDimensions,
                    " dimensions, got ", array.ndim());
  agreeOrRaise(local);
  char kind = array.dtype().kind();
  bool integer = kind == 'i' || kind == 'u' || kind == 'b';
  // Kind, rank and extents, compared with rank 0's before any data moves.
  std::array<int64_t, 2 + kMaxDimensions> mine{};
  mine[0] = integer;
  mine[1] = array.ndim();
  for (int d = 0; d < array.ndim(); ++d)
    mine[2 + d] = array.shape(d);
  comm::MpiCommunicator &communicator = theWorld();
  std::vector<int64_t> all(mine.size() * communicator.size());
  raiseIfFailed(communicator.allGather(mine.data(), all.data(), mine.size(),
                                       ElementType::I64));
  auto describe = [&](int rank) {
    const int64_t *row = all.data() + rank * mine.size();
    std::vector<int64_t> shape(row + 2, row + 2 + row[1]);
    return shapeText(shape) + (row[0] ? " integer" : " float");
  };
  // Every rank compares every rank's with rank 0's: all raise alike.
  for (int rank = 1; rank < communicator.size(); ++rank)
    if (!std::equal(all.begin(), all.begin() + mine.size(),
                    all.begin() + rank * mine.size()))
      throw std::runtime_error("gather_rows: rank " + std::to_string(rank) +
                               "'s array is " + describe(rank) + ", rank 0's " +
                               describe(0) +
                               "; every rank gives the same shape");
  std::vector<py::ssize_t> shape(array.shape(), array.shape() + array.ndim());
  shape[0] *= communicator.size();
  Status status = Status::success();
  auto gather = [&](auto typed, ElementType type) {
    using T = typename decltype(typed)::value_type;
    auto contiguous = py::array_t < T,
         py::array::c_style | py::array::forcecast > ::ensure(array);
    py::array_t<T, py::array::c_style> out(shape);
    {
      py::gil_scoped_release unlocked;
      status = communicator.allGather(contiguous.data(), out.mutable_data(),
                                      contiguous.size(), type);
    }
    if (!status.ok())
      abortEveryRank(status);
    return py::array(std::move(out));
  };
  return integer ? gather(std::vector<int64_t>(), ElementType::I64)
                 : gather(std::vector<double>(), ElementType::F64);
}

//===----------------------------------------------------------------------===//
// zplan.Session
//===----------------------------------------------------------------------===//

/// Session(...)'s call for agreeOnCall: the plan by its bytes' hash (two
/// ranks may read one plan at two paths), and every option, keywords
/// sorted.
std::string sessionCall(const std::string &planPath, bool check, int threads,
                        const std::string &backend,
                        const py::kwargs &trainOptions) {
  // ReadableFile refuses what Session::open refuses (a FIFO, a device),
  // which then raises on every rank alike.
  std::string plan = "(unreadable)";
  plan::ReadableFile file;
  std::string bytes;
  if (file.open(planPath, "plan").ok()) {
    bytes.resize(file.bytes());
    if (file.read(0, bytes.size(), bytes.data()).ok())
      plan = "plan " + checksumText(checksum(bytes.data(), bytes.size()));
  }
  std::map<std::string, std::string> options;
  for (auto [key, value] : trainOptions) {
    std::string text;
    std::string name = py::str(key).cast<std::string>();
    if (!flagValue(name, value, text).ok())
      text = reprOf(value);
    options[name] = text;
  }
  std::string call = "Session(" + plan +
                     ", check=" + (check ? "True" : "False") +
                     ", threads=" + std::to_string(threads) +
                     ", backend=" + reprOf(py::str(backend));
  for (const auto &[name, text] : options)
    call += ", " + name + "=" + text;
  return call + ")";
}

class PySession;
/// The sessions still open, closed before MPI is finalized.
std::set<PySession *> openSessions;

class PySession {
public:
  PySession(const std::string &planPath, bool check, int threads,
            const std::string &backend, const py::kwargs &trainOptions) {
    agreeOnCall(sessionCall(planPath, check, threads, backend, trainOptions));
    session::SessionOptions options;
    options.check = check;
    options.threads = threads;
    Status local = threads >= 1
                       ? trainConfigOf(trainOptions, options.train)
                       : failure("threads must be at least 1, got ", threads);
    if (local.ok())
      local = parseBackendChoice(backend, options.backend);
    if (local.ok())
      local = session::Session::open(planPath, theWorld(), options, session);
    agreeOrRaise(local);
    openSessions.insert(this);
  }
  ~PySession() { close(); }
  PySession(const PySession &) = delete;
  PySession &operator=(const PySession &) = delete;

  /// Frees the rank's memory; the session runs nothing more.
  void close() {
    session.reset();
    openSessions.erase(this);
  }

  /// The RL inputs of train_step (docs/rl.md), by their keyword names.
  struct RlInputs {
    py::handle completionMask, advantages, oldLogprobs, refLogprobs;
  };

  double trainStep(py::handle inputIds, py::handle labels, const RlInputs &rl) {
    session::Session &open = get();
    agreeOnCall("train_step(input_ids " + describeArgument(inputIds) +
                ", labels " + describeArgument(labels) + ", completion_mask " +
                describeArgument(rl.completionMask) + ", advantages " +
                describeArgument(rl.advantages) + ", old_logprobs " +
                describeArgument(rl.oldLogprobs) + ", ref_logprobs " +
                describeArgument(rl.refLogprobs) + ")");
    Int64Array ids, labelIds;
    Status local = open.checkCanTrain();
    if (local.ok())
      local = int64Array(inputIds, "input_ids", 2, ids);
    if (local.ok() && !labels.is_none())
      local = int64Array(labels, "labels", 2, labelIds);
    // Session::trainStep checks the shape too, but on this rank alone: a
    // rank whose batch it refused would leave the others in the step.
    std::vector<int64_t> expected =
        local.ok() ? open.trainInputShape() : std::vector<int64_t>();
    if (local.ok() && shapeOf(ids) != expected)
      local = failure("input_ids is ", shapeText(shapeOf(ids)),
                      ", the plan's micro-batch is ", shapeText(expected));
    bool hasLabels = !labels.is_none();
    if (local.ok() && hasLabels && shapeOf(labelIds) != expected)
      local = failure("labels is ", shapeText(shapeOf(labelIds)),
                      ", the plan's micro-batch is ", shapeText(expected));
    // The RL inputs: exactly the ones the step takes, each of its shape.
    FloatArray arrays[4];
    bool present[4] = {false, false, false, false};
    const std::pair<const char *, py::handle> given[4] = {
        {"completion_mask", rl.completionMask},
        {"advantages", rl.advantages},
        {"old_logprobs", rl.oldLogprobs},
        {"ref_logprobs", rl.refLogprobs}};
    std::vector<std::string> takes =
        local.ok() ? open.trainRlInputs() : std::vector<std::string>();
    for (int i = 0; i < 4 && local.ok(); ++i) {
      auto [name, object] = given[i];
      bool wanted = std::find(takes.begin(), takes.end(), name) != takes.end();
      if (wanted && object.is_none())
        local = failure("train_step needs ", name,
                        ": the plan's loss takes it (", joined(takes), ")");
      else if (!wanted && !object.is_none())
        local = failure("train_step got ", name,
                        ", which the plan's loss does not take",
                        takes.empty() ? std::string(" (it takes no RL inputs)")
                                      : " (it takes " + joined(takes) + ")");
      else if (wanted) {
        local = floatArray(object, name,
                           i == 1 ? open.trainAdvantagesShape() : expected,
                           arrays[i]);
        present[i] = true;
      }
    }
    session::TrainBatch batch;
    if (local.ok()) {
      batch.inputIds = ids.data();
      batch.shape = expected;
      batch.labels = hasLabels ? labelIds.data() : nullptr;
      const float **slots[4] = {&batch.completionMask, &batch.advantages,
                                &batch.oldLogprobs, &batch.refLogprobs};
      for (int i = 0; i < 4; ++i)
        if (present[i])
          *slots[i] = arrays[i].data();
      // Labels the step cannot read, ids outside the vocabulary: refused on
      // every rank before any of them starts the step.
      local = open.checkTrainBatch(batch);
    }
    agreeOrRaise(local);
    double stepLoss = 0;
    Status status = Status::success();
    {
      py::gil_scoped_release unlocked;
      status = open.trainStep(batch, stepLoss);
    }
    failIfStopped(status);
    loss = stepLoss;
    return stepLoss;
  }

  /// This rank's rows [B, T] -> their per-token log-probs [B, T] (and
  /// entropies), zero where `mask` is 0.
  py::object logprobs(py::handle inputIds, py::handle mask, bool entropy) {
    session::Session &open = get();
    agreeOnCall("logprobs(input_ids " + describeArgument(inputIds) + ", mask " +
                describeArgument(mask) +
                ", entropy=" + (entropy ? "True" : "False") + ")");
    Int64Array ids;
    FloatArray maskArray;
    bool masked = !mask.is_none();
    Status local = open.checkCanLogprobs();
    std::vector<int64_t> expected =
        local.ok() ? open.logprobsInputShape() : std::vector<int64_t>();
    if (local.ok())
      local = int64Array(inputIds, "input_ids", 2, ids);
    if (local.ok() && shapeOf(ids) != expected)
      local =
          failure("input_ids is ", shapeText(shapeOf(ids)),
                  "; the plan's logprobs program takes ", shapeText(expected));
    if (local.ok() && !mask.is_none())
      local = floatArray(mask, "mask", expected, maskArray);
    agreeOrRaise(local);

    session::LogprobsResult result;
    Status status = Status::success();
    {
      py::gil_scoped_release unlocked;
      status = open.logprobs(ids.data(), result);
    }
    failIfStopped(status);
    auto toArray = [&](std::vector<float> &values) {
      FloatArray out({static_cast<py::ssize_t>(expected[0]),
                      static_cast<py::ssize_t>(expected[1])});
      float *data = out.mutable_data();
      for (size_t i = 0; i < values.size(); ++i)
        data[i] = masked && maskArray.data()[i] == 0 ? 0.0f : values[i];
      return out;
    };
    FloatArray logp = toArray(result.logprobs);
    if (!entropy)
      return std::move(logp);
    if (result.entropy.empty())
      throw std::runtime_error("the plan's logprobs program has no entropy "
                               "output");
    return py::make_tuple(logp, toArray(result.entropy));
  }

  /// This rank's rows ([B, Pmax]) -> their tokens [B, M]; with `gather`,
  /// every rank's tokens [N * B, M] in rank order (docs/python.md).
  py::array generate(py::handle prompts, py::handle promptLengths,
                     const GenerateKeywords &keywords, bool gather) {
    session::Session &open = get();
    // Each rank's request is its own (data parallel: its prompts, and how
    // many tokens until which EOS, docs/generation.md section 8); the
    // sampling settings and the shapes agree.
    std::string call = "generate(prompts " + describeArgument(prompts) +
                       ", prompt_lengths " + describeArgument(promptLengths);
    const std::pair<const char *, const py::object *> settings[] = {
        {"temperature", &keywords.temperature},
        {"top_k", &keywords.topK},
        {"top_p", &keywords.topP},
        {"seed", &keywords.seed}};
    for (auto [name, value] : settings) {
      std::string text;
      if (value->is_none() || !flagValue(name, *value, text).ok())
        text = reprOf(*value);
      call += std::string(", ") + name + "=" + text;
    }
    agreeOnCall(call + ", gather=" + (gather ? "True" : "False") + ")");
    session::GenerateRequest request;
    Int64Array promptIds, lengths;
    generate::GenerateOptions options;
    Status local = open.checkCanGenerate();
    if (local.ok())
      local = int64Array(prompts, "prompts", 2, promptIds);
    if (local.ok() && !promptLengths.is_none())
      local = int64Array(promptLengths, "prompt_lengths", 1, lengths);
    if (local.ok())
      local = generateOptionsOf(keywords, options);
    if (local.ok()) {
      request.sampling = options.sampling;
      request.rows.prompts.assign(promptIds.data(),
                                  promptIds.data() + promptIds.size());
      request.rows.promptColumns = static_cast<uint64_t>(promptIds.shape(1));
      if (!promptLengths.is_none())
        request.rows.promptLengths.assign(lengths.data(),
                                          lengths.data() + lengths.size());
      request.rows.maxNewTokens = options.maxNewTokens;
      request.rows.eos = options.eos;
      // This rank's rows are rows [rank * B, (rank + 1) * B) of the global
      // batch: sampling draws and messages use the global row.
      request.rows.firstRow =
          static_cast<uint64_t>(open.rank()) * open.generationShape().batch;
      request.promptSource = "prompts";
      request.lengthsSource = "prompt_lengths";
      local = open.checkGenerateRequest(request);
    }
    agreeOrRaise(local);

    session::GenerateResult result;
    Status status = Status::success();
    {
      py::gil_scoped_release unlocked;
      status = open.generate(request, result);
    }
    failIfStopped(status);
    if (gather) {
      session::GenerateResult all;
      {
        py::gil_scoped_release unlocked;
        status = open.gatherRows(result, all);
      }
      if (!status.ok())
        abortEveryRank(status);
      result = std::move(all);
    }
    Int64Array tokens({static_cast<py::ssize_t>(result.batch),
                       static_cast<py::ssize_t>(result.maxNewTokens)});
    std::copy(result.tokens.begin(), result.tokens.end(),
              tokens.mutable_data());
    return std::move(tokens);
  }

  std::string save(const std::string &root) {
    session::Session &open = get();
    agreeOnCall("save(" + reprOf(py::str(root)) + ")");
    train::SaveResult result;
    Status status = Status::success();
    {
      py::gil_scoped_release unlocked;
      status = open.save(root, {}, {}, result);
    }
    failIfStopped(status);
    for (const std::string &warning : result.warnings)
      PyErr_WarnEx(PyExc_RuntimeWarning, warning.c_str(), 1);
    return result.directory;
  }

  void load(const std::string &path) {
    session::Session &open = get();
    agreeOnCall("load(" + reprOf(py::str(path)) + ")");
    Status status = Status::success();
    {
      py::gil_scoped_release unlocked;
      status = open.load(path);
    }
    failIfStopped(status);
    loss.reset();
  }

  std::optional<double> lastLoss() const { return loss; }

  py::object lastStep() {
    const session::WindowResult &window = get().lastWindow();
    if (!loss || !window.optimizerStepped)
      return py::none();
    py::dict step;
    step["step"] = window.step;
    step["loss"] = window.loss;
    step["lr"] = window.lr;
    return std::move(step);
  }

  py::dict memory() {
    session::MemoryFigures figures = get().memory();
    py::dict bytes;
    bytes["current_bytes"] = figures.currentBytes;
    bytes["peak_bytes"] = figures.peakBytes;
    bytes["generation_bytes"] = figures.generationBytes;
    bytes["training_state_bytes"] = figures.trainingStateBytes;
    bytes["arena_bytes"] = figures.arenaBytes;
    return bytes;
  }

  py::object generationShape() {
    session::Session &open = get();
    if (!open.canGenerate())
      return py::none();
    const generate::GenerationShape &shape = open.generationShape();
    py::dict figures;
    figures["batch"] = shape.batch;
    figures["prompt_len"] = shape.promptLength;
    figures["max_seq_len"] = shape.maxSequenceLength;
    figures["vocabulary"] = shape.vocabulary;
    return std::move(figures);
  }

  session::Session &get() {
    if (!session)
      throw std::runtime_error("the session is closed");
    return *session;
  }

private:
  /// After a call ran programs: a failure before any program ran was alike
  /// on every rank (the checks were agreed) and raises; one while programs
  /// ran aborts every rank.
  void failIfStopped(const Status &status) {
    if (status.ok())
      return;
    if (session->stopped())
      abortEveryRank(status);
    throw std::runtime_error(status.message());
  }

  std::unique_ptr<session::Session> session;
  /// The last train_step's loss; none before it, or after load().
  std::optional<double> loss;
};

/// atexit: closes the sessions still open, then finalizes MPI.
void finalizeWorld() {
  while (!openSessions.empty())
    (*openSessions.begin())->close();
  world.reset();
}

/// Wraps sys.excepthook: Python prints the exception, then every rank is
/// aborted.
void abortOnUncaughtExceptions() {
  py::module_ sys = py::module_::import("sys");
  py::object previous = sys.attr("excepthook");
  sys.attr("excepthook") = py::cpp_function(
      [previous](py::object type, py::object value, py::object traceback) {
        previous(type, value, traceback);
        if (world && world->size() > 1) {
          py::module_::import("sys").attr("stderr").attr("flush")();
          std::fprintf(stderr,
                       "zplan: rank %d: uncaught exception: aborting every "
                       "rank\n",
                       world->rank());
          std::fflush(stderr);
          world->abort(1);
        }
      });
}

} // namespace

PYBIND11_MODULE(zplan, module) {
  module.doc() = "zplan: run a zplan plan (training, generation) from Python "
                 "on the ranks mpirun launches";
  // OpenBLAS chose its kernels when this module loaded it; zrun re-executes
  // itself to choose better ones (runtime/cpu/BlasCore.h), a module cannot.
  if (std::string core = cpu::betterBlasCore(); !core.empty()) {
    std::string message = "OpenBLAS runs its " + cpu::blasCoreName() +
                          " kernels on this CPU, which can run its " + core +
                          " ones (2-3x faster; zrun uses those): set "
                          "OPENBLAS_CORETYPE=" +
                          core + " before starting Python";
    if (PyErr_WarnEx(PyExc_RuntimeWarning, message.c_str(), 1) != 0)
      throw pybind11::error_already_set();
  }

  std::unique_ptr<comm::MpiCommunicator> communicator;
  if (Status status =
          comm::MpiCommunicator::create(nullptr, nullptr, communicator);
      !status.ok())
    throw std::runtime_error("cannot start MPI: " + status.message());
  world = std::move(communicator);
  // zrun's default deadline: a rank that stops, hangs, or leaves a call the
  // others are in (an exception caught on one rank, an early exit) ends the
  // job instead of hanging it.
  theWorld().setCollectiveTimeout(comm::kDefaultCollectiveTimeout, "zplan");
  py::module_::import("atexit").attr("register")(
      py::cpp_function(&finalizeWorld));
  abortOnUncaughtExceptions();

  module.def("rank", [] { return theWorld().rank(); }, "This process's rank.");
  module.def(
      "world_size", [] { return theWorld().size(); },
      "The number of ranks mpirun launched.");
  module.def(
      "set_collective_timeout",
      [](double seconds) {
        if (!(seconds >= 0) || std::isinf(seconds))
          throw std::runtime_error(
              "set_collective_timeout takes seconds >= 0 (0: never), got " +
              py::repr(py::float_(seconds)).cast<std::string>());
        theWorld().setCollectiveTimeout(seconds, "zplan");
      },
      py::arg("seconds"),
      "The deadline of every collective from now on (zrun "
      "--collective-timeout; default 300 s, 0: never): past it the job "
      "ends, every rank non-zero, with one line naming the collective and "
      "the ranks that did not arrive.");
  module.def("gather_rows", &gatherRows, py::arg("array"),
             "Every rank's array (the same shape on every rank) stacked "
             "along the first axis in rank order: [world_size * rows, ...]. "
             "Integer and bool arrays come back as int64, others as "
             "float64. Collective: every rank calls it.");

  py::class_<PySession>(module, "Session",
                        "One rank's session over a plan written by zcc.")
      .def(py::init<const std::string &, bool, int, const std::string &,
                    const py::kwargs &>(),
           py::arg("plan"), py::arg("check") = false, py::arg("threads") = 1,
           py::arg("backend") = "auto",
           "Opens PLAN on this rank, on backend 'cpu', 'cuda' or 'auto' "
           "(zrun --backend). Keyword options are zrun train's "
           "optimizer and schedule flags: lr, warmup, lr_schedule, min_lr, "
           "steps, grad_accum, weight_decay, beta1, beta2, eps.")
      .def(
          "train_step",
          [](PySession &self, py::handle inputIds, py::handle labels,
             py::handle completionMask, py::handle advantages,
             py::handle oldLogprobs, py::handle refLogprobs) {
            return self.trainStep(
                inputIds, labels,
                {completionMask, advantages, oldLogprobs, refLogprobs});
          },
          py::arg("input_ids"), py::arg("labels") = py::none(),
          py::arg("completion_mask") = py::none(),
          py::arg("advantages") = py::none(),
          py::arg("old_logprobs") = py::none(),
          py::arg("ref_logprobs") = py::none(),
          "One micro-step on this rank's micro-batch (int [B, T]); the "
          "optimizer steps after every grad_accum-th. Returns the "
          "micro-step's loss over every rank (the mean over the ranks; for "
          "a token-sum loss, the sum over the ranks' completion tokens "
          "divided by their count). A plan compiled with --loss grpo or dpo "
          "takes completion_mask [B, T], and as compiled advantages [B] or "
          "[B, T], old_logprobs [B, T] and ref_logprobs [B, T] (per-token "
          "log-probs as logprobs() returns them); DPO's input_ids are the "
          "chosen rows, then the rejected ones (docs/rl.md).")
      .def("logprobs", &PySession::logprobs, py::arg("input_ids"),
           py::arg("mask") = py::none(), py::arg("entropy") = false,
           "Per-token log-probs of this rank's rows (int [B, T]): float32 "
           "[B, T], column t = log p(x_t | x_<t), column 0 = 0; zero where "
           "mask (same shape) is 0. With entropy=True, (logprobs, entropy). "
           "Needs a logprobs program: zcc --mode logprobs (a frozen "
           "reference) or --loss grpo / dpo. Collective.")
      .def_property_readonly(
          "train_rl_inputs",
          [](PySession &self) {
            return py::tuple(py::cast(self.get().trainRlInputs()));
          },
          "The RL inputs the plan's train step takes, by train_step's "
          "keyword names (completion_mask, advantages, old_logprobs, "
          "ref_logprobs); empty for causal-lm.")
      .def_property_readonly(
          "can_logprobs",
          [](PySession &self) { return self.get().canLogprobs(); })
      .def(
          "generate",
          [](PySession &self, py::handle prompts, py::handle promptLengths,
             py::object maxNewTokens, py::object eos, py::object temperature,
             py::object topK, py::object topP, py::object seed, bool gather) {
            return self.generate(
                prompts, promptLengths,
                {maxNewTokens, eos, temperature, topK, topP, seed}, gather);
          },
          py::arg("prompts"), py::arg("prompt_lengths") = py::none(),
          py::arg("max_new_tokens") = py::none(), py::arg("eos") = py::none(),
          py::arg("temperature") = 0.0, py::arg("top_k") = 0,
          py::arg("top_p") = 1.0, py::arg("seed") = 0,
          py::arg("gather") = false,
          "Generates from this rank's prompts (int [B, Pmax], rows "
          "[rank * B, (rank + 1) * B) of the global batch); returns int64 "
          "[B, max_new_tokens], EOS-filled after an EOS. Sampling draws "
          "depend on (seed, global row, step), not on the number of ranks. "
          "With gather=True every rank gets every rank's tokens, "
          "[world_size * B, max_new_tokens], in rank order.")
      .def("save", &PySession::save, py::arg("dir"),
           "Saves a checkpoint under DIR as step-<optimizer steps>; returns "
           "its directory.")
      .def("load", &PySession::load, py::arg("dir"),
           "Loads a checkpoint of this plan (a root or a step directory).")
      .def("close", &PySession::close, "Frees this rank's memory.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PySession &self, py::args) {
             self.close();
             return false;
           })
      .def_property_readonly("loss", &PySession::lastLoss,
                             "The last train_step's loss (None before).")
      .def_property_readonly(
          "last_step", &PySession::lastStep,
          "When the last train_step closed an accumulation window: the "
          "optimizer step's number, loss and lr as zrun train's --loss-log "
          "writes them; else None.")
      .def_property_readonly(
          "optimizer_steps",
          [](PySession &self) { return self.get().optimizerSteps(); })
      .def_property_readonly("train_input_shape",
                             [](PySession &self) {
                               std::vector<int64_t> shape =
                                   self.get().trainInputShape();
                               return py::tuple(py::cast(shape));
                             })
      .def_property_readonly("generation_shape", &PySession::generationShape,
                             "batch, prompt_len, max_seq_len and vocabulary "
                             "of the generation programs; None without them.")
      .def_property_readonly(
          "can_train", [](PySession &self) { return self.get().canTrain(); })
      .def_property_readonly(
          "can_generate",
          [](PySession &self) { return self.get().canGenerate(); })
      .def_property_readonly("rank",
                             [](PySession &self) { return self.get().rank(); })
      .def_property_readonly(
          "world_size", [](PySession &self) { return self.get().worldSize(); })
      .def_property_readonly("memory", &PySession::memory,
                             "This rank's bytes: current_bytes, peak_bytes, "
                             "generation_bytes, training_state_bytes, "
                             "arena_bytes.");
}
