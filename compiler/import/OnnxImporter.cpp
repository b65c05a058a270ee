//===- OnnxImporter.cpp - ONNX model -> nn dialect ------------------------===//
//
// One importer class: a builder, the ONNX-name -> value table, `loc()` made
// from the ONNX node name, and one handler per op type in a table. Every
// node first goes through `inferNode` (OnnxSemantics.h), which gives its
// static output shapes and, when its inputs are known, its output values;
// such nodes produce no IR at all. Only the nodes that depend on run-time
// data reach a handler. Tests: test/import/*.onnxtxt and
// test/import/models.test.
//
//===----------------------------------------------------------------------===//

#include "compiler/import/OnnxImporter.h"

#include "compiler/Errors.h"
#include "compiler/import/OnnxSemantics.h"
#include "compiler/import/WidenBf16.h"
#include "dialects/ShapeFormatting.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/zero/ZeroDialect.h"
#include "onnx/onnx.pb.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <limits>

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

using namespace mlir;
using namespace zplan;
using namespace zplan::onnx_import;

namespace {

/// IR versions read: 3 (ONNX 1.1) is the oldest with opset imports as they
/// are used here; 14 (ONNX 1.20) is what the onnx package writes today.
/// Versions 9 to 14 changed the format only by adding element types (float8,
/// 4- and 2-bit integers, float4/float6) and fields this reader ignores
/// (metadata, configuration); a tensor of a new type is refused by its own
/// check, naming the tensor and the type. A newer version may change what
/// existing fields mean, so it is refused.
constexpr int64_t kMinIrVersion = 3;
constexpr int64_t kMaxIrVersion = 14;

/// Oldest and newest default-domain opsets whose semantics inferNode follows.
constexpr int64_t kMinOpset = 11;
constexpr int64_t kMaxOpset = 21;

/// What the importer knows about an ONNX value: static type and shape, maybe
/// its contents, and the IR value once one has been needed.
struct Entry {
  ValueInfo info;
  Value value;
  /// Set for a parameter initializer: it is read through a gather.
  const onnx::TensorProto *parameter = nullptr;
  /// Set for a tied copy: the parameter it reads instead (transposed when
  /// `tiedTransposed`).
  std::string tiedTo;
  bool tiedTransposed = false;
};

/// Collects protobuf text-format errors instead of letting them go to the
/// protobuf logger.
class TextErrorCollector : public google::protobuf::io::ErrorCollector {
public:
  void AddError(int line, int column, const std::string &message) override {
    if (!text.empty())
      return;
    text = "line " + std::to_string(line + 1) + ":" +
           std::to_string(column + 1) + ": " + message;
    // The tokenizer names the token it found; at the end of the input that
    // is the empty string, which reads as a truncated message.
    if (StringRef(message).ends_with("got: "))
      text += "the end of the file";
  }
  std::string text;
};

/// The size of the regular file at `path`. Anything else (a directory, a
/// device such as /dev/zero, a FIFO) is refused: its size says nothing of
/// what reading it would return, and reading it may never end. The error
/// is the reason alone; callers say which file it is.
llvm::Expected<uint64_t> regularFileSize(const llvm::Twine &path) {
  llvm::sys::fs::file_status status;
  if (std::error_code error = llvm::sys::fs::status(path, status))
    return makeError(error.message());
  if (status.type() == llvm::sys::fs::file_type::directory_file)
    return makeError("Is a directory");
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return makeError("not a regular file (a device, FIFO or socket)");
  return status.getSize();
}

/// Reads an initializer's ONNX external data (location, offset, length
/// relative to `modelDir`), checking the range against the file. With
/// `readData` false only the range is checked: a parameter's bytes are read
/// by the plan writer, one group at a time, never by the importer (a 70B
/// model's weights need not even be present to compile it).
/// An initializer's external data fields: location, offset, length (-1
/// when absent), checked to be well formed without touching the file.
llvm::Error readExternalFields(const onnx::TensorProto &tensor,
                               std::string &file, int64_t &offset,
                               int64_t &length) {
  offset = 0;
  length = -1;
  for (const onnx::StringStringEntryProto &kv : tensor.external_data()) {
    if (kv.key() == "location") {
      file = kv.value();
    } else if (kv.key() == "offset" || kv.key() == "length") {
      int64_t &field = kv.key() == "offset" ? offset : length;
      if (StringRef(kv.value()).getAsInteger(10, field) || field < 0)
        return makeError("initializer '" + tensor.name() + "': external data " +
                         kv.key() + " '" + kv.value() +
                         "' is not a non-negative integer");
    }
  }
  if (file.empty())
    return makeError("initializer '" + tensor.name() +
                     "' has external data without a location");
  return llvm::Error::success();
}

llvm::Error readExternalBytes(const onnx::TensorProto &tensor,
                              StringRef modelDir, std::string &bytes,
                              std::string &file, int64_t &offset,
                              int64_t &length, bool readData = true,
                              int64_t expectedBytes = -1) {
  if (llvm::Error error = readExternalFields(tensor, file, offset, length))
    return error;
  SmallString<256> full(modelDir);
  llvm::sys::path::append(full, file);
  llvm::Expected<uint64_t> fileSize = regularFileSize(full);
  if (!fileSize)
    return makeError(
        "initializer '" + tensor.name() + "': external data file '" + full +
        "' cannot be read: " + llvm::toString(fileSize.takeError()));
  uint64_t size = *fileSize;
  if (size > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    return makeError("initializer '" + tensor.name() +
                     "': external data file '" + full + "' is too large");
  // Written so that no sum can overflow: offset and length come from the
  // model, unchecked.
  int64_t available = static_cast<int64_t>(size);
  if (length < 0 && offset <= available)
    length = available - offset;
  if (offset > available || length > available - offset) {
    std::string range = "offset " + std::to_string(offset);
    if (length >= 0)
      range += ", length " + std::to_string(length);
    return makeError("initializer '" + tensor.name() + "': external data at " +
                     range + " lies outside '" + full + "' (" +
                     llvm::Twine(size) + " bytes)");
  }
  // The caller compares the length with what the tensor declares before
  // asking for the bytes, so no read is larger than the tensor.
  if (!readData || (expectedBytes >= 0 && length != expectedBytes))
    return llvm::Error::success();
  auto buffer = llvm::MemoryBuffer::getFileSlice(full, length, offset);
  if (!buffer)
    return makeError("initializer '" + tensor.name() +
                     "': cannot read external data from '" + full + "'");
  bytes = (*buffer)->getBuffer().str();
  return llvm::Error::success();
}

class OnnxImporter {
public:
  /// Whether a handler imports `opType` on run-time data.
  static bool hasHandler(llvm::StringRef opType) {
    return handlerTable().count(opType) != 0;
  }
  OnnxImporter(MLIRContext &context, const onnx::ModelProto &model,
               StringRef path, const ImportOptions &options)
      : context(context), builder(&context), model(model), path(path.str()),
        modelDir(llvm::sys::path::parent_path(path).str()), options(options) {}

  llvm::Expected<OwningOpRef<ModuleOp>> import();

private:
  using Handler = llvm::Error (OnnxImporter::*)(const onnx::NodeProto &);

  llvm::Error checkModel();
  llvm::Error checkOpsets();
  llvm::Error checkValueDefinitions();
  llvm::Error declareInitializers();
  llvm::Error declareInputs(SmallVectorImpl<Type> &argTypes);
  llvm::Error checkInitializerDeclaration(const onnx::ValueInfoProto &input);
  llvm::Error importNode(const onnx::NodeProto &node);
  llvm::Error emitReturn(func::FuncOp func);

  // Values and types.
  Type elementType(ElementType type);
  RankedTensorType tensorType(const ValueInfo &info);
  Location loc(const onnx::NodeProto &node);
  llvm::Error nodeError(const onnx::NodeProto &node, const llvm::Twine &what);
  Value input(const onnx::NodeProto &node, int index);
  const ValueInfo *inputInfo(const onnx::NodeProto &node, int index);
  Value materializeConstant(const HostTensor &tensor, Location location);
  Value gatherParameter(StringRef name, Entry &entry);
  /// A tied copy's value: its parameter's gathered copy, transposed when
  /// the copy is, at the builder's insertion point (the first use).
  Value readTiedCopy(StringRef name, Entry &entry);
  /// Points `builder` at the end of the hoisted prefix of the function.
  void setInsertionPointToHoisted();
  void setOutputs(const onnx::NodeProto &node, ValueRange values);
  RankedTensorType outputType(int index) { return tensorType(outputs[index]); }
  llvm::Error readExternalData(const onnx::TensorProto &tensor,
                               std::string &bytes, std::string &file,
                               int64_t &offset, int64_t &length, bool readData,
                               int64_t expectedBytes);

  // Handlers, one per ONNX op family (see handlerTable()).
  template <typename OpT> llvm::Error importUnary(const onnx::NodeProto &node);
  template <typename OpT> llvm::Error importBinary(const onnx::NodeProto &node);
  llvm::Error importVariadic(const onnx::NodeProto &node);
  llvm::Error importAlias(const onnx::NodeProto &node);
  llvm::Error importCast(const onnx::NodeProto &node);
  llvm::Error importWhere(const onnx::NodeProto &node);
  llvm::Error importOrEqual(const onnx::NodeProto &node);
  llvm::Error importLogical(const onnx::NodeProto &node);
  Value boolConstant(bool value, Location location);
  llvm::Error checkFloatOperands(const onnx::NodeProto &node);
  llvm::Error importMatMul(const onnx::NodeProto &node);
  llvm::Error importGemm(const onnx::NodeProto &node);
  llvm::Error importTranspose(const onnx::NodeProto &node);
  llvm::Error importReshape(const onnx::NodeProto &node);
  llvm::Error importExpand(const onnx::NodeProto &node);
  llvm::Error importSlice(const onnx::NodeProto &node);
  llvm::Error importSplit(const onnx::NodeProto &node);
  llvm::Error importConcat(const onnx::NodeProto &node);
  llvm::Error importGather(const onnx::NodeProto &node);
  llvm::Error importScatterND(const onnx::NodeProto &node);
  llvm::Error importGatherND(const onnx::NodeProto &node);
  llvm::Error importIsNaN(const onnx::NodeProto &node);
  llvm::Error importGelu(const onnx::NodeProto &node);
  template <typename OpT> llvm::Error importReduce(const onnx::NodeProto &node);
  llvm::Error importSoftmax(const onnx::NodeProto &node);
  llvm::Error importLayerNorm(const onnx::NodeProto &node);

  static const llvm::StringMap<Handler> &handlerTable();
  /// The op types a handler imports when they depend on run-time data.
  static std::string runtimeOpList();
  /// The op types inferNode folds but no handler imports.
  static std::string foldOnlyOpList();

  MLIRContext &context;
  OpBuilder builder;
  const onnx::ModelProto &model;
  std::string path;
  std::string modelDir;
  const ImportOptions &options;
  int64_t opset = 0;

  ModuleOp module;
  /// Parameter gathers and constants go to the top of the function, in
  /// first-use order, so that every later use is dominated: after this op,
  /// or at the start of `entryBlock` while it is null.
  Operation *lastHoisted = nullptr;
  Block *entryBlock = nullptr;
  llvm::StringMap<Entry> values;
  /// What inferNode said about the current node's outputs.
  std::vector<ValueInfo> outputs;
  /// MLIR types by ElementType, parsed from the shared table's names.
  Type elementTypes[std::size(kElementTypes)];
};

//===----------------------------------------------------------------------===//
// Types, locations, values
//===----------------------------------------------------------------------===//

Type OnnxImporter::elementType(ElementType type) {
  // The table's name is the MLIR spelling, so parsing it is the mapping; a
  // type parses once per importer.
  Type &cached = elementTypes[static_cast<unsigned>(type)];
  if (!cached)
    cached = parseType(elementTypeInfo(type).name, &context);
  assert(cached && "kElementTypes names a type MLIR cannot parse");
  return cached;
}

RankedTensorType OnnxImporter::tensorType(const ValueInfo &info) {
  return RankedTensorType::get(info.shape, elementType(info.type));
}

/// How diagnostics and locations name a node: its name, else its first
/// output (a node may have neither, which checkValueDefinitions refuses).
static std::string firstOutputName(const onnx::NodeProto &node) {
  return node.output_size() ? node.output(0) : std::string();
}

Location OnnxImporter::loc(const onnx::NodeProto &node) {
  std::string name = node.name().empty()
                         ? node.op_type() + "(" + firstOutputName(node) + ")"
                         : node.name();
  return NameLoc::get(builder.getStringAttr(name));
}

llvm::Error OnnxImporter::nodeError(const onnx::NodeProto &node,
                                    const llvm::Twine &what) {
  std::string name = node.name().empty()
                         ? "<unnamed, output '" + firstOutputName(node) + "'>"
                         : node.name();
  return makeError("node '" + name + "' (" + node.op_type() + "): " + what);
}

const ValueInfo *OnnxImporter::inputInfo(const onnx::NodeProto &node,
                                         int index) {
  if (index >= node.input_size() || node.input(index).empty())
    return nullptr;
  auto it = values.find(node.input(index));
  return it == values.end() ? nullptr : &it->second.info;
}

Value OnnxImporter::input(const onnx::NodeProto &node, int index) {
  if (index >= node.input_size() || node.input(index).empty())
    return nullptr;
  StringRef name = node.input(index);
  Entry &entry = values.find(name)->second;
  if (entry.value)
    return entry.value;
  if (entry.parameter)
    return entry.value = gatherParameter(name, entry);
  if (!entry.tiedTo.empty())
    return entry.value = readTiedCopy(name, entry);
  // A compile-time value that a run-time op needs: one nn.constant, shared
  // by every later use.
  entry.value = materializeConstant(*entry.info.value, loc(node));
  return entry.value;
}

Value OnnxImporter::materializeConstant(const HostTensor &tensor,
                                        Location location) {
  ValueInfo info{tensor.type, tensor.shape, std::nullopt};
  RankedTensorType type = tensorType(info);
  DenseElementsAttr attr;
  int64_t count = tensor.numElements();
  if (tensor.type == ElementType::Bool) {
    SmallVector<bool> bits(count);
    for (int64_t i = 0; i < count; ++i)
      bits[i] = tensor.getInt(i) != 0;
    attr = DenseElementsAttr::get(type, ArrayRef<bool>(bits));
  } else if (elementTypeInfo(tensor.type).isFloat) {
    auto floatType = llvm::cast<FloatType>(type.getElementType());
    SmallVector<APFloat> elements;
    elements.reserve(count);
    for (int64_t i = 0; i < count; ++i) {
      APFloat value(tensor.getDouble(i));
      bool losesInfo = false;
      value.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                    &losesInfo);
      elements.push_back(value);
    }
    attr = DenseElementsAttr::get(type, elements);
  } else {
    unsigned width = type.getElementTypeBitWidth();
    SmallVector<APInt> elements;
    elements.reserve(count);
    for (int64_t i = 0; i < count; ++i)
      elements.emplace_back(width, tensor.getInt(i), /*isSigned=*/true);
    attr = DenseElementsAttr::get(type, elements);
  }
  OpBuilder::InsertionGuard guard(builder);
  setInsertionPointToHoisted();
  auto constant = builder.create<nn::ConstantOp>(location, attr);
  lastHoisted = constant;
  return constant;
}

void OnnxImporter::setInsertionPointToHoisted() {
  if (lastHoisted)
    builder.setInsertionPointAfter(lastHoisted);
  else
    builder.setInsertionPointToStart(entryBlock);
}

/// The unscheduled form of a parameter read: shard, start, wait, placed at
/// the top of the function. The schedule passes move and group them.
Value OnnxImporter::gatherParameter(StringRef name, Entry &entry) {
  OpBuilder::InsertionGuard guard(builder);
  setInsertionPointToHoisted();
  Location location = NameLoc::get(builder.getStringAttr(name));
  RankedTensorType type = tensorType(entry.info);
  auto shardType = zero::ShardType::get(&context, type);
  Value shard = builder.create<zero::ShardOp>(
      location, shardType, FlatSymbolRefAttr::get(&context, name));
  Value token = builder.create<zero::GatherStartOp>(
      location, zero::GatherTokenType::get(&context), ValueRange{shard},
      /*group=*/nullptr);
  auto wait =
      builder.create<zero::GatherWaitOp>(location, TypeRange{type}, token);
  lastHoisted = wait;
  return wait.getResult(0);
}

Value OnnxImporter::readTiedCopy(StringRef name, Entry &entry) {
  Entry &parameter = values.find(entry.tiedTo)->second;
  if (!parameter.value)
    parameter.value = gatherParameter(entry.tiedTo, parameter);
  if (!entry.tiedTransposed)
    return parameter.value;
  return builder.create<nn::TransposeOp>(
      NameLoc::get(builder.getStringAttr(name)), tensorType(entry.info),
      parameter.value, builder.getDenseI64ArrayAttr({1, 0}));
}

void OnnxImporter::setOutputs(const onnx::NodeProto &node, ValueRange results) {
  for (auto [index, result] : llvm::enumerate(results)) {
    if (index >= static_cast<size_t>(node.output_size()) ||
        node.output(index).empty())
      continue;
    Entry &entry = values[node.output(index)];
    entry.info = outputs[index];
    entry.value = result;
  }
}

//===----------------------------------------------------------------------===//
// Model-level structure
//===----------------------------------------------------------------------===//

llvm::Error OnnxImporter::checkModel() {
  int64_t irVersion = model.ir_version();
  if (irVersion < kMinIrVersion || irVersion > kMaxIrVersion)
    return makeError(
        "the model has IR version " + llvm::Twine(irVersion) +
        (irVersion == 0 ? " (missing)" : "") + "; supported are IR versions " +
        llvm::Twine(kMinIrVersion) + " to " + llvm::Twine(kMaxIrVersion));
  if (model.graph().output_size() == 0)
    return makeError("the graph has no outputs");
  return llvm::Error::success();
}

llvm::Error OnnxImporter::checkOpsets() {
  for (const onnx::OperatorSetIdProto &set : model.opset_import()) {
    if (!set.domain().empty() && set.domain() != "ai.onnx")
      continue;
    // "" and "ai.onnx" are one domain; two versions of it leave the
    // semantics of every node ambiguous.
    if (opset != 0 && set.version() != opset)
      return makeError("the model imports the default ONNX domain twice, as "
                       "opsets " +
                       llvm::Twine(opset) + " and " +
                       llvm::Twine(set.version()));
    opset = set.version();
  }
  if (opset == 0)
    return makeError("the model imports no opset of the default ONNX domain");
  if (opset < kMinOpset || opset > kMaxOpset)
    return makeError("the model uses default-domain opset " +
                     llvm::Twine(opset) + "; supported are opsets " +
                     llvm::Twine(kMinOpset) + " to " + llvm::Twine(kMaxOpset));
  return llvm::Error::success();
}

/// ONNX graphs are in SSA form: every value has one definition. A node
/// output that redefines a graph input, an initializer or an earlier output
/// would silently rebind the name; graph outputs listed twice would give the
/// function two results of one name.
llvm::Error OnnxImporter::checkValueDefinitions() {
  llvm::StringSet<> defined;
  for (const auto &entry : values)
    defined.insert(entry.getKey());
  for (const onnx::NodeProto &node : model.graph().node()) {
    if (node.output_size() == 0)
      return nodeError(node, "the node has no outputs");
    for (const std::string &output : node.output())
      if (!output.empty() && !defined.insert(output).second)
        return nodeError(node, "output '" + output +
                                   "' is already defined (by a graph input, "
                                   "an initializer or another node output)");
  }
  llvm::StringSet<> outputs;
  for (const onnx::ValueInfoProto &output : model.graph().output())
    if (!outputs.insert(output.name()).second)
      return makeError("graph output '" + output.name() + "' is listed twice");
  return llvm::Error::success();
}

llvm::Error OnnxImporter::readExternalData(const onnx::TensorProto &tensor,
                                           std::string &bytes,
                                           std::string &file, int64_t &offset,
                                           int64_t &length, bool readData,
                                           int64_t expectedBytes) {
  return readExternalBytes(tensor, modelDir, bytes, file, offset, length,
                           readData, expectedBytes);
}

/// Checks that an initializer's inline data (raw_data, or the typed field
/// its element type uses) holds exactly the elements its shape says.
static llvm::Error checkInlineDataSize(const onnx::TensorProto &tensor,
                                       const ValueInfo &info) {
  int64_t count = numElements(info.shape);
  std::string what = formatShape(info.shape) + " " +
                     std::string(elementTypeInfo(info.type).name);
  if (!tensor.raw_data().empty()) {
    int64_t expected = count * int64_t(elementTypeInfo(info.type).bytes);
    int64_t present = static_cast<int64_t>(tensor.raw_data().size());
    if (present != expected)
      return makeError("initializer '" + tensor.name() + "': raw_data holds " +
                       llvm::Twine(present) + " bytes, expected " +
                       llvm::Twine(expected) + " for " + what);
    return llvm::Error::success();
  }
  int64_t present;
  const char *field;
  switch (info.type) {
  case ElementType::F32:
    present = tensor.float_data_size();
    field = "float_data";
    break;
  case ElementType::F64:
    present = tensor.double_data_size();
    field = "double_data";
    break;
  case ElementType::I64:
    present = tensor.int64_data_size();
    field = "int64_data";
    break;
  default:
    present = tensor.int32_data_size();
    field = "int32_data";
    break;
  }
  if (present != count)
    return makeError("initializer '" + tensor.name() + "': " + field +
                     " holds " + llvm::Twine(present) + " elements, expected " +
                     llvm::Twine(count) + " for " + what);
  return llvm::Error::success();
}

llvm::Error OnnxImporter::declareInitializers() {
  OpBuilder::InsertionGuard guard(builder);
  builder.setInsertionPointToStart(module.getBody());
  // Parameter candidates, declared once ties and freezing are decided.
  struct Declared {
    Entry *entry;
    std::string file;
    int64_t offset, length;
    bool external;
  };
  std::vector<ParameterCandidate> candidates;
  std::vector<Declared> declared;
  for (const onnx::TensorProto &tensor : model.graph().initializer()) {
    std::optional<ElementType> type = elementTypeFromOnnx(tensor.data_type());
    if (!type)
      return makeError("initializer '" + tensor.name() +
                       "' has ONNX data type " +
                       onnxDataTypeName(tensor.data_type()) +
                       ", which zplan does not support");
    if (tensor.name().empty())
      return makeError("an initializer has no name");
    if (values.count(tensor.name()))
      return makeError("initializer '" + tensor.name() + "' is defined twice");
    Entry &entry = values[tensor.name()];
    entry.info.type = *type;
    entry.info.shape.assign(tensor.dims().begin(), tensor.dims().end());
    if (llvm::any_of(entry.info.shape, [](int64_t dim) { return dim < 0; }))
      return makeError("initializer '" + tensor.name() +
                       "' has a negative dimension (dims " +
                       formatShape(entry.info.shape) + ")");
    if (llvm::Error error = checkTensorSize(entry.info.shape, *type))
      return makeError("initializer '" + tensor.name() +
                       "': " + llvm::toString(std::move(error)));
    bool external = tensor.data_location() == onnx::TensorProto::EXTERNAL;
    bool trainable =
        elementTypeInfo(*type).isFloat &&
        numElements(entry.info.shape) > kMaxConstantInitializerElements;
    std::string bytes, file;
    int64_t offset = 0, length = 0;
    // A constant's bytes are read and decoded: bound them before reading.
    if (!trainable && numElements(entry.info.shape) > kMaxDecodedElements)
      return makeError("initializer '" + tensor.name() + "' (" +
                       formatShape(entry.info.shape) + " " +
                       llvm::Twine(elementTypeInfo(*type).name) +
                       ") is too large for a constant: constants are decoded "
                       "up to " +
                       llvm::Twine(kMaxDecodedElements) +
                       " elements, and only floating-point initializers "
                       "become parameters");
    if (external) {
      // checkTensorSize has bounded this product.
      int64_t expected =
          numElements(entry.info.shape) * int64_t(elementTypeInfo(*type).bytes);
      if (trainable && !options.readWeights) {
        // --no-weights: the fields as written; the file is not looked at.
        if (llvm::Error error =
                readExternalFields(tensor, file, offset, length))
          return error;
        if (length < 0)
          length = expected;
      } else if (llvm::Error error =
                     readExternalData(tensor, bytes, file, offset, length,
                                      !trainable, expected)) {
        if (!trainable && !options.readWeights)
          return makeError(llvm::toString(std::move(error)) +
                           " (--no-weights skips parameters only: this "
                           "initializer is a constant the graph computes "
                           "with)");
        if (trainable)
          return makeError(llvm::toString(std::move(error)) +
                           " (zcc --no-weights compiles the report and dumps "
                           "without the parameters' data)");
        return error;
      }
      if (length != expected)
        return makeError("initializer '" + tensor.name() +
                         "': external data "
                         "holds " +
                         llvm::Twine(length) + " bytes, expected " +
                         llvm::Twine(expected) + " for " +
                         formatShape(entry.info.shape) + " " +
                         llvm::Twine(elementTypeInfo(*type).name));
    }
    if (trainable) {
      // Parameters are never folded: their data stays where it is, and only
      // the plan writer reads it, one group at a time (tie detection reads
      // a few elements, and the whole of a tensor whose samples match
      // another's). So its size is checked here, or nothing would notice a
      // short tensor until then.
      if (!external)
        if (llvm::Error error = checkInlineDataSize(tensor, entry.info))
          return error;
      candidates.push_back({&tensor, *type, entry.info.shape});
      declared.push_back({&entry, file, offset, length, external});
      continue;
    }
    HostTensor value;
    if (llvm::Error decodeError =
            decodeTensor(tensor, value, external ? &bytes : nullptr)) {
      std::string error = llvm::toString(std::move(decodeError));
      // decodeTensor names the tensor itself.
      StringRef message(error);
      if (message.consume_front("tensor '" + tensor.name() + "'"))
        return makeError("initializer '" + tensor.name() + "'" + message);
      return makeError("initializer '" + tensor.name() + "': " + message);
    }
    entry.info.value = std::move(value);
  }

  std::vector<ParameterDecision> decisions;
  if (llvm::Error error =
          decideParameters(model, modelDir, candidates, options.parameters,
                           options.readWeights, decisions))
    return error;
  for (auto [candidate, where, decision] :
       llvm::zip_equal(candidates, declared, decisions)) {
    const onnx::TensorProto &tensor = *candidate.tensor;
    if (decision.copyOf) {
      where.entry->tiedTo = candidates[*decision.copyOf].tensor->name();
      where.entry->tiedTransposed = decision.transposed;
      continue;
    }
    where.entry->parameter = &tensor;
    auto param = builder.create<nn::ParameterOp>(
        NameLoc::get(builder.getStringAttr(tensor.name())),
        builder.getStringAttr(tensor.name()),
        TypeAttr::get(tensorType(where.entry->info)), StringAttr(),
        IntegerAttr(), IntegerAttr(), ArrayAttr(), StringAttr(), StringAttr());
    if (where.external) {
      param.setExternalFileAttr(builder.getStringAttr(where.file));
      param.setExternalOffsetAttr(builder.getI64IntegerAttr(where.offset));
      param.setExternalLengthAttr(builder.getI64IntegerAttr(where.length));
    }
    if (!decision.copies.empty()) {
      SmallVector<Attribute> copies;
      for (const TiedCopyDecision &copy : decision.copies)
        copies.push_back(builder.getDictionaryAttr({
            builder.getNamedAttr("name", builder.getStringAttr(copy.name)),
            builder.getNamedAttr("transposed",
                                 builder.getBoolAttr(copy.transposed)),
            builder.getNamedAttr("equal", builder.getBoolAttr(copy.equal)),
            builder.getNamedAttr("reason", builder.getStringAttr(copy.reason)),
        }));
      param.setTiedCopiesAttr(builder.getArrayAttr(copies));
    }
    if (decision.frozen)
      param.setFrozenAttr(builder.getStringAttr(*decision.frozen));
    if (decision.untied)
      param.setUntiedAttr(builder.getStringAttr(*decision.untied));
  }
  return llvm::Error::success();
}

llvm::Error
OnnxImporter::checkInitializerDeclaration(const onnx::ValueInfoProto &input) {
  const ValueInfo &info = values.find(input.name())->second.info;
  const onnx::TypeProto &type = input.type();
  if (!type.has_tensor_type())
    return llvm::Error::success();
  int32_t declared = type.tensor_type().elem_type();
  if (declared != 0 && declared != elementTypeInfo(info.type).onnx)
    return makeError("graph input '" + input.name() +
                     "' declares ONNX data type " + llvm::Twine(declared) +
                     ", but its initializer is " +
                     llvm::Twine(elementTypeInfo(info.type).name));
  if (!type.tensor_type().has_shape())
    return llvm::Error::success();
  const onnx::TensorShapeProto &shape = type.tensor_type().shape();
  bool matches = static_cast<size_t>(shape.dim_size()) == info.shape.size();
  for (int d = 0; matches && d < shape.dim_size(); ++d)
    matches = !shape.dim(d).has_dim_value() ||
              shape.dim(d).dim_value() == info.shape[d];
  if (!matches)
    return makeError("graph input '" + input.name() +
                     "' declares a shape its initializer (" +
                     formatShape(info.shape) + ") does not have");
  return llvm::Error::success();
}

llvm::Error OnnxImporter::declareInputs(SmallVectorImpl<Type> &argTypes) {
  // Older exporters list initializers among the inputs too; those are not
  // arguments.
  auto isArgument = [&](const onnx::ValueInfoProto &input) {
    return !values.count(input.name());
  };
  // A misspelt --input-shape name is reported as such, not as the dynamic
  // dimension it failed to bind.
  llvm::StringSet<> graphInputs;
  std::string known;
  for (const onnx::ValueInfoProto &input : model.graph().input())
    if (isArgument(input) && graphInputs.insert(input.name()).second)
      known += (known.empty() ? "'" : ", '") + input.name() + "'";
  for (const auto &[name, dims] : options.inputShapes)
    if (!graphInputs.contains(name))
      return makeError("--input-shape names '" + name +
                       "', which is not a graph input (inputs: " + known + ")");

  llvm::StringSet<> declared;
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    // A name listed twice would make two arguments for one value.
    if (!declared.insert(input.name()).second)
      return makeError("graph input '" + input.name() + "' is listed twice");
    if (input.name().empty())
      return makeError("a graph input has no name");
  }

  // A dimension symbol ('batch', 'past_sequence') that an --input-shape
  // binds binds it in every input: a cache export has many past_key_values
  // inputs of one shape, and naming one of them names them all. Two bindings
  // of one symbol must agree.
  struct SymbolBinding {
    int64_t value;
    std::string input;
    int dim;
  };
  llvm::StringMap<SymbolBinding> symbols;
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    auto bound = options.inputShapes.find(input.name());
    if (!isArgument(input) || bound == options.inputShapes.end() ||
        !input.type().has_tensor_type() ||
        !input.type().tensor_type().has_shape())
      continue;
    const onnx::TensorShapeProto &shape = input.type().tensor_type().shape();
    if (static_cast<size_t>(shape.dim_size()) != bound->second.size())
      continue; // reported with the input below
    for (int d = 0; d < shape.dim_size(); ++d) {
      if (!shape.dim(d).has_dim_param() || shape.dim(d).dim_param().empty())
        continue;
      int64_t value = bound->second[d];
      auto [it, inserted] = symbols.try_emplace(
          shape.dim(d).dim_param(), SymbolBinding{value, input.name(), d});
      if (!inserted && it->second.value != value)
        return makeError(
            "--input-shape gives '" + input.name() + "' dim " + llvm::Twine(d) +
            " ('" + shape.dim(d).dim_param() + "') = " + llvm::Twine(value) +
            ", but '" + it->second.input + "' dim " +
            llvm::Twine(it->second.dim) +
            " (the same symbol) = " + llvm::Twine(it->second.value));
    }
  }
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    if (!isArgument(input)) {
      // An initializer listed among the inputs (IR < 4) is the initializer;
      // a declaration that contradicts it is an invalid model.
      if (llvm::Error error = checkInitializerDeclaration(input))
        return error;
      continue;
    }
    const onnx::TypeProto &type = input.type();
    if (!type.has_tensor_type())
      return makeError("graph input '" + input.name() + "' is not a tensor");
    std::optional<ElementType> elementType =
        elementTypeFromOnnx(type.tensor_type().elem_type());
    if (!elementType)
      return makeError("graph input '" + input.name() +
                       "' has ONNX data type " +
                       onnxDataTypeName(type.tensor_type().elem_type()) +
                       ", which zplan does not support");
    if (*elementType == ElementType::U8)
      return makeError("graph input '" + input.name() +
                       "' is ui8; nn tensors have signless element types, "
                       "so run-time values cannot be unsigned");
    auto bound = options.inputShapes.find(input.name());
    const onnx::TensorShapeProto &shape = type.tensor_type().shape();
    std::vector<int64_t> dims;
    if (bound != options.inputShapes.end()) {
      dims = bound->second;
      if (type.tensor_type().has_shape() &&
          static_cast<size_t>(shape.dim_size()) != dims.size())
        return makeError("--input-shape gives '" + input.name() + "' rank " +
                         llvm::Twine(dims.size()) + " (" + formatShape(dims) +
                         "), but the model declares rank " +
                         llvm::Twine(shape.dim_size()));
      for (int d = 0; d < shape.dim_size(); ++d)
        if (shape.dim(d).has_dim_value() && shape.dim(d).dim_value() != dims[d])
          return makeError("--input-shape gives '" + input.name() + "' dim " +
                           llvm::Twine(d) + " = " + llvm::Twine(dims[d]) +
                           ", but the model fixes it to " +
                           llvm::Twine(shape.dim(d).dim_value()));
    } else {
      if (!type.tensor_type().has_shape())
        return makeError("graph input '" + input.name() +
                         "' has no shape; give one with --input-shape " +
                         input.name() + "=...");
      for (int d = 0; d < shape.dim_size(); ++d) {
        if (shape.dim(d).has_dim_param()) {
          auto symbol = symbols.find(shape.dim(d).dim_param());
          if (symbol != symbols.end()) {
            dims.push_back(symbol->second.value);
            continue;
          }
        }
        if (!shape.dim(d).has_dim_value() || shape.dim(d).dim_value() < 0) {
          std::string symbol = shape.dim(d).has_dim_param()
                                   ? " ('" + shape.dim(d).dim_param() + "')"
                                   : "";
          return makeError("graph input '" + input.name() + "' dim " +
                           llvm::Twine(d) + symbol +
                           " is dynamic; bind it with --input-shape " +
                           input.name() + "=D0x...");
        }
        dims.push_back(shape.dim(d).dim_value());
      }
    }
    if (llvm::Error error = checkTensorSize(dims, *elementType))
      return makeError("graph input '" + input.name() +
                       "': " + llvm::toString(std::move(error)));
    Entry &entry = values[input.name()];
    entry.info.type = *elementType;
    entry.info.shape = dims;
    argTypes.push_back(tensorType(entry.info));
  }
  return llvm::Error::success();
}

llvm::Expected<OwningOpRef<ModuleOp>> OnnxImporter::import() {
  if (llvm::Error error = checkModel())
    return std::move(error);
  if (llvm::Error error = checkOpsets())
    return std::move(error);
  OwningOpRef<ModuleOp> owned = ModuleOp::create(builder.getUnknownLoc());
  module = *owned;
  if (llvm::Error error = declareInitializers())
    return std::move(error);
  SmallVector<Type> argTypes;
  if (llvm::Error error = declareInputs(argTypes))
    return std::move(error);
  if (llvm::Error error = checkValueDefinitions())
    return std::move(error);

  builder.setInsertionPointToEnd(module.getBody());
  auto func = builder.create<func::FuncOp>(
      NameLoc::get(builder.getStringAttr(model.graph().name())), "forward",
      builder.getFunctionType(argTypes, {}));
  Block *entry = func.addEntryBlock();
  int argIndex = 0;
  for (const onnx::ValueInfoProto &input : model.graph().input()) {
    auto it = values.find(input.name());
    if (it->second.parameter || !it->second.tiedTo.empty() ||
        it->second.info.isConstant())
      continue;
    it->second.value = entry->getArgument(argIndex);
    func.setArgAttr(argIndex++, "nn.name", builder.getStringAttr(input.name()));
  }
  entryBlock = entry;
  builder.setInsertionPointToEnd(entry);

  for (const onnx::NodeProto &node : model.graph().node())
    if (llvm::Error error = importNode(node))
      return std::move(error);
  if (llvm::Error error = emitReturn(func))
    return std::move(error);

  std::string diagnostics;
  {
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      diagnostics += diag.str() + "\n";
      return success();
    });
    if (failed(verify(module)))
      return makeError("the imported module does not verify (an importer "
                       "bug):\n" +
                       diagnostics);
  }
  return std::move(owned);
}

llvm::Error OnnxImporter::emitReturn(func::FuncOp func) {
  SmallVector<Value> results;
  SmallVector<Type> resultTypes;
  for (const onnx::ValueInfoProto &output : model.graph().output()) {
    auto it = values.find(output.name());
    if (it == values.end())
      return makeError("graph output '" + output.name() +
                       "' is produced by no node");
    Entry &entry = it->second;
    if (entry.info.type == ElementType::U8)
      return makeError("graph output '" + output.name() +
                       "' is ui8; nn tensors have signless element types, "
                       "so outputs cannot be unsigned");
    Value value = entry.value;
    if (!value && entry.parameter)
      value = entry.value = gatherParameter(output.name(), entry);
    if (!value && !entry.tiedTo.empty())
      value = entry.value = readTiedCopy(output.name(), entry);
    if (!value) {
      value = entry.value = materializeConstant(
          *entry.info.value,
          NameLoc::get(builder.getStringAttr(output.name())));
    }
    // A declared static dim that disagrees with inference is a bad model.
    const onnx::TensorShapeProto &shape = output.type().tensor_type().shape();
    if (static_cast<size_t>(shape.dim_size()) == entry.info.shape.size())
      for (int d = 0; d < shape.dim_size(); ++d)
        if (shape.dim(d).has_dim_value() &&
            shape.dim(d).dim_value() != entry.info.shape[d])
          return makeError("graph output '" + output.name() + "' is " +
                           formatShape(entry.info.shape) +
                           " after shape inference, but the model declares "
                           "dim " +
                           llvm::Twine(d) + " = " +
                           llvm::Twine(shape.dim(d).dim_value()));
    results.push_back(value);
    resultTypes.push_back(value.getType());
  }
  builder.create<func::ReturnOp>(builder.getUnknownLoc(), results);
  func.setFunctionType(
      builder.getFunctionType(func.getArgumentTypes(), resultTypes));
  for (auto [index, output] : llvm::enumerate(model.graph().output()))
    func.setResultAttr(index, "nn.name", builder.getStringAttr(output.name()));
  return llvm::Error::success();
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

llvm::Error OnnxImporter::importNode(const onnx::NodeProto &node) {
  if (!node.domain().empty() && node.domain() != "ai.onnx")
    return nodeError(node, "domain '" + node.domain() +
                               "' is not supported; only the default ONNX "
                               "domain (opset " +
                               llvm::Twine(opset) + ") is");
  if (!isKnownOp(node.op_type()))
    return nodeError(
        node,
        "op type " + node.op_type() + " of the default ONNX domain (opset " +
            llvm::Twine(opset) +
            ") is not supported; supported op types are: " + runtimeOpList() +
            "; and, when their inputs are compile-time "
            "constants: " +
            foldOnlyOpList());
  std::vector<const ValueInfo *> inputs;
  for (int i = 0; i < node.input_size(); ++i) {
    if (node.input(i).empty()) {
      inputs.push_back(nullptr);
      continue;
    }
    auto it = values.find(node.input(i));
    if (it == values.end())
      return nodeError(node, "input '" + node.input(i) +
                                 "' is not a graph input, an initializer or "
                                 "the output of an earlier node (missing, or "
                                 "the graph is not topologically sorted)");
    inputs.push_back(&it->second.info);
  }
  outputs.clear();
  if (llvm::Error inferError = inferNode(node, opset, inputs, outputs)) {
    // inferNode starts its messages with the op type, which nodeError
    // already gives.
    std::string error = llvm::toString(std::move(inferError));
    StringRef message(error);
    message.consume_front(node.op_type() + ": ");
    return nodeError(node, message);
  }

  // Outputs known at compile time are recorded now, whether or not the node
  // also has run-time outputs (Dropout's mask): handlers set only the
  // outputs they compute.
  bool allKnown = !outputs.empty();
  for (auto [index, info] : llvm::enumerate(outputs)) {
    if (!info.isConstant()) {
      allKnown = false;
      continue;
    }
    if (index < static_cast<size_t>(node.output_size()) &&
        !node.output(index).empty())
      values[node.output(index)].info = info;
  }
  if (allKnown)
    return llvm::Error::success();
  auto handler = handlerTable().find(node.op_type());
  if (handler == handlerTable().end())
    return nodeError(node, "depends on run-time data, which is supported "
                           "only for op types: " +
                               runtimeOpList() + "; " + node.op_type() +
                               " is supported only when its inputs are "
                               "compile-time constants");
  for (const ValueInfo &info : outputs)
    if (!info.isConstant() && info.type == ElementType::U8)
      return nodeError(node, "computes a ui8 tensor at run time; nn tensors "
                             "have signless element types, so unsigned ones "
                             "are supported only in compile-time constants");
  OpBuilder::InsertionGuard guard(builder);
  return (this->*handler->second)(node);
}

std::string OnnxImporter::runtimeOpList() {
  SmallVector<StringRef> names;
  for (const auto &entry : handlerTable())
    names.push_back(entry.getKey());
  llvm::sort(names);
  return llvm::join(names, ", ");
}

std::string OnnxImporter::foldOnlyOpList() {
  std::string list;
  for (const std::string &op : knownOps())
    if (!handlerTable().count(op))
      list += (list.empty() ? "" : ", ") + op;
  return list;
}

template <typename OpT>
llvm::Error OnnxImporter::importUnary(const onnx::NodeProto &node) {
  setOutputs(node,
             builder.create<OpT>(loc(node), outputType(0), input(node, 0))
                 ->getResults());
  return llvm::Error::success();
}

template <typename OpT>
llvm::Error OnnxImporter::importBinary(const onnx::NodeProto &node) {
  Value lhs = input(node, 0);
  const ValueInfo &lhsInfo = *inputInfo(node, 0);
  const ValueInfo &rhsInfo = *inputInfo(node, 1);
  // Only Pow may mix element types: the exponent's type differs from the
  // base's, and the result has the base's. nn ops share one element type.
  if (rhsInfo.type == lhsInfo.type) {
    Value rhs = input(node, 1);
    setOutputs(
        node,
        builder.create<OpT>(loc(node), outputType(0), lhs, rhs)->getResults());
    return llvm::Error::success();
  }
  Location location = loc(node);
  auto castTo = [&](Value value, ElementType type) -> Value {
    auto shaped = llvm::cast<RankedTensorType>(value.getType());
    return builder.create<nn::CastOp>(
        location, RankedTensorType::get(shaped.getShape(), elementType(type)),
        value);
  };
  if (!elementTypeInfo(lhsInfo.type).isFloat &&
      elementTypeInfo(rhsInfo.type).isFloat) {
    // An integer raised to a fractional power: compute in the exponent's
    // float type and truncate, as folding (and onnxruntime) does; converting
    // the exponent to an integer would change the result (4 ^ 0.5 is 2,
    // 4 ^ 0 is 1).
    Value power = builder.create<OpT>(
        location,
        RankedTensorType::get(outputs[0].shape, elementType(rhsInfo.type)),
        castTo(lhs, rhsInfo.type), input(node, 1));
    setOutputs(node, castTo(power, lhsInfo.type));
    return llvm::Error::success();
  }
  Value rhs;
  if (rhsInfo.value) {
    // A known exponent (x ^ 2 with an integer 2) is converted here rather
    // than by a run-time cast.
    const HostTensor &exponent = *rhsInfo.value;
    HostTensor converted =
        elementTypeInfo(exponent.type).isFloat
            ? HostTensor::fromFloats(lhsInfo.type, exponent.shape,
                                     exponent.floats)
            : HostTensor::fromInts(lhsInfo.type, exponent.shape, exponent.ints);
    rhs = materializeConstant(converted, location);
  } else {
    rhs = castTo(input(node, 1), lhsInfo.type);
  }
  setOutputs(
      node,
      builder.create<OpT>(location, outputType(0), lhs, rhs)->getResults());
  return llvm::Error::success();
}

/// Max/Min/Sum with any number of inputs, as a chain of binary ops.
llvm::Error OnnxImporter::importVariadic(const onnx::NodeProto &node) {
  Value result = input(node, 0);
  for (int i = 1; i < node.input_size(); ++i) {
    Value next = input(node, i);
    auto lhsShape = llvm::cast<RankedTensorType>(result.getType()).getShape();
    auto rhsShape = llvm::cast<RankedTensorType>(next.getType()).getShape();
    std::optional<std::vector<int64_t>> shape =
        broadcastShapes(std::vector<int64_t>(lhsShape.begin(), lhsShape.end()),
                        std::vector<int64_t>(rhsShape.begin(), rhsShape.end()));
    auto type =
        RankedTensorType::get(*shape, getElementTypeOrSelf(result.getType()));
    if (node.op_type() == "Max")
      result = builder.create<nn::MaxOp>(loc(node), type, result, next);
    else if (node.op_type() == "Min")
      result = builder.create<nn::MinOp>(loc(node), type, result, next);
    else
      result = builder.create<nn::AddOp>(loc(node), type, result, next);
  }
  setOutputs(node, result);
  return llvm::Error::success();
}

llvm::Error OnnxImporter::importAlias(const onnx::NodeProto &node) {
  setOutputs(node, input(node, 0));
  return llvm::Error::success();
}

llvm::Error OnnxImporter::importCast(const onnx::NodeProto &node) {
  Value value = input(node, 0);
  if (value.getType() == outputType(0)) {
    setOutputs(node, value);
    return llvm::Error::success();
  }
  return importUnary<nn::CastOp>(node);
}

llvm::Error OnnxImporter::importWhere(const onnx::NodeProto &node) {
  // Operands are read in order, one statement each: reading one may hoist a
  // gather or a constant, and the hoisted prefix follows first use.
  Value condition = input(node, 0);
  Value onTrue = input(node, 1);
  Value onFalse = input(node, 2);
  setOutputs(node, builder
                       .create<nn::WhereOp>(loc(node), outputType(0), condition,
                                            onTrue, onFalse)
                       ->getResults());
  return llvm::Error::success();
}

/// nn.matmul is a floating-point op; an integer product at run time is
/// unsupported input, not an importer bug for the verifier to find.
llvm::Error OnnxImporter::checkFloatOperands(const onnx::NodeProto &node) {
  ElementType type = inputInfo(node, 0)->type;
  if (elementTypeInfo(type).isFloat)
    return llvm::Error::success();
  return nodeError(node, "operands are " +
                             llvm::Twine(elementTypeInfo(type).name) +
                             "; a product computed at run time needs "
                             "floating-point operands");
}

llvm::Error OnnxImporter::importMatMul(const onnx::NodeProto &node) {
  if (llvm::Error error = checkFloatOperands(node))
    return error;
  Value lhs = input(node, 0);
  Value rhs = input(node, 1);
  setOutputs(node, builder
                       .create<nn::MatmulOp>(loc(node), outputType(0), lhs, rhs,
                                             /*bias=*/Value(),
                                             /*transpose_rhs=*/false)
                       ->getResults());
  return llvm::Error::success();
}

/// Gemm: Y = alpha * A' B' + beta * C as matmul (transposes folded in), then
/// scales and the add; zplan-form-nn-ops turns the add into the bias.
llvm::Error OnnxImporter::importGemm(const onnx::NodeProto &node) {
  if (llvm::Error error = checkFloatOperands(node))
    return error;
  Location location = loc(node);
  Value a = input(node, 0), b = input(node, 1);
  if (getIntAttribute(node, "transA", 0)) {
    auto type = llvm::cast<RankedTensorType>(a.getType());
    a = builder.create<nn::TransposeOp>(
        location,
        RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)},
                              type.getElementType()),
        a, builder.getDenseI64ArrayAttr({1, 0}));
  }
  RankedTensorType type = outputType(0);
  Value result = builder.create<nn::MatmulOp>(
      location, type, a, b, Value(),
      builder.getBoolAttr(getIntAttribute(node, "transB", 0) != 0));
  auto scale = [&](Value value, float factor) -> Value {
    if (factor == 1.0f)
      return value;
    HostTensor scalar = HostTensor::fromFloats(outputs[0].type, {}, {factor});
    Value constant = materializeConstant(scalar, location);
    return builder.create<nn::MulOp>(location, value.getType(), value,
                                     constant);
  };
  result =
      scale(result, static_cast<float>(getFloatAttribute(node, "alpha", 1.0f)));
  if (Value c = input(node, 2)) {
    c = scale(c, static_cast<float>(getFloatAttribute(node, "beta", 1.0f)));
    result = builder.create<nn::AddOp>(location, type, result, c);
  }
  setOutputs(node, result);
  return llvm::Error::success();
}

llvm::Error OnnxImporter::importTranspose(const onnx::NodeProto &node) {
  int64_t rank = outputs[0].shape.size();
  std::vector<int64_t> perm;
  if (std::optional<std::vector<int64_t>> given =
          getIntsAttribute(node, "perm"))
    perm = *given;
  else
    for (int64_t d = rank - 1; d >= 0; --d)
      perm.push_back(d);
  setOutputs(node, builder
                       .create<nn::TransposeOp>(
                           loc(node), outputType(0), input(node, 0),
                           builder.getDenseI64ArrayAttr(perm))
                       ->getResults());
  return llvm::Error::success();
}

/// Reshape, Flatten, Squeeze, Unsqueeze: the output shape is already known.
llvm::Error OnnxImporter::importReshape(const onnx::NodeProto &node) {
  Value value = input(node, 0);
  if (value.getType() == outputType(0)) {
    setOutputs(node, value);
    return llvm::Error::success();
  }
  setOutputs(node,
             builder.create<nn::ReshapeOp>(loc(node), outputType(0), value)
                 ->getResults());
  return llvm::Error::success();
}

llvm::Error OnnxImporter::importExpand(const onnx::NodeProto &node) {
  Value value = input(node, 0);
  if (value.getType() == outputType(0)) {
    setOutputs(node, value);
    return llvm::Error::success();
  }
  setOutputs(node,
             builder.create<nn::ExpandOp>(loc(node), outputType(0), value)
                 ->getResults());
  return llvm::Error::success();
}

/// Emits a slice of `value` that starts at `starts` (per dimension, already
/// in range) with `steps`, of the given result type.
static Value emitSlice(OpBuilder &builder, Location location, Value value,
                       RankedTensorType type, ArrayRef<int64_t> starts,
                       ArrayRef<int64_t> steps) {
  if (value.getType() == type &&
      llvm::all_of(starts, [](int64_t s) { return s == 0; }) &&
      llvm::all_of(steps, [](int64_t s) { return s == 1; }))
    return value;
  return builder.create<nn::SliceOp>(location, type, value,
                                     builder.getDenseI64ArrayAttr(starts),
                                     builder.getDenseI64ArrayAttr(steps));
}

/// ONNX Slice: starts, ends, axes, steps are inputs (opset >= 10) known at
/// compile time; the output shape came from inference, so only the first
/// index read on each dimension is needed here.
llvm::Error OnnxImporter::importSlice(const onnx::NodeProto &node) {
  const ValueInfo *data = inputInfo(node, 0);
  int64_t rank = data->shape.size();
  auto constantInput = [&](int index) -> const HostTensor * {
    const ValueInfo *info = inputInfo(node, index);
    return info && info->value ? &*info->value : nullptr;
  };
  const HostTensor *starts = constantInput(1);
  const HostTensor *axes = constantInput(3);
  const HostTensor *steps = constantInput(4);
  if (!starts)
    return nodeError(node, "starts (input 1) is not a compile-time constant");
  std::vector<int64_t> start(rank, 0), step(rank, 1);
  for (int64_t i = 0; i < starts->numElements(); ++i) {
    int64_t axis = axes ? axes->getInt(i) : i;
    std::optional<int64_t> normalized = normalizeAxis(axis, rank);
    if (!normalized)
      return nodeError(node, "axis " + llvm::Twine(axis) +
                                 " is out of range for rank " +
                                 llvm::Twine(rank));
    int64_t dim = data->shape[*normalized];
    int64_t s = starts->getInt(i);
    int64_t st = steps ? steps->getInt(i) : 1;
    if (s < 0)
      s += dim;
    // Clamp as the ONNX spec does: [0, dim] for positive steps,
    // [0, dim - 1] for negative ones.
    s = st > 0 ? std::clamp<int64_t>(s, 0, dim)
               : std::clamp<int64_t>(s, 0, dim - 1);
    start[*normalized] = s;
    step[*normalized] = st;
  }
  // An empty result reads nothing; keep starts in range for the verifier.
  for (int64_t d = 0; d < rank; ++d)
    if (outputs[0].shape[d] == 0)
      start[d] = 0;
  setOutputs(node, emitSlice(builder, loc(node), input(node, 0), outputType(0),
                             start, step));
  return llvm::Error::success();
}

/// Split: one slice per output along the axis.
llvm::Error OnnxImporter::importSplit(const onnx::NodeProto &node) {
  const ValueInfo *data = inputInfo(node, 0);
  int64_t rank = data->shape.size();
  std::optional<int64_t> axis =
      normalizeAxis(getIntAttribute(node, "axis", 0), rank);
  if (!axis)
    return nodeError(node, "axis is out of range");
  SmallVector<Value> results;
  int64_t offset = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::vector<int64_t> start(rank, 0), step(rank, 1);
    start[*axis] = outputs[i].shape[*axis] == 0 ? 0 : offset;
    results.push_back(emitSlice(builder, loc(node), input(node, 0),
                                outputType(i), start, step));
    offset += outputs[i].shape[*axis];
  }
  setOutputs(node, results);
  return llvm::Error::success();
}

llvm::Error OnnxImporter::importConcat(const onnx::NodeProto &node) {
  SmallVector<Value> inputs;
  for (int i = 0; i < node.input_size(); ++i)
    // Empty inputs contribute nothing and only complicate the kernels.
    if (numElements(inputInfo(node, i)->shape) > 0)
      inputs.push_back(input(node, i));
  int64_t rank = outputs[0].shape.size();
  int64_t axis = *normalizeAxis(getIntAttribute(node, "axis", 0), rank);
  if (inputs.size() == 1) {
    setOutputs(node, inputs.front());
    return llvm::Error::success();
  }
  setOutputs(node, builder
                       .create<nn::ConcatOp>(loc(node), outputType(0), inputs,
                                             builder.getI64IntegerAttr(axis))
                       ->getResults());
  return llvm::Error::success();
}

llvm::Error OnnxImporter::importGather(const onnx::NodeProto &node) {
  const ValueInfo *data = inputInfo(node, 0);
  int64_t rank = data->shape.size();
  int64_t axis = *normalizeAxis(getIntAttribute(node, "axis", 0), rank);
  const ValueInfo *indices = inputInfo(node, 1);
  Value dataValue = input(node, 0);
  Value indexValue;
  if (indices->value) {
    // Known indices: make them non-negative here so the runtime need not.
    HostTensor normalized = *indices->value;
    for (int64_t &index : normalized.ints)
      if (index < 0)
        index += data->shape[axis];
    normalized.type = ElementType::I64;
    indexValue = materializeConstant(normalized, loc(node));
  } else {
    indexValue = input(node, 1);
  }
  setOutputs(node, builder
                       .create<nn::GatherOp>(loc(node), outputType(0),
                                             dataValue, indexValue,
                                             builder.getI64IntegerAttr(axis))
                       ->getResults());
  return llvm::Error::success();
}

/// ReduceMean/Sum/Max: axes from the attribute (older opsets) or input 1.
template <typename OpT>
llvm::Error OnnxImporter::importReduce(const onnx::NodeProto &node) {
  int64_t rank = inputInfo(node, 0)->shape.size();
  std::vector<int64_t> axes;
  if (std::optional<std::vector<int64_t>> given =
          getIntsAttribute(node, "axes"))
    axes = *given;
  else if (const ValueInfo *info = inputInfo(node, 1); info && info->value)
    for (int64_t i = 0; i < info->value->numElements(); ++i)
      axes.push_back(info->value->getInt(i));
  if (axes.empty() && !getIntAttribute(node, "noop_with_empty_axes", 0))
    for (int64_t d = 0; d < rank; ++d)
      axes.push_back(d);
  for (int64_t &axis : axes)
    axis = *normalizeAxis(axis, rank);
  llvm::sort(axes);
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.empty()) {
    setOutputs(node, input(node, 0));
    return llvm::Error::success();
  }
  setOutputs(node,
             builder
                 .create<OpT>(loc(node), outputType(0), input(node, 0),
                              builder.getDenseI64ArrayAttr(axes),
                              builder.getBoolAttr(
                                  getIntAttribute(node, "keepdims", 1) != 0))
                 ->getResults());
  return llvm::Error::success();
}

llvm::Error OnnxImporter::importSoftmax(const onnx::NodeProto &node) {
  int64_t rank = outputs[0].shape.size();
  int64_t axis = getIntAttribute(node, "axis", opset >= 13 ? -1 : 1);
  int64_t normalized = *normalizeAxis(axis, rank);
  // Before opset 13 Softmax flattens [axis, rank) into one dimension; that
  // equals a softmax over one dimension only when it is the last.
  if (opset < 13 && normalized != rank - 1)
    return nodeError(node, "axis " + llvm::Twine(axis) + " at opset " +
                               llvm::Twine(opset) +
                               " (coerced to 2-D) is supported only for the "
                               "last dimension");
  setOutputs(
      node, builder
                .create<nn::SoftmaxOp>(loc(node), outputType(0), input(node, 0),
                                       builder.getI64IntegerAttr(normalized))
                ->getResults());
  return llvm::Error::success();
}

llvm::Error OnnxImporter::importLayerNorm(const onnx::NodeProto &node) {
  for (int i = 1; i < node.output_size(); ++i)
    if (!node.output(i).empty())
      return nodeError(node, "the Mean and InvStdDev outputs are not "
                             "supported; only the normalised output is");
  int64_t rank = outputs[0].shape.size();
  int64_t axis = *normalizeAxis(getIntAttribute(node, "axis", -1), rank);
  Value data = input(node, 0);
  // ONNX lets scale and bias broadcast to the normalised dimensions;
  // nn.layer_norm takes them at exactly that shape.
  ArrayRef<int64_t> shape = outputs[0].shape;
  auto normalizedType = RankedTensorType::get(shape.drop_front(axis),
                                              elementType(outputs[0].type));
  auto expanded = [&](Value parameter) -> Value {
    if (!parameter || parameter.getType() == normalizedType)
      return parameter;
    return builder.create<nn::ExpandOp>(loc(node), normalizedType, parameter);
  };
  Value scale = expanded(input(node, 1));
  Value bias = expanded(input(node, 2));
  Value result = builder.create<nn::LayerNormOp>(
      loc(node), outputType(0), data, scale, bias,
      builder.getI64IntegerAttr(axis),
      builder.getF32FloatAttr(
          static_cast<float>(getFloatAttribute(node, "epsilon", 1e-5f))));
  setOutputs(node, result);
  return llvm::Error::success();
}

Value OnnxImporter::boolConstant(bool value, Location location) {
  return materializeConstant(
      HostTensor::fromInts(ElementType::Bool, {}, {value ? 1 : 0}), location);
}

/// LessOrEqual / GreaterOrEqual as where(strict, true, equal): nn has the
/// strict comparisons and equality only, and negating the opposite strict
/// comparison would make a NaN operand compare true.
llvm::Error OnnxImporter::importOrEqual(const onnx::NodeProto &node) {
  Location location = loc(node);
  Value lhs = input(node, 0);
  Value rhs = input(node, 1);
  RankedTensorType type = outputType(0);
  Value strict =
      node.op_type() == "LessOrEqual"
          ? builder.create<nn::LessOp>(location, type, lhs, rhs).getResult()
          : builder.create<nn::GreaterOp>(location, type, lhs, rhs).getResult();
  Value equal = builder.create<nn::EqualOp>(location, type, lhs, rhs);
  setOutputs(node, builder
                       .create<nn::WhereOp>(location, type, strict,
                                            boolConstant(true, location), equal)
                       ->getResults());
  return llvm::Error::success();
}

/// Not, And, Or, Xor on i1 tensors as selects (nn has no logical ops; a
/// select broadcasts as they do): not x = x ? false : true, x and y =
/// x ? y : false, x or y = x ? true : y, x xor y = x ? not y : y.
llvm::Error OnnxImporter::importLogical(const onnx::NodeProto &node) {
  Location location = loc(node);
  RankedTensorType type = outputType(0);
  auto select = [&](Value condition, Value onTrue, Value onFalse) -> Value {
    return builder.create<nn::WhereOp>(location, type, condition, onTrue,
                                       onFalse);
  };
  const std::string &op = node.op_type();
  Value x = input(node, 0);
  if (op == "Not") {
    setOutputs(node, select(x, boolConstant(false, location),
                            boolConstant(true, location)));
    return llvm::Error::success();
  }
  Value y = input(node, 1);
  Value result;
  if (op == "And") {
    result = select(x, y, boolConstant(false, location));
  } else if (op == "Or") {
    result = select(x, boolConstant(true, location), y);
  } else {
    auto yType = llvm::cast<RankedTensorType>(y.getType());
    Value notY = builder.create<nn::WhereOp>(location, yType, y,
                                             boolConstant(false, location),
                                             boolConstant(true, location));
    result = select(x, notY, y);
  }
  setOutputs(node, result);
  return llvm::Error::success();
}

/// ScatterND with compile-time indices (inference refuses run-time ones and
/// has checked them). One that writes every element in order (Llama's
/// padding mask written into its causal mask's [:, :, :, :T], T the mask's
/// width) is its updates, reshaped. Any other becomes, on the flattened
/// tensors, where(written, gather(updates, source), data), with `written`
/// and `source` constants of one element per data element (so bounded in
/// size); a scatter that writes every element is the gather alone.
llvm::Error OnnxImporter::importScatterND(const onnx::NodeProto &node) {
  const ValueInfo &dataInfo = *inputInfo(node, 0);
  const HostTensor &indicesValue = *inputInfo(node, 1)->value;
  const ValueInfo &updatesInfo = *inputInfo(node, 2);
  Location location = loc(node);
  if (isInOrderScatterND(dataInfo.shape, indicesValue)) {
    setOutputs(
        node,
        builder.create<nn::ReshapeOp>(location, outputType(0), input(node, 2))
            ->getResults());
    return llvm::Error::success();
  }
  int64_t count = numElements(dataInfo.shape);
  if (count > kMaxFoldedElements)
    return nodeError(node, "data " + formatShape(dataInfo.shape) + " has " +
                               llvm::Twine(count) +
                               " elements; a scatter that does not write "
                               "every element in order is supported up to " +
                               llvm::Twine(kMaxFoldedElements));
  std::vector<int64_t> picked =
      scatterNDSourceMap(dataInfo.shape, indicesValue);
  std::vector<int64_t> written(count);
  for (int64_t i = 0; i < count; ++i) {
    written[i] = picked[i] >= 0;
    picked[i] = std::max<int64_t>(picked[i], 0);
  }
  bool writesAll = llvm::all_of(written, [](int64_t w) { return w != 0; });
  Type element = elementType(dataInfo.type);
  auto flatType = RankedTensorType::get({count}, element);
  // Operands in order, as every handler reads them (hoisting follows use).
  Value data = writesAll ? Value() : input(node, 0);
  Value updates = input(node, 2);
  Value flatUpdates = builder.create<nn::ReshapeOp>(
      location,
      RankedTensorType::get({numElements(updatesInfo.shape)}, element),
      updates);
  Value indices = materializeConstant(
      HostTensor::fromInts(ElementType::I64, {count}, picked), location);
  Value result = builder.create<nn::GatherOp>(
      location, flatType, flatUpdates, indices, builder.getI64IntegerAttr(0));
  if (!writesAll) {
    Value mask = materializeConstant(
        HostTensor::fromInts(ElementType::Bool, {count}, written), location);
    Value flatData = builder.create<nn::ReshapeOp>(location, flatType, data);
    result =
        builder.create<nn::WhereOp>(location, flatType, mask, result, flatData);
  }
  setOutputs(node,
             builder.create<nn::ReshapeOp>(location, outputType(0), result)
                 ->getResults());
  return llvm::Error::success();
}

/// GatherND with compile-time indices (inference refuses run-time ones and
/// has checked them): the indexed leading dimensions of data flattened into
/// rows, a gather of the rows the index tuples pick, and the result shaped
/// as ONNX says. torch's exporter writes one for the causal mask it builds
/// from Range and Expand over the input's shape.
llvm::Error OnnxImporter::importGatherND(const onnx::NodeProto &node) {
  const ValueInfo &dataInfo = *inputInfo(node, 0);
  const HostTensor &indices = *inputInfo(node, 1)->value;
  int64_t batchDims = getIntAttribute(node, "batch_dims", 0);
  std::vector<int64_t> rows;
  if (llvm::Error error =
          gatherNDRows(dataInfo.shape, indices, batchDims, rows))
    return nodeError(node, llvm::toString(std::move(error)));
  int64_t leading = batchDims + indices.shape.back();
  int64_t rowCount = 1, inner = 1;
  for (int64_t d = 0; d < int64_t(dataInfo.shape.size()); ++d)
    (d < leading ? rowCount : inner) *= dataInfo.shape[d];
  Location location = loc(node);
  Type element = elementType(dataInfo.type);
  Value data = builder.create<nn::ReshapeOp>(
      location, RankedTensorType::get({rowCount, inner}, element),
      input(node, 0));
  int64_t picked = rows.size();
  Value rowIndices = materializeConstant(
      HostTensor::fromInts(ElementType::I64, {picked}, rows), location);
  Value gathered = builder.create<nn::GatherOp>(
      location, RankedTensorType::get({picked, inner}, element), data,
      rowIndices, builder.getI64IntegerAttr(0));
  setOutputs(node,
             builder.create<nn::ReshapeOp>(location, outputType(0), gathered)
                 ->getResults());
  return llvm::Error::success();
}

/// IsNaN on run-time data as x != x, i.e. where(x == x, false, true): NaN
/// is the one value unequal to itself. torch's SDPA export writes
/// where(isnan(softmax(s)), 0, softmax(s)) into every attention, for rows
/// whose every key is masked.
llvm::Error OnnxImporter::importIsNaN(const onnx::NodeProto &node) {
  Location location = loc(node);
  Value x = input(node, 0);
  RankedTensorType type = outputType(0);
  Value equal = builder.create<nn::EqualOp>(location, type, x, x);
  setOutputs(node, builder
                       .create<nn::WhereOp>(location, type, equal,
                                            boolConstant(false, location),
                                            boolConstant(true, location))
                       ->getResults());
  return llvm::Error::success();
}

/// Gelu (opset 20) is nn.gelu, the op zplan-form-nn-ops forms from the
/// primitive chains older opsets export; the approximate attribute carries
/// over ("none": erf, "tanh": GPT-2's gelu_new; inference checked it).
llvm::Error OnnxImporter::importGelu(const onnx::NodeProto &node) {
  const onnx::AttributeProto *approximate = findAttribute(node, "approximate");
  setOutputs(node, builder
                       .create<nn::GeluOp>(
                           loc(node), outputType(0), input(node, 0),
                           builder.getStringAttr(approximate ? approximate->s()
                                                             : "none"))
                       ->getResults());
  return llvm::Error::success();
}

const llvm::StringMap<OnnxImporter::Handler> &OnnxImporter::handlerTable() {
  static const llvm::StringMap<Handler> table = {
      {"Identity", &OnnxImporter::importAlias},
      {"Dropout", &OnnxImporter::importAlias},
      {"Neg", &OnnxImporter::importUnary<nn::NegOp>},
      {"Abs", &OnnxImporter::importUnary<nn::AbsOp>},
      {"Sqrt", &OnnxImporter::importUnary<nn::SqrtOp>},
      {"Reciprocal", &OnnxImporter::importUnary<nn::ReciprocalOp>},
      {"Exp", &OnnxImporter::importUnary<nn::ExpOp>},
      {"Log", &OnnxImporter::importUnary<nn::LogOp>},
      {"Erf", &OnnxImporter::importUnary<nn::ErfOp>},
      {"Tanh", &OnnxImporter::importUnary<nn::TanhOp>},
      {"Sigmoid", &OnnxImporter::importUnary<nn::SigmoidOp>},
      {"Relu", &OnnxImporter::importUnary<nn::ReluOp>},
      {"Cos", &OnnxImporter::importUnary<nn::CosOp>},
      {"Sin", &OnnxImporter::importUnary<nn::SinOp>},
      {"Add", &OnnxImporter::importBinary<nn::AddOp>},
      {"Sub", &OnnxImporter::importBinary<nn::SubOp>},
      {"Mul", &OnnxImporter::importBinary<nn::MulOp>},
      {"Div", &OnnxImporter::importBinary<nn::DivOp>},
      {"Pow", &OnnxImporter::importBinary<nn::PowOp>},
      {"Equal", &OnnxImporter::importBinary<nn::EqualOp>},
      {"Less", &OnnxImporter::importBinary<nn::LessOp>},
      {"Greater", &OnnxImporter::importBinary<nn::GreaterOp>},
      {"LessOrEqual", &OnnxImporter::importOrEqual},
      {"GreaterOrEqual", &OnnxImporter::importOrEqual},
      {"Not", &OnnxImporter::importLogical},
      {"And", &OnnxImporter::importLogical},
      {"Or", &OnnxImporter::importLogical},
      {"Xor", &OnnxImporter::importLogical},
      {"Max", &OnnxImporter::importVariadic},
      {"Min", &OnnxImporter::importVariadic},
      {"Sum", &OnnxImporter::importVariadic},
      {"Cast", &OnnxImporter::importCast},
      {"CastLike", &OnnxImporter::importCast},
      {"Where", &OnnxImporter::importWhere},
      {"MatMul", &OnnxImporter::importMatMul},
      {"Gemm", &OnnxImporter::importGemm},
      {"Transpose", &OnnxImporter::importTranspose},
      {"Reshape", &OnnxImporter::importReshape},
      {"Flatten", &OnnxImporter::importReshape},
      {"Squeeze", &OnnxImporter::importReshape},
      {"Unsqueeze", &OnnxImporter::importReshape},
      {"Expand", &OnnxImporter::importExpand},
      {"Slice", &OnnxImporter::importSlice},
      {"Split", &OnnxImporter::importSplit},
      {"Concat", &OnnxImporter::importConcat},
      {"Gather", &OnnxImporter::importGather},
      {"ScatterND", &OnnxImporter::importScatterND},
      {"GatherND", &OnnxImporter::importGatherND},
      {"IsNaN", &OnnxImporter::importIsNaN},
      {"Gelu", &OnnxImporter::importGelu},
      {"ReduceMean", &OnnxImporter::importReduce<nn::ReduceMeanOp>},
      {"ReduceSum", &OnnxImporter::importReduce<nn::ReduceSumOp>},
      {"ReduceMax", &OnnxImporter::importReduce<nn::ReduceMaxOp>},
      {"Softmax", &OnnxImporter::importSoftmax},
      {"LayerNormalization", &OnnxImporter::importLayerNorm},
  };
  return table;
}

//===----------------------------------------------------------------------===//
// Reading the file
//===----------------------------------------------------------------------===//

/// Reads the model, telling apart a missing file, a text-format syntax error
/// and bytes that are not an ONNX model.
llvm::Error readModel(StringRef path, onnx::ModelProto &model) {
  llvm::Expected<uint64_t> size = regularFileSize(path);
  if (!size)
    return makeError("cannot read '" + path +
                     "': " + llvm::toString(size.takeError()));
  // Protobuf reads at most 2 GiB; a bigger file is not read at all.
  if (*size > static_cast<uint64_t>(std::numeric_limits<int32_t>::max()))
    return makeError("'" + path + "' is " + llvm::Twine(*size) +
                     " bytes; an ONNX protobuf holds at most 2 GiB (larger "
                     "models keep their weights in external data)");
  // Read exactly the size stat gave, never until some end that may not come.
  auto buffer = llvm::MemoryBuffer::getFileSlice(path, *size, /*Offset=*/0);
  if (!buffer)
    return makeError("cannot read '" + path +
                     "': " + buffer.getError().message());
  StringRef bytes = (*buffer)->getBuffer();
  if (path.ends_with(".onnxtxt") || path.ends_with(".textproto")) {
    google::protobuf::TextFormat::Parser parser;
    TextErrorCollector errors;
    parser.RecordErrorsTo(&errors);
    google::protobuf::io::ArrayInputStream stream(bytes.data(), bytes.size());
    if (!parser.Parse(&stream, &model))
      return makeError("'" + path +
                       "' is not a valid ONNX text model: " + errors.text);
  } else {
    google::protobuf::io::ArrayInputStream stream(bytes.data(), bytes.size());
    if (!model.ParseFromZeroCopyStream(&stream))
      return makeError("'" + path +
                       "' is not an ONNX model (protobuf "
                       "parsing failed: truncated or not a ModelProto)");
  }
  // Random bytes can parse as a protobuf; a model has these for sure.
  if (!model.has_graph() || model.opset_import_size() == 0 ||
      model.ir_version() <= 0)
    return makeError("'" + path +
                     "' is not an ONNX model (no graph, opset "
                     "import or IR version)");
  return llvm::Error::success();
}

} // namespace

llvm::Expected<OwningOpRef<ModuleOp>>
zplan::importOnnxModel(MLIRContext &context, StringRef path,
                       const ImportOptions &options) {
  context.loadDialect<nn::NNDialect, zero::ZeroDialect, func::FuncDialect>();
  onnx::ModelProto model;
  if (llvm::Error error = readModel(path, model))
    return std::move(error);
  return importOnnxModel(context, model, path, options);
}

llvm::Expected<OwningOpRef<ModuleOp>>
zplan::importOnnxModel(MLIRContext &context, const onnx::ModelProto &model,
                       StringRef path, const ImportOptions &options) {
  context.loadDialect<nn::NNDialect, zero::ZeroDialect, func::FuncDialect>();
  if (std::optional<std::string> where = findBf16(model)) {
    if (!options.parameters.mastersFromBf16)
      return makeError("the model is a bfloat16 export (" + *where +
                       "); compile it with --param-dtype bf16, which makes "
                       "f32 master weights from its weights, or export it "
                       "in float32");
    onnx::ModelProto widened = model;
    if (llvm::Error error = widenBf16(
            widened, llvm::sys::path::parent_path(path), options.readWeights))
      return std::move(error);
    OnnxImporter importer(context, widened, path, options);
    return importer.import();
  }
  OnnxImporter importer(context, model, path, options);
  return importer.import();
}

std::vector<SupportedOpType> zplan::supportedOpTypes() {
  std::vector<SupportedOpType> types;
  for (const std::string &op : knownOps())
    types.push_back({op, OnnxImporter::hasHandler(op)});
  return types;
}

llvm::Error zplan::parseInputShape(StringRef text, ImportOptions &options) {
  auto [name, dims] = text.split('=');
  if (name.empty() || !text.contains('='))
    return makeError("malformed --input-shape '" + text +
                     "': expected NAME=D0xD1x... (e.g. input_ids=2x16)");
  std::vector<int64_t> shape;
  if (!dims.empty()) {
    SmallVector<StringRef> parts;
    dims.split(parts, 'x');
    for (StringRef part : parts) {
      int64_t dim = 0;
      // getAsInteger refuses values beyond int64; "-3" parses and is refused
      // here.
      if (part.getAsInteger(10, dim) || dim <= 0)
        return makeError("malformed --input-shape '" + text + "': '" + part +
                         "' is not a positive integer dimension");
      shape.push_back(dim);
    }
  }
  if (!checkedNumElements(shape))
    return makeError("--input-shape '" + text +
                     "' has more than 2^63-1 elements");
  if (!options.inputShapes.emplace(name.str(), shape).second)
    return makeError("--input-shape gives '" + name + "' twice");
  return llvm::Error::success();
}

llvm::Error zplan::readOnnxModel(StringRef path, onnx::ModelProto &model) {
  return readModel(path, model);
}

llvm::Error zplan::readInitializerBytes(const onnx::TensorProto &tensor,
                                        StringRef modelDir,
                                        std::string &bytes) {
  if (tensor.data_location() == onnx::TensorProto::EXTERNAL) {
    std::string file;
    int64_t offset = 0, length = 0;
    return readExternalBytes(tensor, modelDir, bytes, file, offset, length);
  }
  if (!tensor.raw_data().empty()) {
    bytes = tensor.raw_data();
    return llvm::Error::success();
  }
  // Typed fields: decode, then write the element type's own encoding.
  HostTensor value;
  if (llvm::Error error = decodeTensor(tensor, value))
    return makeError("initializer '" + tensor.name() +
                     "': " + llvm::toString(std::move(error)));
  bytes.clear();
  for (int64_t i = 0; i < value.numElements(); ++i) {
    if (value.type == ElementType::F32) {
      float element = static_cast<float>(value.getDouble(i));
      bytes.append(reinterpret_cast<const char *>(&element), sizeof(element));
    } else if (value.type == ElementType::F64) {
      double element = value.getDouble(i);
      bytes.append(reinterpret_cast<const char *>(&element), sizeof(element));
    } else {
      return makeError("initializer '" + tensor.name() + "': typed " +
                       llvm::Twine(elementTypeInfo(value.type).name) +
                       " data is not supported for parameters; store it as "
                       "raw_data");
    }
  }
  return llvm::Error::success();
}
