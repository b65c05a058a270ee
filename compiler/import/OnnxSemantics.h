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

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace onnx {
class NodeProto;
class TensorProto;
} // namespace onnx

namespace zplan::onnx_import {

/// The element types the importer understands. Values map 1:1 to the ONNX
/// TensorProto::DataType enumerators they are named after.
enum class ElementType {
  Float32,
  Float16,
  BFloat16,
  Float64,
  Int64,
  Int32,
  Int8,
  UInt8,
  Bool,
};

/// Maps an ONNX TensorProto::DataType number; nullopt for unsupported types.
std::optional<ElementType> elementTypeFromOnnx(int32_t onnxDataType);
/// The ONNX TensorProto::DataType number of `type`.
int32_t elementTypeToOnnx(ElementType type);
/// Short name used in diagnostics and tests: "f32", "f16", "bf16", "f64",
/// "i64", "i32", "i8", "ui8", "i1".
const char *elementTypeName(ElementType type);
bool isFloatType(ElementType type);
/// Size of one element in bytes (Bool is one byte, as in ONNX raw data).
int64_t elementByteSize(ElementType type);

/// Number of elements of a static shape (1 for rank 0).
int64_t numElements(const std::vector<int64_t> &shape);

/// A tensor whose contents are known at compile time. Floating-point contents
/// live in `floats` (already rounded to the element type's precision, so that
/// folding in double gives the values a float32 runtime would), everything
/// else (integers, bools as 0/1) in `ints`. Exactly one of the two vectors is
/// used, and its size equals numElements(shape).
struct HostTensor {
  ElementType type = ElementType::Float32;
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

/// Decodes a TensorProto whose data is inline (typed fields or raw_data).
/// For external data the caller reads the bytes and passes them as
/// `externalBytes`. Returns an error message on failure, empty on success.
std::string decodeTensor(const onnx::TensorProto &proto, HostTensor &out,
                         const std::string *externalBytes = nullptr);

/// Everything the importer knows about one ONNX value: its type, its static
/// shape, and its contents when they are known at compile time.
struct ValueInfo {
  ElementType type = ElementType::Float32;
  std::vector<int64_t> shape;
  std::optional<HostTensor> value;

  bool isConstant() const { return value.has_value(); }
};

/// Upper bound on the number of elements a folded value may have. Bigger
/// results stay runtime values (their shape is still inferred).
constexpr int64_t kMaxFoldedElements = 1 << 22;

/// Infers the outputs of `node` (domain "" / "ai.onnx", at `opset`) from what
/// is known of its inputs. `inputs[i]` is null for an omitted optional input.
/// When every input the op reads is constant and the op is foldable, the
/// outputs carry values too. On success returns "" and fills `outputs` (one
/// entry per node output); otherwise returns a message saying what is wrong
/// (for example "Reshape: cannot reshape 2x16 into 3x-1"), without the node
/// name, which the caller adds.
std::string inferNode(const onnx::NodeProto &node, int64_t opset,
                      const std::vector<const ValueInfo *> &inputs,
                      std::vector<ValueInfo> &outputs);

/// True when inferNode knows `opType`.
bool isKnownOp(const std::string &opType);
/// Every op type inferNode knows, sorted, for "supported ops are ..." errors.
const std::vector<std::string> &knownOps();

//===----------------------------------------------------------------------===//
// Shape helpers shared by inference and by the importer.
//===----------------------------------------------------------------------===//

/// Multidirectional (numpy) broadcast of two shapes; nullopt if incompatible.
std::optional<std::vector<int64_t>>
broadcastShapes(const std::vector<int64_t> &a, const std::vector<int64_t> &b);

/// Normalises a possibly negative axis against `rank`; nullopt if out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Renders a shape as "2x16" ("scalar" for rank 0), as diagnostics print it.
std::string formatShape(const std::vector<int64_t> &shape);

} // namespace zplan::onnx_import

#endif // ZPLAN_COMPILER_IMPORT_ONNXSEMANTICS_H
