//===- OnnxImporter.h - ONNX model -> nn dialect --------------------------===//
//
// Reads an ONNX model (binary protobuf, or protobuf text format for tests),
// specialises it to static shapes, folds every computation known at compile
// time, and builds a module with:
//   - one `nn.parameter` per parameter initializer (data left where it is),
//     except tied copies, which read the parameter they copy, and with the
//     frozen ones marked (ParameterRules.h),
//   - `func.func @forward` whose arguments are the graph inputs and whose
//     body reads each parameter through `zero.shard` + `zero.gather_start` +
//     `zero.gather_wait` (the unscheduled form: everything gathered up front,
//     nothing released; the schedule passes place gathers and releases),
//   - nn ops for the rest.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_IMPORT_ONNXIMPORTER_H
#define ZPLAN_COMPILER_IMPORT_ONNXIMPORTER_H

#include "compiler/import/ParameterRules.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
class TensorProto;
} // namespace onnx

namespace zplan {

/// A floating-point initializer with more elements than this is a trainable
/// parameter; smaller ones (scalars, epsilon, scales) are constants.
inline constexpr int64_t kMaxConstantInitializerElements = 1;

struct ImportOptions {
  /// Static shapes for graph inputs with dynamic dimensions, by input name
  /// (from `--input-shape NAME=2x16`). A dimension symbol (ONNX dim_param,
  /// e.g. 'batch') bound by one of these binds that symbol in every input
  /// not listed here; bindings of one symbol must agree.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Ties and freezing beyond the rules (--tie, --untie, --freeze, --train).
  ParameterOptions parameters;
  /// Whether parameters' external data is looked at (zcc --no-weights: it
  /// is not; the file may be absent). A parameter's bytes are never read by
  /// the import itself, only checked and sampled for ties: without them, no
  /// tie is found from external values (only from the graph, inline data
  /// and --tie). Constants (shape tables, masks) are always read, wherever
  /// they are.
  bool readWeights = true;
};

/// Imports the ONNX model at `path`. Files ending in `.onnxtxt` or
/// `.textproto` are read as protobuf text format, anything else as binary.
/// External data is resolved relative to the model's directory. On failure
/// the error says what is wrong with which node, input or initializer.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxModel(mlir::MLIRContext &context, llvm::StringRef path,
                const ImportOptions &options);
/// The same for a model already read (and perhaps rewritten in memory);
/// `path` locates its external data.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importOnnxModel(mlir::MLIRContext &context, const onnx::ModelProto &model,
                llvm::StringRef path, const ImportOptions &options);

/// Reads an ONNX model file (binary, or protobuf text format for `.onnxtxt`
/// and `.textproto`). Tells apart a missing file, a syntax error and bytes
/// that are not an ONNX model. Only a regular file is read (never a device
/// or FIFO), and never more than the size stat gives it.
llvm::Error readOnnxModel(llvm::StringRef path, onnx::ModelProto &model);

/// Reads the little-endian bytes of an initializer, wherever they are:
/// raw_data, the typed data fields, or ONNX external data relative to
/// `modelDir`.
llvm::Error readInitializerBytes(const onnx::TensorProto &tensor,
                                 llvm::StringRef modelDir, std::string &bytes);

/// Parses one `--input-shape` value, `NAME=D0xD1x...` (e.g.
/// `input_ids=2x16`; `NAME=` alone is a scalar), into `options`. A repeated
/// name, an empty name, a dimension that is not a positive integer (or does
/// not fit int64), or dimensions whose product overflows int64 is an error.
llvm::Error parseInputShape(llvm::StringRef text, ImportOptions &options);

/// One ONNX op type (default domain) the importer takes: `runtime` when a
/// handler imports it on run-time data, otherwise it is folded only when its
/// inputs are compile-time constants (`zcc --list-ops`).
struct SupportedOpType {
  std::string name;
  bool runtime = false;
};

/// Every op type the importer knows, sorted by name: the same tables its
/// "not supported" errors list.
std::vector<SupportedOpType> supportedOpTypes();

} // namespace zplan

#endif // ZPLAN_COMPILER_IMPORT_ONNXIMPORTER_H
