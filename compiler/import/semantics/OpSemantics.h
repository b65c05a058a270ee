//===- OpSemantics.h - What the op-family files of inferNode share --------===//
//
// Private to compiler/import/semantics: the NodeContext every `infer*`
// handler receives, the value rounding and strided-view helpers folding
// uses, the shared diagnostics, and one declaration per handler so that
// Core.cpp's dispatch table can name handlers defined in the op-family
// files (Shape, Indexing, Movement, Reshape, Elementwise, Linalg,
// Normalization). Every handler returns llvm::Error; a message starts with
// the op type, and inferNode's caller adds the node name.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_IMPORT_SEMANTICS_OPSEMANTICS_H
#define ZPLAN_COMPILER_IMPORT_SEMANTICS_OPSEMANTICS_H

#include "compiler/import/OnnxSemantics.h"

#include "onnx/onnx.pb.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"

#include <initializer_list>
#include <string>
#include <vector>

namespace zplan::onnx_import {

//===----------------------------------------------------------------------===//
// Value rounding (Core.cpp): folding computes in double / int64 and rounds
// every result to what the element type keeps.
//===----------------------------------------------------------------------===//

/// Rounds a computed value to what storing it in `type` keeps.
double roundToElementType(double value, ElementType type);
/// Wraps an integer to the width of `type`, as a runtime storing it would.
int64_t wrapToElementType(int64_t value, ElementType type);
/// Float-to-integer conversion: truncation toward zero; NaN and out-of-range
/// values saturate.
int64_t floatToElementType(double value, ElementType type);
/// Wrapping int64 arithmetic (signed overflow is undefined in C++, while a
/// runtime simply wraps).
int64_t wrappingAdd(int64_t a, int64_t b);
int64_t wrappingSub(int64_t a, int64_t b);
int64_t wrappingMul(int64_t a, int64_t b);

//===----------------------------------------------------------------------===//
// Strided views and small helpers (Core.cpp).
//===----------------------------------------------------------------------===//

/// Upper bound on multiply-adds spent folding one MatMul or Gemm, so that
/// folding a product of two large constants cannot stall the compiler.
constexpr int64_t kMaxFoldedMultiplyAdds = int64_t(1) << 28;

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape);
/// Source offsets read by a strided view of shape `viewShape`: view element
/// with multi-index i reads `base + sum(i[d] * strides[d])`. Broadcasting
/// (stride 0), transposition (permuted strides), slicing (scaled strides and
/// a base) and tiling (interleaved zero strides) are all such views.
std::vector<int64_t> stridedOffsets(const std::vector<int64_t> &viewShape,
                                    const std::vector<int64_t> &strides,
                                    int64_t base = 0);
/// Offsets into a tensor of `shape` read when broadcasting it to `target`;
/// `shape` must broadcast to `target`.
std::vector<int64_t> broadcastOffsets(const std::vector<int64_t> &shape,
                                      const std::vector<int64_t> &target);
/// The tensor of `shape` whose element i is element offsets[i] of `source`.
HostTensor pickElements(const HostTensor &source,
                        const std::vector<int64_t> &offsets,
                        std::vector<int64_t> shape);

/// A shape seen as (outer, length, inner) around one axis: the element at
/// (o, l, i) is at flat offset (o * length + l) * inner + i.
struct AxisExtents {
  int64_t outer = 1;
  int64_t length = 1;
  int64_t inner = 1;
};
AxisExtents extentsAround(const std::vector<int64_t> &shape, int64_t axis);

std::vector<int64_t> toInts(const HostTensor &tensor);
std::string formatInts(const std::vector<int64_t> &values);
/// An element type's diagnostic spelling, as a std::string for concatenation.
inline std::string typeName(ElementType type) {
  return std::string(elementTypeInfo(type).name);
}

//===----------------------------------------------------------------------===//
// Node context shared by the op handlers.
//===----------------------------------------------------------------------===//

/// What a handler sees of one node: its attributes, its inputs and the outputs
/// it fills. Every diagnostic goes through `error`, so each message starts
/// with the op type.
class NodeContext {
public:
  NodeContext(const onnx::NodeProto &node, int64_t opset,
              const std::vector<const ValueInfo *> &inputs,
              std::vector<ValueInfo> &outputs)
      : node(node), opset(opset), inputs(inputs), outputs(outputs) {}

  const std::string &opType() const { return node.op_type(); }
  int64_t getOpset() const { return opset; }
  size_t numInputs() const { return inputs.size(); }
  size_t numOutputs() const { return outputs.size(); }

  /// Input `index`, or null when it is omitted.
  const ValueInfo *input(size_t index) const {
    return index < inputs.size() ? inputs[index] : nullptr;
  }

  llvm::Error error(const llvm::Twine &message) const {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   opType() + ": " + message);
  }

  /// Attribute readers (Attributes.cpp): inferNode has checked the types.
  const onnx::AttributeProto *findAttribute(const std::string &name) const {
    return onnx_import::findAttribute(node, name);
  }
  int64_t getInt(const std::string &name, int64_t defaultValue) const {
    return getIntAttribute(node, name, defaultValue);
  }
  double getFloat(const std::string &name, double defaultValue) const {
    return getFloatAttribute(node, name, defaultValue);
  }
  std::optional<std::vector<int64_t>> getInts(const std::string &name) const {
    return getIntsAttribute(node, name);
  }

  /// Input `index` when the op cannot know its output shape without its
  /// contents; `what` names the input in the error otherwise.
  llvm::Error getConstantInput(size_t index, const std::string &what,
                               const HostTensor *&value) const {
    const ValueInfo *info = input(index);
    std::string where = what + " (input " + std::to_string(index) + ")";
    if (!info)
      return error(where + " is missing");
    if (!info->value)
      return error(where + " is not a compile-time constant");
    value = &*info->value;
    return llvm::Error::success();
  }

  /// True when every given input (null ones are omitted and skipped) is
  /// constant and a result of `resultShape` is small enough to fold.
  bool canFold(const std::vector<int64_t> &resultShape,
               std::initializer_list<const ValueInfo *> used) const {
    for (const ValueInfo *info : used)
      if (info && !info->value)
        return false;
    return numElements(resultShape) <= kMaxFoldedElements;
  }
  bool allInputsConstant() const {
    for (const ValueInfo *info : inputs)
      if (info && !info->value)
        return false;
    return true;
  }

  /// Records output `index` as a runtime value. Outputs the node does not
  /// name are ignored, so handlers need not check optional outputs.
  void setOutput(size_t index, ElementType type, std::vector<int64_t> shape) {
    if (index >= outputs.size())
      return;
    outputs[index] = ValueInfo{type, std::move(shape), std::nullopt};
  }
  /// Records output `index` with known contents, dropping the contents when
  /// they exceed kMaxFoldedElements.
  void setOutput(size_t index, HostTensor value) {
    if (index >= outputs.size())
      return;
    ValueInfo info{value.type, value.shape, std::nullopt};
    if (value.numElements() <= kMaxFoldedElements)
      info.value = std::move(value);
    outputs[index] = std::move(info);
  }
  void setOutput(size_t index, ValueInfo info) {
    if (index < outputs.size())
      outputs[index] = std::move(info);
  }

private:
  const onnx::NodeProto &node;
  int64_t opset;
  const std::vector<const ValueInfo *> &inputs;
  std::vector<ValueInfo> &outputs;
};

//===----------------------------------------------------------------------===//
// Shared diagnostics (Diagnostics.cpp).
//===----------------------------------------------------------------------===//

llvm::Error axisError(const NodeContext &ctx, int64_t axis, int64_t rank);
/// The node's `axis` attribute (`defaultAxis` when absent), made
/// non-negative for `rank`; axisError() when it is out of range.
llvm::Expected<int64_t> readAxis(const NodeContext &ctx, int64_t rank,
                                 int64_t defaultAxis);
llvm::Error broadcastError(const NodeContext &ctx,
                           const std::vector<int64_t> &a,
                           const std::vector<int64_t> &b);
llvm::Error typeMismatchError(const NodeContext &ctx, ElementType a,
                              ElementType b);
/// Broadcasts the shapes of all `values` together, reporting the first pair
/// that does not broadcast.
llvm::Error broadcastAll(const NodeContext &ctx,
                         const std::vector<const ValueInfo *> &values,
                         std::vector<int64_t> &result);
/// Reads a constant scalar (or one-element) integer input.
llvm::Error getConstantScalar(const NodeContext &ctx, size_t index,
                              const std::string &what, int64_t &value);
/// `a + b` / `a * b` for shape arithmetic; an error naming `what` when the
/// result overflows int64.
llvm::Error checkedAdd(const NodeContext &ctx, int64_t a, int64_t b,
                       const std::string &what, int64_t &result);
llvm::Error checkedMul(const NodeContext &ctx, int64_t a, int64_t b,
                       const std::string &what, int64_t &result);

//===----------------------------------------------------------------------===//
// Handlers, one per op family; Core.cpp's table maps op types to them.
//===----------------------------------------------------------------------===//

// Shape.cpp: constants and shape queries.
llvm::Error inferConstant(NodeContext &ctx);
llvm::Error inferIdentity(NodeContext &ctx);
llvm::Error inferShape(NodeContext &ctx);
llvm::Error inferSize(NodeContext &ctx);
llvm::Error inferConstantOfShape(NodeContext &ctx);
llvm::Error inferRange(NodeContext &ctx);
// Indexing.cpp.
llvm::Error inferGather(NodeContext &ctx);
llvm::Error inferGatherElements(NodeContext &ctx);
llvm::Error inferSlice(NodeContext &ctx);
llvm::Error inferTrilu(NodeContext &ctx);
llvm::Error inferScatterND(NodeContext &ctx);
llvm::Error inferGatherND(NodeContext &ctx);
// Movement.cpp.
llvm::Error inferConcat(NodeContext &ctx);
llvm::Error inferSplit(NodeContext &ctx);
llvm::Error inferExpand(NodeContext &ctx);
llvm::Error inferTile(NodeContext &ctx);
llvm::Error inferTranspose(NodeContext &ctx);
llvm::Error inferWhere(NodeContext &ctx);
// Reshape.cpp.
llvm::Error inferReshape(NodeContext &ctx);
llvm::Error inferFlatten(NodeContext &ctx);
llvm::Error inferUnsqueeze(NodeContext &ctx);
llvm::Error inferSqueeze(NodeContext &ctx);
// Elementwise.cpp.
llvm::Error inferBinaryArithmetic(NodeContext &ctx);
llvm::Error inferVariadicMinMaxSum(NodeContext &ctx);
llvm::Error inferComparison(NodeContext &ctx);
llvm::Error inferLogical(NodeContext &ctx);
llvm::Error inferUnaryMath(NodeContext &ctx);
llvm::Error inferFloatClassification(NodeContext &ctx);
llvm::Error inferGelu(NodeContext &ctx);
llvm::Error inferCast(NodeContext &ctx);
// Linalg.cpp.
llvm::Error inferMatMul(NodeContext &ctx);
llvm::Error inferGemm(NodeContext &ctx);
// Normalization.cpp: reductions and normalisations.
llvm::Error inferReduce(NodeContext &ctx);
llvm::Error inferArgMinMax(NodeContext &ctx);
llvm::Error inferSoftmax(NodeContext &ctx);
llvm::Error inferLayerNormalization(NodeContext &ctx);
llvm::Error inferCumSum(NodeContext &ctx);
llvm::Error inferDropout(NodeContext &ctx);

} // namespace zplan::onnx_import

#endif // ZPLAN_COMPILER_IMPORT_SEMANTICS_OPSEMANTICS_H
