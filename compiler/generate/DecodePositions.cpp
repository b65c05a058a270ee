//===- DecodePositions.cpp - the zplan-decode-positions pass ----------===//
//
// Placeholder: the pass is declared in Passes.td; its implementation lands
// with issue 9 (generation). Until then it refuses to run.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

namespace zplan {
#define GEN_PASS_DEF_DECODEPOSITIONS
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;

namespace {
struct DecodePositionsPass : zplan::impl::DecodePositionsBase<DecodePositionsPass> {
  void runOnOperation() override {
    getOperation().emitError("zplan-decode-positions is not implemented yet");
    signalPassFailure();
  }
};
} // namespace
