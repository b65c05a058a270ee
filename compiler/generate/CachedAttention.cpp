//===- CachedAttention.cpp - the zplan-cached-attention pass ----------===//
//
// Placeholder: the pass is declared in Passes.td; its implementation lands
// with issue 9 (generation). Until then it refuses to run.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

namespace zplan {
#define GEN_PASS_DEF_CACHEDATTENTION
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;

namespace {
struct CachedAttentionPass : zplan::impl::CachedAttentionBase<CachedAttentionPass> {
  void runOnOperation() override {
    getOperation().emitError("zplan-cached-attention is not implemented yet");
    signalPassFailure();
  }
};
} // namespace
