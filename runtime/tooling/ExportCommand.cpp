//===- ExportCommand.cpp - zrun PLAN export: the trained model as ONNX ----===//
//
// Checks first, then reads: the plan, the checkpoint's manifest and rank
// file sizes, the original model and its initializers against the plan's
// parameters, and the output paths, all before the first shard is read;
// then each rank's shards, one rank at a time (memory: the whole model
// plus one rank's section), and every other region's checksum.
//
//===----------------------------------------------------------------------===//

#include "runtime/tooling/ExportCommand.h"

#include "onnx/onnx.pb.h"
#include "runtime/plan/PlanLoader.h"
#include "runtime/plan/PlanQueries.h"
#include "runtime/plan/ReadableFile.h"
#include "runtime/plan/Weights.h"
#include "runtime/session/Session.h"
#include "runtime/support/Bfloat16.h"
#include "runtime/support/ElementType.h"
#include "runtime/support/ShapeText.h"
#include "runtime/tooling/Diagnostics.h"
#include "runtime/tooling/Files.h"
#include "runtime/train/Checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <tuple>
#include <vector>

using namespace zplan;
using namespace zplan::tooling;
using plan::typeName;
namespace fs = std::filesystem;

namespace {

/// Initializers of at least this many bytes go to external data when the
/// model is too large to hold them inline (onnx.external_data_helper's
/// default size_threshold).
constexpr uint64_t kExternalThreshold = 1024;

std::string onnxTypeName(int32_t onnxType) {
  if (std::optional<ElementType> type = elementTypeFromOnnx(onnxType))
    return std::string(elementTypeInfo(*type).numpyName);
  return "ONNX type " + std::to_string(onnxType);
}

/// The directory `path` lies in ("." for a bare name).
std::string directoryOf(const std::string &path) {
  std::string directory = fs::path(path).parent_path().string();
  return directory.empty() ? "." : directory;
}

Status readModel(const std::string &path, onnx::ModelProto &model) {
  plan::ReadableFile file;
  ZR_RETURN_IF_ERROR(file.open(path, "model"));
  if (file.bytes() > static_cast<uint64_t>(std::numeric_limits<int>::max()))
    return failure(file.subject(), " is ", file.bytes(),
                   " bytes; an ONNX protobuf holds at most 2 GiB (larger "
                   "models keep their weights in external data)");
  std::string bytes(file.bytes(), '\0');
  ZR_RETURN_IF_ERROR(file.read(0, bytes.size(), bytes.data()));
  if (!model.ParseFromString(bytes) || !model.has_graph() ||
      model.opset_import_size() == 0 || model.ir_version() <= 0)
    return failure(file.subject(),
                   " is not a binary ONNX model (no graph, opset import or "
                   "IR version)");
  return Status::success();
}

/// An initializer's external data file, as the importer resolves it:
/// `location` relative to the model's directory.
Status externalLocation(const onnx::TensorProto &tensor,
                        const std::string &modelDirectory, std::string &path,
                        uint64_t &offset, int64_t &length) {
  std::string location;
  offset = 0;
  length = -1;
  for (const onnx::StringStringEntryProto &entry : tensor.external_data()) {
    if (entry.key() == "location") {
      location = entry.value();
      continue;
    }
    if (entry.key() != "offset" && entry.key() != "length")
      continue;
    char *end = nullptr;
    errno = 0;
    long long value = std::strtoll(entry.value().c_str(), &end, 10);
    if (entry.value().empty() || *end != '\0' || errno != 0 || value < 0)
      return failure("initializer ", inQuotes(tensor.name()),
                     ": external data ", entry.key(), " ",
                     inQuotes(entry.value()), " is not a non-negative integer");
    if (entry.key() == "offset")
      offset = static_cast<uint64_t>(value);
    else
      length = value;
  }
  if (location.empty())
    return failure("initializer ", inQuotes(tensor.name()),
                   " has external data without a location");
  path = (fs::path(modelDirectory) / location).string();
  return Status::success();
}

/// Replaces an externally stored initializer's data by its bytes, inline.
Status inlineExternalData(onnx::TensorProto &tensor,
                          const std::string &modelDirectory) {
  std::string path;
  uint64_t offset;
  int64_t length;
  ZR_RETURN_IF_ERROR(
      externalLocation(tensor, modelDirectory, path, offset, length));
  plan::ReadableFile file;
  ZR_RETURN_IF_ERROR(file.open(path, "external data file"));
  uint64_t count = length >= 0              ? static_cast<uint64_t>(length)
                   : offset <= file.bytes() ? file.bytes() - offset
                                            : 0;
  std::string bytes(count, '\0');
  if (Status status = file.read(offset, count, bytes.data()); !status.ok())
    return failure("initializer ", inQuotes(tensor.name()), ": ",
                   status.message());
  tensor.clear_external_data();
  tensor.clear_data_location();
  tensor.set_raw_data(std::move(bytes));
  return Status::success();
}

/// Drops every representation of a tensor's data.
void clearData(onnx::TensorProto &tensor) {
  tensor.clear_float_data();
  tensor.clear_int32_data();
  tensor.clear_string_data();
  tensor.clear_int64_data();
  tensor.clear_double_data();
  tensor.clear_uint64_data();
  tensor.clear_raw_data();
  tensor.clear_external_data();
  tensor.clear_data_location();
}

/// The f32 raw bytes `f32` rounded to bf16 (round to nearest even).
std::string roundedToBf16(const std::string &f32) {
  std::string bf16(f32.size() / 2, '\0');
  for (size_t i = 0; i < f32.size() / 4; ++i) {
    float value;
    std::memcpy(&value, f32.data() + 4 * i, 4);
    uint16_t bits = floatToBf16(value);
    std::memcpy(bf16.data() + 2 * i, &bits, 2);
  }
  return bf16;
}

/// What export checks up front: the plan, the checkpoint, the model with
/// each parameter's initializer, and the paths it reads.
struct ExportInputs {
  plan::Plan plan;
  train::CheckpointReader checkpoint;
  std::string modelPath;
  onnx::ModelProto model;
  /// Per plan parameter, its initializer in `model`.
  std::vector<onnx::TensorProto *> initializers;
  /// Every tied copy's initializer, with its parameter's index and whether
  /// it holds the parameter transposed.
  struct Copy {
    onnx::TensorProto *tensor;
    int parameter;
    bool transposed;
  };
  std::vector<Copy> copies;
  /// Every file export reads, with what it is, for the output checks.
  std::vector<std::pair<std::string, std::string>> readFiles;
};

Status loadInputs(const ExportOptions &options, ExportInputs &inputs) {
  plan::Plan &plan = inputs.plan;
  ZR_RETURN_IF_ERROR(session::openPlan(options.planPath, 0, plan));
  ZR_RETURN_IF_ERROR(train::CheckpointReader::open(
      options.checkpointPath, plan::planIdentity(plan),
      static_cast<int>(plan.world_size()), inputs.checkpoint));
  inputs.readFiles.push_back({options.planPath, "the plan"});
  inputs.readFiles.push_back(
      {plan::weightsPath(options.planPath, plan), "the plan's weights"});
  const std::string &directory = inputs.checkpoint.directory();
  inputs.readFiles.push_back(
      {directory + "/manifest.txt", "a checkpoint file"});
  for (int rank = 0; rank < inputs.checkpoint.worldSize(); ++rank)
    inputs.readFiles.push_back(
        {directory + "/rank-" + std::to_string(rank) + ".bin",
         "a checkpoint file"});
  // The root's `latest` is not read when a step directory is named, but it
  // is the checkpoint's all the same.
  inputs.readFiles.push_back(
      {(fs::path(directory).parent_path() / "latest").string(),
       "a checkpoint file"});

  inputs.modelPath = options.modelPath;
  if (inputs.modelPath.empty()) {
    if (plan.model().empty())
      return failure("the plan does not name the model it was compiled from; "
                     "pass --model ORIGINAL.onnx");
    inputs.modelPath =
        (fs::path(directoryOf(options.planPath)) / plan.model()).string();
    std::error_code error;
    if (!fs::exists(inputs.modelPath, error))
      return failure("model ", inQuotes(inputs.modelPath),
                     " (the model the plan was compiled from, looked for "
                     "beside the plan) does not exist; pass --model "
                     "ORIGINAL.onnx");
  }
  ZR_RETURN_IF_ERROR(readModel(inputs.modelPath, inputs.model));
  inputs.readFiles.push_back({inputs.modelPath, "the original model"});

  std::string modelDirectory = directoryOf(inputs.modelPath);
  std::map<std::string, onnx::TensorProto *> byName;
  for (onnx::TensorProto &tensor :
       *inputs.model.mutable_graph()->mutable_initializer()) {
    byName.emplace(tensor.name(), &tensor);
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
      std::string path;
      uint64_t offset;
      int64_t length;
      ZR_RETURN_IF_ERROR(
          externalLocation(tensor, modelDirectory, path, offset, length));
      inputs.readFiles.push_back({path, "the original model's external data"});
    }
  }
  std::string subject = "model " + inQuotes(inputs.modelPath);
  for (int index = 0; index < plan.parameters_size(); ++index) {
    const plan::Parameter &parameter = plan.parameters(index);
    std::vector<int64_t> planShape(parameter.shape().begin(),
                                   parameter.shape().end());
    std::vector<
        std::tuple<std::string, std::vector<int64_t>, std::string, bool>>
        wanted{{parameter.name(), planShape, "a parameter of the plan", false}};
    for (const plan::TiedCopy &copy : parameter.tied_copies()) {
      std::vector<int64_t> shape = planShape;
      if (copy.transposed())
        std::reverse(shape.begin(), shape.end());
      wanted.push_back(
          {copy.name(), shape,
           "a tied copy of the plan's parameter " + inQuotes(parameter.name()),
           copy.transposed()});
    }
    for (const auto &[name, shape, what, transposed] : wanted) {
      auto found = byName.find(name);
      if (found == byName.end())
        return failure(subject, " has no initializer ", inQuotes(name), ", ",
                       what,
                       ": export needs the model the plan was compiled from "
                       "(--model)");
      const onnx::TensorProto &tensor = *found->second;
      std::vector<int64_t> modelShape(tensor.dims().begin(),
                                      tensor.dims().end());
      std::optional<ElementType> modelType =
          elementTypeFromOnnx(tensor.data_type());
      // A bf16 export's initializer holds an f32 master (zcc --param-dtype
      // bf16 read it widened: compiler/import/WidenBf16.h); it is written
      // back rounded.
      bool sameType =
          modelType &&
          (elementTypeInfo(*modelType).plan ==
               static_cast<int32_t>(parameter.dtype()) ||
           (*modelType == ElementType::BF16 && parameter.dtype() == plan::F32));
      if (!sameType || shape != modelShape)
        return failure(
            subject, ": initializer ", inQuotes(name), " is ",
            onnxTypeName(tensor.data_type()), " ", shapeText(modelShape), "; ",
            name == parameter.name() ? "the plan's parameter"
                                     : "as " + what + ", it",
            " is ", typeName(parameter.dtype()), " ", shapeText(shape),
            ": export needs the model the plan was compiled from "
            "(--model)");
      if (name == parameter.name())
        inputs.initializers.push_back(found->second);
      else
        inputs.copies.push_back({found->second, index, transposed});
    }
  }
  return Status::success();
}

/// Fails when an output would land on a file export reads, or both outputs
/// on one file.
Status
checkOutputs(const std::vector<std::pair<std::string, std::string>> &outputs,
             const ExportInputs &inputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const auto &[path, what] = outputs[i];
    ZR_RETURN_IF_ERROR(checkWritable(path, what));
    FileIdentity identity = FileIdentity::of(path);
    for (const auto &[readPath, readWhat] : inputs.readFiles)
      if (identity.sameAs(FileIdentity::of(readPath)))
        return failure(what, " ", inQuotes(path), " would overwrite ", readWhat,
                       " ", inQuotes(readPath));
    for (size_t j = 0; j < i; ++j)
      if (identity.sameAs(FileIdentity::of(outputs[j].first)))
        return failure(what, " and ", outputs[j].second,
                       " are both written to ", inQuotes(path));
  }
  return Status::success();
}

/// Every parameter's trained bytes, put together from the ranks' shards and
/// rank 0's persistent groups; reads (and verifies) every other region.
Status gatherParameters(const ExportInputs &inputs,
                        std::vector<std::string> &values,
                        std::vector<std::string> &warnings) {
  const plan::Plan &plan = inputs.plan;
  const train::CheckpointReader &checkpoint = inputs.checkpoint;
  uint64_t worldSize = plan.world_size();
  values.assign(plan.parameters_size(), std::string());
  for (int index = 0; index < plan.parameters_size(); ++index) {
    const plan::Parameter &parameter = plan.parameters(index);
    values[index].assign(
        parameter.num_elements() * plan::dataTypeSize(parameter.dtype()), '\0');
  }
  // Where each group's data lies in its region, checked against the
  // region's size before any copy.
  auto checkGroup = [&](const plan::Group &group, uint64_t bytes,
                        uint64_t regionBytes) -> Status {
    if (group.weights_offset() > regionBytes ||
        bytes > regionBytes - group.weights_offset())
      return failure("group @", group.name(), " (", bytes, " bytes at offset ",
                     group.weights_offset(),
                     ") ends past its checkpoint "
                     "region of ",
                     regionBytes, " bytes");
    for (uint32_t index : group.parameters()) {
      const plan::Parameter &parameter = plan.parameters(index);
      if (parameter.offset_elements() > group.padded_elements() ||
          parameter.num_elements() >
              group.padded_elements() - parameter.offset_elements())
        return failure("parameter ", inQuotes(parameter.name()),
                       " ends past its group @", group.name());
    }
    return Status::success();
  };

  std::vector<uint8_t> section(plan.weights_bytes_per_rank());
  for (uint64_t rank = 0; rank < worldSize; ++rank) {
    int rankIndex = static_cast<int>(rank);
    ZR_RETURN_IF_ERROR(
        checkpoint.read(rankIndex, "shards", section.data(), section.size()));
    for (const plan::Group &group : plan.groups()) {
      if (group.persistent())
        continue;
      uint64_t elementBytes = plan::dataTypeSize(group.dtype());
      uint64_t shardElements = group.padded_elements() / worldSize;
      ZR_RETURN_IF_ERROR(
          checkGroup(group, shardElements * elementBytes, section.size()));
      const uint8_t *shard = section.data() + group.weights_offset();
      uint64_t first = rank * shardElements, last = first + shardElements;
      for (uint32_t index : group.parameters()) {
        const plan::Parameter &parameter = plan.parameters(index);
        uint64_t begin = std::max(parameter.offset_elements(), first);
        uint64_t end = std::min(
            parameter.offset_elements() + parameter.num_elements(), last);
        if (begin >= end)
          continue;
        std::memcpy(values[index].data() +
                        (begin - parameter.offset_elements()) * elementBytes,
                    shard + (begin - first) * elementBytes,
                    (end - begin) * elementBytes);
      }
    }
    for (const train::CheckpointRegionInfo &region :
         checkpoint.regions(rankIndex))
      if (region.name != "shards" && (rank != 0 || region.name != "persistent"))
        ZR_RETURN_IF_ERROR(checkpoint.verify(rankIndex, region.name));
  }
  section.clear();
  section.shrink_to_fit();

  // Persistent groups are whole on every rank and updated alike from the
  // same all-reduced gradient: rank 0's copy is written, and a rank whose
  // copy differs (its manifest checksum shows it) is reported.
  auto persistentSum = [&](int rank) -> std::optional<uint64_t> {
    for (const train::CheckpointRegionInfo &region : checkpoint.regions(rank))
      if (region.name == "persistent")
        return region.checksum;
    return std::nullopt;
  };
  for (int rank = 1; rank < checkpoint.worldSize(); ++rank)
    if (persistentSum(rank) != persistentSum(0))
      warnings.push_back("rank " + std::to_string(rank) +
                         "'s copy of the persistent groups differs from rank "
                         "0's in checkpoint " +
                         inQuotes(checkpoint.directory()) +
                         "; exported rank 0's");
  std::vector<uint8_t> persistent(plan::persistentWeightsBytes(plan));
  ZR_RETURN_IF_ERROR(
      checkpoint.read(0, "persistent", persistent.data(), persistent.size()));
  for (const plan::Group &group : plan.groups()) {
    if (!group.persistent())
      continue;
    uint64_t elementBytes = plan::dataTypeSize(group.dtype());
    ZR_RETURN_IF_ERROR(checkGroup(group, group.padded_elements() * elementBytes,
                                  persistent.size()));
    const uint8_t *data = persistent.data() + group.weights_offset();
    for (uint32_t index : group.parameters()) {
      const plan::Parameter &parameter = plan.parameters(index);
      std::memcpy(values[index].data(),
                  data + parameter.offset_elements() * elementBytes,
                  values[index].size());
    }
  }
  return Status::success();
}

/// --dtype bf16: each trained initializer (parameters and tied copies,
/// already holding their f32 values) becomes NAME/bf16 in BFLOAT16, read by
/// a Cast to FLOAT that produces NAME, placed first in the graph.
void storeInBf16(ExportInputs &inputs, ExportResult &result) {
  std::vector<onnx::TensorProto *> tensors = inputs.initializers;
  for (const ExportInputs::Copy &copy : inputs.copies)
    tensors.push_back(copy.tensor);
  onnx::GraphProto &graph = *inputs.model.mutable_graph();
  std::vector<onnx::NodeProto> casts;
  for (onnx::TensorProto *tensor : tensors) {
    if (tensor->data_type() != onnx::TensorProto::FLOAT)
      continue;
    std::string name = tensor->name();
    std::string bf16 = roundedToBf16(tensor->raw_data());
    result.parameterBytes -= tensor->raw_data().size() - bf16.size();
    tensor->set_raw_data(std::move(bf16));
    tensor->set_data_type(onnx::TensorProto::BFLOAT16);
    tensor->set_name(name + "/bf16");
    onnx::NodeProto cast;
    cast.set_name(name + "/to_float");
    cast.set_op_type("Cast");
    cast.add_input(name + "/bf16");
    cast.add_output(name);
    onnx::AttributeProto *to = cast.add_attribute();
    to->set_name("to");
    to->set_type(onnx::AttributeProto::INT);
    to->set_i(onnx::TensorProto::FLOAT);
    casts.push_back(std::move(cast));
    // An initializer also listed as a graph input (IR < 4) is produced by
    // its Cast now.
    auto *graphInputs = graph.mutable_input();
    graphInputs->erase(std::remove_if(graphInputs->begin(), graphInputs->end(),
                                      [&](const onnx::ValueInfoProto &input) {
                                        return input.name() == name;
                                      }),
                       graphInputs->end());
  }
  result.bf16Weights = casts.size();
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (onnx::NodeProto &cast : casts)
    *nodes.Add() = std::move(cast);
  for (onnx::NodeProto &node : *graph.mutable_node())
    *nodes.Add() = std::move(node);
  graph.mutable_node()->Swap(&nodes);
}

} // namespace

Status zplan::tooling::exportModel(const ExportOptions &options,
                                   ExportResult &result) {
  result = ExportResult();
  ExportInputs inputs;
  ZR_RETURN_IF_ERROR(loadInputs(options, inputs));

  // The data file's name is fixed before the model's size is known, so
  // that both outputs are checked before anything is read.
  std::string dataName =
      fs::path(options.outputPath).filename().string() + ".data";
  std::string dataPath =
      (fs::path(directoryOf(options.outputPath)) / dataName).string();
  ZR_RETURN_IF_ERROR(checkOutputs({{options.outputPath, "the exported model"},
                                   {dataPath, "its external data"}},
                                  inputs));

  std::vector<std::string> values;
  ZR_RETURN_IF_ERROR(gatherParameters(inputs, values, result.warnings));
  // A tied copy holds its trained parameter (transposed: element [j, i] of
  // the copy is the parameter's [i, j]), so both initializers stay equal.
  for (const ExportInputs::Copy &copy : inputs.copies) {
    const plan::Parameter &parameter = inputs.plan.parameters(copy.parameter);
    const std::string &trained = values[copy.parameter];
    std::string bytes = trained;
    if (copy.transposed) {
      uint64_t size = plan::dataTypeSize(parameter.dtype());
      uint64_t rows = static_cast<uint64_t>(parameter.shape(0));
      uint64_t columns = static_cast<uint64_t>(parameter.shape(1));
      for (uint64_t i = 0; i < rows; ++i)
        for (uint64_t j = 0; j < columns; ++j)
          std::memcpy(bytes.data() + (j * rows + i) * size,
                      trained.data() + (i * columns + j) * size, size);
    }
    clearData(*copy.tensor);
    if (copy.tensor->data_type() == onnx::TensorProto::BFLOAT16)
      bytes = roundedToBf16(bytes);
    result.parameterBytes += bytes.size();
    copy.tensor->set_raw_data(std::move(bytes));
  }
  result.tiedCopies = inputs.copies.size();
  for (size_t index = 0; index < values.size(); ++index) {
    onnx::TensorProto &tensor = *inputs.initializers[index];
    clearData(tensor);
    if (tensor.data_type() == onnx::TensorProto::BFLOAT16)
      values[index] = roundedToBf16(values[index]);
    result.parameterBytes += values[index].size();
    tensor.set_raw_data(std::move(values[index]));
  }
  if (options.bf16)
    storeInBf16(inputs, result);
  std::string modelDirectory = directoryOf(inputs.modelPath);
  for (onnx::TensorProto &tensor :
       *inputs.model.mutable_graph()->mutable_initializer())
    if (tensor.data_location() == onnx::TensorProto::EXTERNAL)
      ZR_RETURN_IF_ERROR(inlineExternalData(tensor, modelDirectory));

  StagedFiles files;
  if (options.externalData ||
      inputs.model.ByteSizeLong() > options.inlineLimit) {
    // ONNX's external data: each large initializer's bytes, back to back.
    std::string data;
    for (onnx::TensorProto &tensor :
         *inputs.model.mutable_graph()->mutable_initializer()) {
      if (tensor.raw_data().size() < kExternalThreshold)
        continue;
      uint64_t offset = data.size();
      data += tensor.raw_data();
      tensor.clear_raw_data();
      tensor.set_data_location(onnx::TensorProto::EXTERNAL);
      for (auto [key, value] :
           {std::pair<std::string, std::string>{"location", dataName},
            {"offset", std::to_string(offset)},
            {"length", std::to_string(data.size() - offset)}}) {
        onnx::StringStringEntryProto *entry = tensor.add_external_data();
        entry->set_key(key);
        entry->set_value(value);
      }
    }
    if (inputs.model.ByteSizeLong() > options.inlineLimit)
      return failure("the exported model is ", inputs.model.ByteSizeLong(),
                     " bytes even with its weights in external data; an "
                     "ONNX protobuf holds at most 2 GiB");
    ZR_RETURN_IF_ERROR(files.stage(dataPath, data, "external data"));
    result.dataPath = dataPath;
  }
  std::string bytes;
  if (!inputs.model.SerializeToString(&bytes))
    return failure("cannot serialize the exported model");
  ZR_RETURN_IF_ERROR(
      files.stage(options.outputPath, bytes, "the exported model"));
  ZR_RETURN_IF_ERROR(files.commitAll());

  result.checkpointDirectory = inputs.checkpoint.directory();
  result.step = inputs.checkpoint.step();
  result.modelPath = options.outputPath;
  result.parameters = static_cast<uint64_t>(inputs.plan.parameters_size());
  return Status::success();
}

int zplan::tooling::exportPlan(const Arguments &arguments) {
  ExportOptions options;
  options.planPath = arguments.planPath;
  options.checkpointPath = arguments.checkpointPath;
  options.outputPath = arguments.outputFile;
  options.modelPath = arguments.modelPath;
  options.externalData = arguments.externalData;
  options.bf16 = arguments.exportBf16;
  ExportResult result;
  if (Status status = exportModel(options, result); !status.ok()) {
    printError(status.message());
    return 1;
  }
  std::ostringstream line;
  line << "zrun: exported " << result.parameters << " parameters ("
       << result.parameterBytes << " bytes";
  if (result.tiedCopies)
    line << ", with " << result.tiedCopies << " tied "
         << (result.tiedCopies == 1 ? "copy" : "copies");
  line << ") of checkpoint " << inQuotes(result.checkpointDirectory)
       << " (step " << result.step << ") to " << inQuotes(result.modelPath);
  if (!result.dataPath.empty())
    line << ", weights in external data " << inQuotes(result.dataPath);
  if (result.bf16Weights)
    line << "; " << result.bf16Weights
         << " weights stored as bf16, each read through a Cast to float";
  for (const std::string &warning : result.warnings)
    line << "\nzrun: warning: " << warning;
  std::cout << line.str() << "\n" << std::flush;
  return 0;
}
