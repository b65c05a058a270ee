//===- CachePositions.h - position_ids for a cache export without them ----===//
//
// Some KV-cache exports (optimum's Gemma) have no `position_ids` input: the
// model derives its positions as Hugging Face does when none are passed,
// `cache_position = arange(past, past + seq)` and `position_ids =
// cache_position.unsqueeze(0)`. With static shapes that range folds to one
// constant, the past length zcc imports at, which is wrong for every token a
// static KV cache places at run time. derivePositionIds finds the range
// (a Range whose start is read from the shape of a past_key_values.* input,
// unsqueezed at axis 0) and makes its result a graph input `position_ids`
// [batch, seq], the positions zrun feeds, as Hugging Face's generate()
// passes them. Tests: test/real (gemma/optimum/generate, tokens against
// HF generate()), test/generate/export-kind.test (no range to replace).
//
//===----------------------------------------------------------------------===//

#ifndef ZPLAN_COMPILER_GENERATE_CACHEPOSITIONS_H
#define ZPLAN_COMPILER_GENERATE_CACHEPOSITIONS_H

#include "llvm/Support/Error.h"

#include <string>

namespace onnx {
class ModelProto;
} // namespace onnx

namespace zplan {

/// Rewrites `model` in memory as described above; `derivedFrom` receives the
/// name of the node whose output became `position_ids`. An error when no
/// such range exists (the export must then pass position_ids).
llvm::Error derivePositionIds(onnx::ModelProto &model,
                              std::string &derivedFrom);

} // namespace zplan

#endif // ZPLAN_COMPILER_GENERATE_CACHEPOSITIONS_H
