//===- OnnxSemantics.h - ONNX shape inference and constant folding --------===//
//
// The importer specialises a graph to static shapes: every value gets a known
// element type and shape, and every value computable at compile time (shape
// arithmetic, masks, rotary tables, ...) gets its contents. This file holds
// the ONNX operator semantics needed for that, independent of MLIR, so it can
// be unit tested on its own: `inferNode` takes what is known about a node's
// inputs and returns what is known about its outputs.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_IMPORT_ONNXSEMANTICS_H
#define ZPLAN_COMPILER_IMPORT_ONNXSEMANTICS_H

#include "dialects/ShapeFormatting.h"
#include "runtime/support/ElementType.h"

#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class AttributeProto;
class NodeProto;
class TensorProto;
} // namespace onnx

namespace zplan::onnx_import {

/// Element types come from the one table compiler, plan and runtime share;
/// diagnostics spell them by its `name` ("f32", "ui8", "i1").
using zplan::ElementType;

/// Number of elements of a static shape (1 for rank 0). Shapes reach here
/// validated by checkTensorSize; should one not be, the count saturates at
/// INT64_MAX rather than wrapping, so no caller sizes a buffer from a
/// wrapped product.
int64_t numElements(const std::vector<int64_t> &shape);

/// The element count of `shape`, or nullopt when a dimension is negative or
/// the product overflows int64.
std::optional<int64_t> checkedNumElements(const std::vector<int64_t> &shape);

/// Checks that a tensor of `shape` and `type` can exist: no negative
/// dimension, and an element count and byte size that fit int64. The message
/// names the shape and the problem; the caller says whose shape it is.
llvm::Error checkTensorSize(const std::vector<int64_t> &shape,
                            ElementType type);

/// A tensor whose contents are known at compile time. Floating-point contents
/// live in `floats` (already rounded to the element type's precision, so that
/// folding in double gives the values a float32 runtime would), everything
/// else (integers, bools as 0/1) in `ints`. Exactly one of the two vectors is
/// used, and its size equals numElements(shape).
struct HostTensor {
  ElementType type = ElementType::F32;
  std::vector<int64_t> shape;
  std::vector<double> floats;
  std::vector<int64_t> ints;

  int64_t numElements() const { return onnx_import::numElements(shape); }
  /// Element `i` (row-major) as double / as int64, whatever the storage.
  double getDouble(int64_t i) const;
  int64_t getInt(int64_t i) const;

  static HostTensor fromInts(ElementType type, std::vector<int64_t> shape,
                             std::vector<int64_t> values);
  static HostTensor fromFloats(ElementType type, std::vector<int64_t> shape,
                               std::vector<double> values);
};

/// An ONNX TensorProto.DataType by name and number, e.g. "FLOAT4E2M1 (23)",
/// for diagnostics.
std::string onnxDataTypeName(int32_t type);

/// Decodes a TensorProto whose data is inline (typed fields or raw_data).
/// For external data the caller reads the bytes and passes them as
/// `externalBytes`. The error names the tensor and what is wrong.
llvm::Error decodeTensor(const onnx::TensorProto &proto, HostTensor &out,
                         const std::string *externalBytes = nullptr);

/// Everything the importer knows about one ONNX value: its type, its static
/// shape, and its contents when they are known at compile time.
struct ValueInfo {
  ElementType type = ElementType::F32;
  std::vector<int64_t> shape;
  std::optional<HostTensor> value;

  bool isConstant() const { return value.has_value(); }
};

/// Upper bound on the number of elements a folded value may have. Bigger
/// results stay runtime values (their shape is still inferred).
constexpr int64_t kMaxFoldedElements = 1 << 22;

/// Upper bound on the elements of a tensor whose contents are decoded
/// (Constant nodes, non-parameter initializers). Decoded values take 8 bytes
/// each, so without a bound a model of int8 constants within protobuf's
/// 2 GiB would need 16 GiB; past it the model is refused, not the allocator.
constexpr int64_t kMaxDecodedElements = int64_t(1) << 27;

/// Infers the outputs of `node` (domain "" / "ai.onnx", at `opset`) from what
/// is known of its inputs. `inputs[i]` is null for an omitted optional input.
/// When every input the op reads is constant and the op is foldable, the
/// outputs carry values too. On success fills `outputs` (one entry per node
/// output); otherwise the error says what is wrong (for example "Reshape:
/// cannot reshape 2x16 into 3x-1"), without the node name, which the caller
/// adds. Attributes are checked first (checkAttributes), and every
/// output's size is checked (checkTensorSize) before it is returned.
llvm::Error inferNode(const onnx::NodeProto &node, int64_t opset,
                      const std::vector<const ValueInfo *> &inputs,
                      std::vector<ValueInfo> &outputs);

/// True when inferNode knows `opType`.
bool isKnownOp(const std::string &opType);
/// Every op type inferNode knows, sorted, for "supported ops are ..." errors.
const std::vector<std::string> &knownOps();

//===----------------------------------------------------------------------===//
// Attributes: one reader, with the types checked, for inference and importer.
//===----------------------------------------------------------------------===//

/// Checks every attribute of `node`: its name must be one the op has, and
/// its type the one ONNX gives it (transA is an INT, perm INTS, alpha a
/// FLOAT, ...). Mistyped attributes used to be read as their defaults;
/// onnxruntime refuses both. The message names the op type, the attribute,
/// and for a type mismatch both types.
llvm::Error checkAttributes(const onnx::NodeProto &node);

/// The attribute `name` of `node`, or null. Readers below assume
/// checkAttributes passed; a mistyped attribute reads as absent.
const onnx::AttributeProto *findAttribute(const onnx::NodeProto &node,
                                          const std::string &name);
int64_t getIntAttribute(const onnx::NodeProto &node, const std::string &name,
                        int64_t defaultValue);
double getFloatAttribute(const onnx::NodeProto &node, const std::string &name,
                         double defaultValue);
std::optional<std::vector<int64_t>>
getIntsAttribute(const onnx::NodeProto &node, const std::string &name);

//===----------------------------------------------------------------------===//
// Shape helpers shared by inference and by the importer.
//===----------------------------------------------------------------------===//

/// Multidirectional (numpy) broadcast of two shapes; nullopt if incompatible.
std::optional<std::vector<int64_t>>
broadcastShapes(const std::vector<int64_t> &a, const std::vector<int64_t> &b);

/// Normalises a possibly negative axis against `rank`; nullopt if out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Renders a shape as "2x16" ("scalar" for rank 0), as every compiler
/// message prints it.
using ::zplan::formatShape;

/// ScatterND (reduction "none") with known `indices`, for inference (which
/// folds it) and the importer (which lowers a run-time one). checkScatterND
/// checks the indices' depth, the updates' shape and every index's range; the
/// error names what is wrong, and the caller adds the op. The two below
/// assume it passed.
llvm::Error checkScatterND(const std::vector<int64_t> &dataShape,
                           const HostTensor &indices,
                           const std::vector<int64_t> &updatesShape);
/// True when the scatter writes every element of data exactly once, in
/// row-major order: the result is then the updates, reshaped. Costs no
/// memory, unlike the source map.
bool isInOrderScatterND(const std::vector<int64_t> &dataShape,
                        const HostTensor &indices);
/// For every element of data (row-major), the flat index of the `updates`
/// element written there, or -1 where data's own element stays; the last
/// write wins for a repeated index.
std::vector<int64_t> scatterNDSourceMap(const std::vector<int64_t> &dataShape,
                                        const HostTensor &indices);

/// GatherND with known `indices` [..., k] and `batchDims` b, on data whose
/// leading b + k dimensions are flattened into rows: the row each index
/// tuple picks, in the order of the output. The rest of data (its trailing
/// dimensions) comes along whole, so the op is a gather of rows, which is
/// how inference folds it and how the importer lowers a run-time one. The
/// error names what is wrong (depth, batch dimensions, an index out of
/// range); the caller adds the op.
llvm::Error gatherNDRows(const std::vector<int64_t> &dataShape,
                         const HostTensor &indices, int64_t batchDims,
                         std::vector<int64_t> &rows);

} // namespace zplan::onnx_import

#endif // ZPLAN_COMPILER_IMPORT_ONNXSEMANTICS_H
