//===- WeightsWriter.h - the weights file beside a plan -------------------===//
//
// Lays the model's parameters out as the plan's groups say and writes, for
// each rank in turn, that rank's shard of every sharded group: rank r's
// section is one contiguous range, so a rank reads exactly its 1/N and never
// the whole model. Persistent groups follow, whole, once. Parameters are
// read from the ONNX model (inline or external data) one group at a time.
// The file starts with the header runtime/plan/Weights.h describes: the
// identity of the plan it belongs to and the checksum of every section.
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_PLAN_WEIGHTSWRITER_H
#define ZPLAN_COMPILER_PLAN_WEIGHTSWRITER_H

#include "runtime/plan/plan.pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>

namespace zplan {

/// Writes the weights of `plan` (taken from the ONNX model at `modelPath`) to
/// `outputPath`, recording `planIdentity` (from plan::serializePlan() of the
/// plan written beside it). The caller renames it into place.
llvm::Error writeWeights(const plan::Plan &plan, uint64_t planIdentity,
                         llvm::StringRef modelPath, llvm::StringRef outputPath);

} // namespace zplan

#endif // ZPLAN_COMPILER_PLAN_WEIGHTSWRITER_H
