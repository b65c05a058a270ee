//===- CachePositions.cpp - position_ids for a cache export without them --===//
//
// See CachePositions.h.
//
//===----------------------------------------------------------------------===//

#include "compiler/generate/CachePositions.h"

#include "compiler/Errors.h"

#include "onnx/onnx.pb.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"

#include <vector>

using namespace zplan;

namespace {

constexpr llvm::StringLiteral kPastPrefix = "past_key_values.";

/// The graph's values by name: the node that makes each.
using Producers = llvm::StringMap<const onnx::NodeProto *>;

/// True when `value` is computed from the shape of a past_key_values.*
/// input: a Shape of one, reached through at most `depth` nodes (the casts,
/// gathers, slices and arithmetic an exporter puts between).
bool readsPastLength(const Producers &producers, const std::string &value,
                     int depth, llvm::StringSet<> &seen) {
  auto it = producers.find(value);
  // Each value is looked at once, so a graph of wide nodes stays linear.
  if (it == producers.end() || depth == 0 || !seen.insert(value).second)
    return false;
  const onnx::NodeProto &node = *it->second;
  if (node.op_type() == "Shape")
    return node.input_size() > 0 &&
           llvm::StringRef(node.input(0)).starts_with(kPastPrefix);
  for (const std::string &input : node.input())
    if (!input.empty() && readsPastLength(producers, input, depth - 1, seen))
      return true;
  return false;
}

/// The Unsqueeze axes of `node` (attribute before opset 13, input after),
/// when given by an attribute or a Constant node.
std::vector<int64_t> unsqueezeAxes(const onnx::NodeProto &node,
                                   const Producers &producers) {
  for (const onnx::AttributeProto &attribute : node.attribute())
    if (attribute.name() == "axes")
      return {attribute.ints().begin(), attribute.ints().end()};
  if (node.input_size() < 2)
    return {};
  auto it = producers.find(node.input(1));
  if (it == producers.end() || it->second->op_type() != "Constant")
    return {};
  for (const onnx::AttributeProto &attribute : it->second->attribute()) {
    if (attribute.name() != "value" || !attribute.has_t())
      continue;
    const onnx::TensorProto &tensor = attribute.t();
    if (tensor.data_type() != onnx::TensorProto::INT64)
      return {};
    if (tensor.int64_data_size() > 0)
      return {tensor.int64_data().begin(), tensor.int64_data().end()};
    const std::string &raw = tensor.raw_data();
    std::vector<int64_t> axes(raw.size() / sizeof(int64_t));
    for (size_t i = 0; i < axes.size(); ++i)
      for (size_t b = 0; b < sizeof(int64_t); ++b)
        axes[i] |= int64_t(uint8_t(raw[i * sizeof(int64_t) + b])) << (8 * b);
    return axes;
  }
  return {};
}

} // namespace

llvm::Error zplan::derivePositionIds(onnx::ModelProto &model,
                                     std::string &derivedFrom) {
  onnx::GraphProto &graph = *model.mutable_graph();
  Producers producers;
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &output : node.output())
      producers[output] = &node;

  // cache_position: a Range from the past length; position_ids: its
  // Unsqueeze at axis 0.
  const onnx::NodeProto *unsqueeze = nullptr;
  for (const onnx::NodeProto &range : graph.node()) {
    llvm::StringSet<> seen;
    if (range.op_type() != "Range" || range.input_size() != 3 ||
        !readsPastLength(producers, range.input(0), 8, seen))
      continue;
    for (const onnx::NodeProto &node : graph.node())
      if (node.op_type() == "Unsqueeze" && node.input_size() > 0 &&
          node.input(0) == range.output(0) &&
          unsqueezeAxes(node, producers) == std::vector<int64_t>{0}) {
        unsqueeze = &node;
        break;
      }
    if (unsqueeze)
      break;
  }
  if (!unsqueeze)
    return makeError(
        "--mode generate: the export has past_key_values.* inputs but no "
        "'position_ids' input, and no position computation zcc can replace "
        "(a Range from the past length, unsqueezed at axis 0); export it "
        "with position_ids passed explicitly");
  derivedFrom =
      unsqueeze->name().empty() ? unsqueeze->output(0) : unsqueeze->name();
  std::string positions = unsqueeze->output(0);

  // Every reader of the derived positions reads the input instead.
  for (onnx::NodeProto &node : *graph.mutable_node())
    for (std::string &input : *node.mutable_input())
      if (input == positions)
        input = "position_ids";

  // position_ids: int64 [batch, seq], the dimensions input_ids declares.
  onnx::ValueInfoProto *input = graph.add_input();
  input->set_name("position_ids");
  onnx::TypeProto::Tensor *tensor =
      input->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::INT64);
  for (const onnx::ValueInfoProto &ids : graph.input())
    if (ids.name() == "input_ids")
      *tensor->mutable_shape() = ids.type().tensor_type().shape();
  return llvm::Error::success();
}
