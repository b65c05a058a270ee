//===- FormNNOps.cpp - the zplan-form-nn-ops pass -------------------------===//
//
// Runs the normalisation, activation and linear pattern sets together with
// folding until nothing changes. See Passes.td for the before/after IR;
// tests: test/transforms/form-nn-ops.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"

#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

#define DEBUG_TYPE "zplan-form-nn-ops"

namespace zplan {
#define GEN_PASS_DEF_FORMNNOPS
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

struct FormNNOpsPass : zplan::impl::FormNNOpsBase<FormNNOpsPass> {
  using FormNNOpsBase::FormNNOpsBase;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateNormalizationPatterns(patterns);
    populateActivationPatterns(patterns);
    populateLinearPatterns(patterns);
    populateAttentionPatterns(patterns, dropNanGuards);
    if (failed(
            applyPatternsAndFoldGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
