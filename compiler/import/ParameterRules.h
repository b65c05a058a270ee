//===- ParameterRules.h - which initializers train, and as what -----------===//
//
// A floating-point initializer with more than one element is a parameter
// candidate. Before the importer declares any nn.parameter, two questions
// are answered for the candidates, each by a rule and by zcc's flags:
//
//   - Ties. torch's exporters write a tied weight twice: constant folding
//     stores a tied LM head as a second initializer holding W^T (e.g.
//     `onnx::MatMul_592` beside `transformer.wte.weight`). B is a copy of A
//     when both are candidates of one element type and B equals A element
//     for element, bit for bit, either directly (same shape) or transposed
//     (2-D, reversed shape), and A holds at least two distinct values (a
//     norm gain of ones, a zero bias or a zero-initialized adapter never
//     ties: Hugging Face keeps those apart). Of a set of equal candidates
//     the one kept as the parameter is the first with a module-style name
//     (not starting with `onnx::`), else the first in initializer order.
//     `--tie COPY=PARAM` forces a tie, `--untie NAME` keeps NAME separate.
//   - Freezing. torch.onnx.export(dynamo=True) keeps buffers (rotary
//     inv_freq) as initializers and folds them, with constants, into new
//     initializers (cos/sin tables, attention masks); Hugging Face never
//     trains those. Its markers (ONNX IR 10 metadata_props) say which is
//     which: an initializer whose value info has
//     `pkg.torch.export.graph_signature.InputSpec.kind` other than PARAMETER
//     is a buffer, and one with `pkg.onnxscript.optimizer.folded_from` is a
//     parameter only when one of the values it was folded from is (the
//     graph's `pkg.torch.export.ExportedProgram.graph_signature` lists the
//     PARAMETER targets). Buffers are frozen. `--freeze GLOB` freezes,
//     `--train GLOB` trains what the buffer rule would freeze.
//
// Sampling keeps the comparison cheap: candidates are bucketed by element
// type and element count, a few elements at fixed coordinates are read
// from each (external data included), and only pairs whose samples agree
// are read whole and compared byte for byte.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_IMPORT_PARAMETERRULES_H
#define ZPLAN_COMPILER_IMPORT_PARAMETERRULES_H

#include "runtime/support/ElementType.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace onnx {
class ModelProto;
class TensorProto;
} // namespace onnx

namespace zplan {

/// What zcc's --tie, --untie, --freeze and --train say (docs/training.md,
/// section 3).
struct ParameterOptions {
  /// --tie COPY=PARAM: COPY is no parameter; it reads PARAM.
  std::vector<std::pair<std::string, std::string>> ties;
  /// --untie NAME: NAME stays a parameter of its own however equal it is.
  std::vector<std::string> untie;
  /// --freeze GLOB / --train GLOB, over initializer names.
  std::vector<std::string> freeze;
  std::vector<std::string> train;
  /// --param-dtype bf16: a bfloat16 export is read as float, its weights
  /// becoming f32 master parameters (compiler/import/WidenBf16.h);
  /// otherwise such a model is refused.
  bool mastersFromBf16 = false;
};

/// Parses one --tie value, `COPY=PARAM`, into `options`: both names
/// non-empty and different, and no COPY given twice.
llvm::Error parseTie(llvm::StringRef text, ParameterOptions &options);

/// One parameter candidate, in initializer order.
struct ParameterCandidate {
  const onnx::TensorProto *tensor = nullptr;
  ElementType type = ElementType::F32;
  std::vector<int64_t> shape;
};

/// One copy of a parameter, for the nn.parameter's `tied_copies`.
struct TiedCopyDecision {
  std::string name;
  bool transposed = false;
  /// False when --tie forced a tie between tensors whose values differ.
  bool equal = true;
  /// Why they are tied, for the report ("equal transposed, bit for bit").
  std::string reason;
};

/// What becomes of one candidate.
struct ParameterDecision {
  /// Set for a copy: the candidate whose nn.parameter it reads.
  std::optional<size_t> copyOf;
  /// The copy holds that parameter transposed.
  bool transposed = false;
  /// A parameter's copies.
  std::vector<TiedCopyDecision> copies;
  /// Set for a frozen parameter: why (for the report).
  std::optional<std::string> frozen;
  /// Set for a parameter --untie kept apart from an equal one: what it
  /// equals.
  std::optional<std::string> untied;
};

/// Decides ties and freezing for `candidates` of `model` (initializer data
/// read relative to `modelDir`; with `readExternal` false no external data
/// is read, so no tie is found from external values); `decisions` is
/// parallel to `candidates`.
/// A flag naming an initializer that is not a candidate, a --tie whose
/// shapes or element types differ, a glob matching nothing, or a name both
/// --freeze and --train match is an error naming it.
llvm::Error decideParameters(const onnx::ModelProto &model,
                             llvm::StringRef modelDir,
                             llvm::ArrayRef<ParameterCandidate> candidates,
                             const ParameterOptions &options, bool readExternal,
                             std::vector<ParameterDecision> &decisions);

} // namespace zplan

#endif // ZPLAN_COMPILER_IMPORT_PARAMETERRULES_H
