//===- GenerateImport.h - the two imports of zcc --mode generate ----------===//
//
// A generation module holds @prefill and @decode, one model imported twice at
// two sets of static shapes (docs/generation.md sections 0 and 3), with the
// parameters declared once, and the empty @generate_begin / @generate_end the
// schedule fills with the resident set's gathers and releases.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_GENERATE_GENERATEIMPORT_H
#define ZPLAN_COMPILER_GENERATE_GENERATEIMPORT_H

#include "compiler/import/OnnxImporter.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace zplan {

/// The static shapes of a generation: B sequences, prompts of at most P
/// tokens, at most L tokens in all (the KV cache length).
struct GenerateShape {
  int64_t batch = 1;
  int64_t promptLength = 0;
  int64_t maxSeqLength = 0;
};

/// The two kinds of causal-LM export --mode generate accepts.
enum class ExportKind {
  /// input `input_ids` [batch, seq] only; output `logits`.
  Plain,
  /// also `attention_mask`, `position_ids` and `past_key_values.N.key|value`
  /// inputs, `present.N.key|value` outputs (torch / optimum naming).
  Cache,
};

/// Tells the kind of `model` from its graph inputs; an input that belongs to
/// neither kind is an error naming it.
llvm::Expected<ExportKind> detectExportKind(const onnx::ModelProto &model);

/// The import shapes of one program: prefill feeds P tokens (a cache export
/// with L - P past slots); decode feeds one token after L - 1 past slots,
/// except a plain export's decode, imported at L tokens so that every
/// position table is complete (zplan-decode-positions cuts it to one). A
/// past_key_values.* input must declare its heads and head size.
llvm::Expected<ImportOptions> importOptionsFor(const onnx::ModelProto &model,
                                               ExportKind kind,
                                               const GenerateShape &shape,
                                               bool decode);

/// Imports the model at `path` twice and merges the imports into one module
/// with @generate_begin, @prefill, @decode and @generate_end (in that order)
/// and each parameter declared once, tied and frozen as `base` says (as the
/// training import of the same flags is; its input shapes are ignored, the
/// programs' own are set here). `kind` receives the export's kind.
llvm::Expected<mlir::OwningOpRef<mlir::ModuleOp>>
importGenerateModule(mlir::MLIRContext &context, llvm::StringRef path,
                     const GenerateShape &shape, const ImportOptions &base,
                     ExportKind &kind);

} // namespace zplan

#endif // ZPLAN_COMPILER_GENERATE_GENERATEIMPORT_H
