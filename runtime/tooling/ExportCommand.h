//===- ExportCommand.h - zrun PLAN export: the trained model as ONNX ------===//
//
// ZeRO-3 users gather the full model for evaluation; `export` does it from
// a checkpoint, in one process and without MPI:
//
//   zrun PLAN export --checkpoint DIR -o MODEL.onnx [--model ORIGINAL.onnx]
//
// It reads every rank's checkpoint file (CheckpointReader: the manifest
// must name this plan and its world size, every region must match its
// checksum), puts each parameter back together from the ranks' shards
// (Group.weights_offset in each rank's "shards" region, rank r holding
// elements [r*S, (r+1)*S) of the group's flat buffer) or from rank 0's
// "persistent" region (every rank holds the same copy; a rank whose copy's
// checksum differs is a warning, and rank 0's is written), and writes the
// ORIGINAL ONNX graph (the file zcc compiled, Plan.model beside the plan unless
// --model names it) with those weights in place of the parameters'
// initializers. Every other initializer is kept as it was; external data of the
// original is read (relative to the original model, as zcc's importer reads
// it).
//
// The exported model holds every weight inline when it serializes to less
// than 2 GiB (protobuf's limit); otherwise, or with --external-data, each
// initializer of at least 1 KiB goes to MODEL.onnx.data beside it (ONNX
// external data: location, offset, length). Both files are staged and renamed
// into place together (Files.h), never onto the plan, its weights, the original
// model or its data, or a checkpoint file.
//
// The model is refused, naming the parameter, when an initializer a
// parameter of the plan needs is missing or has another shape or type; a
// BFLOAT16 initializer of an f32 parameter (a bf16 export compiled with
// --param-dtype bf16: compiler/import/WidenBf16.h) is written back rounded
// to bf16 (round to nearest even), so the exported graph is the original's.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_RUNTIME_TOOLING_EXPORTCOMMAND_H
#define ZPLAN_RUNTIME_TOOLING_EXPORTCOMMAND_H

#include "runtime/support/Status.h"
#include "runtime/tooling/Arguments.h"

#include <cstdint>
#include <string>
#include <vector>

namespace zplan::tooling {

struct ExportOptions {
  std::string planPath;
  /// A checkpoint root (its `latest` is followed) or one step directory.
  std::string checkpointPath;
  std::string outputPath;
  /// The original model; empty: Plan.model in the plan's directory.
  std::string modelPath;
  /// The largest serialized model written as one file; above it the
  /// weights go to external data. Protobuf cannot parse 2 GiB or more.
  uint64_t inlineLimit = (1ull << 31) - 1;
  /// External data at any size (--external-data).
  bool externalData = false;
  /// --dtype bf16: every trained weight (and tied copy) rounded to bf16
  /// (round to nearest even), stored as a BFLOAT16 initializer named
  /// NAME/bf16 and read through a Cast to FLOAT named NAME, so the graph is
  /// unchanged: half the bytes, the values a bf16 plan computes with.
  bool bf16 = false;
};

/// What exportModel() wrote.
struct ExportResult {
  /// The checkpoint's step directory and step.
  std::string checkpointDirectory;
  uint64_t step = 0;
  std::string modelPath;
  /// The external data file, empty when every weight is inline.
  std::string dataPath;
  uint64_t parameters = 0;
  uint64_t parameterBytes = 0;
  /// --dtype bf16: the initializers stored as bf16.
  uint64_t bf16Weights = 0;
  /// Initializers written as a parameter's tied copy (counted in
  /// parameterBytes too).
  uint64_t tiedCopies = 0;
  /// Things the user should know; the model is written regardless.
  std::vector<std::string> warnings;
};

/// Writes the model; on failure writes nothing.
Status exportModel(const ExportOptions &options, ExportResult &result);

/// `zrun PLAN export` in this process; prints what it wrote or one error
/// line, and returns the exit status.
int exportPlan(const Arguments &arguments);

} // namespace zplan::tooling

#endif // ZPLAN_RUNTIME_TOOLING_EXPORTCOMMAND_H
