//===- DecodeLockstep.cpp - the zplan-decode-lockstep pass ----------------===//
//
// Each rank generates its own rows and would decode until they finish; a
// collective in @decode would then wait for a rank that already stopped.
// This pass decides how the decode loops stay in lockstep (Passes.td has
// the rule; docs/generation.md section 8):
//
//   @decode without a collective        -> no attribute: each rank stops
//                                          when its own rows finish
//   @decode with a gather (streamed)    -> func.func @decode(...)
//                                            attributes {zplan.lockstep_period
//                                            = K}
//
// with K from the cost model: the ranks all-reduce their running rows every
// K decode steps. Tests: test/transforms/decode-lockstep.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/analysis/CostModel.h"
#include "compiler/analysis/GenerationCost.h"
#include "compiler/analysis/Lockstep.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/Programs.h"
#include "compiler/transforms/StartHoisting.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/zero/ZeroDialect.h"

#include "llvm/Support/Debug.h"

#include <algorithm>
#include <cmath>

#define DEBUG_TYPE "zplan-decode-lockstep"

namespace zplan {
#define GEN_PASS_DEF_DECODELOCKSTEP
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

/// The most tokens a row can generate: the cache's slots L minus prefill's
/// tokens P (a row of a one-token prompt has L - 1; P bounds what is sure).
int64_t maxNewTokensOf(ModuleOp module, func::FuncOp prefill) {
  int64_t slots = 0;
  for (auto cache : module.getOps<nn::KvCacheOp>())
    if (auto type = llvm::dyn_cast<RankedTensorType>(cache.getType());
        type && type.getRank() == 4)
      slots = type.getDimSize(2);
  int64_t promptTokens = 1;
  if (prefill && prefill.getNumArguments() > 0)
    if (auto ids =
            llvm::dyn_cast<RankedTensorType>(prefill.getArgument(0).getType());
        ids && ids.getRank() == 2)
      promptTokens = ids.getDimSize(1);
  return std::max<int64_t>(slots - promptTokens, 1);
}

struct DecodeLockstepPass
    : zplan::impl::DecodeLockstepBase<DecodeLockstepPass> {
  using DecodeLockstepBase::DecodeLockstepBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto decode = module.lookupSymbol<func::FuncOp>(kDecodeName);
    if (!decode)
      return; // Not a generation module.
    decode->removeAttr(kLockstepPeriodAttrName);
    // One rank has no one to wait for; a decode without a collective
    // leaves no rank waiting.
    if (worldSizeOf(module) == 1 || !firstCollective(decode))
      return;
    FailureOr<CostModel> cost = hoistingCostModel(
        module, "zplan-decode-lockstep", hardware, hardwareProfile);
    if (failed(cost))
      return signalPassFailure();
    double agreement = agreementSeconds(*cost, worldSizeOf(module));
    double step = replayProgram(decode, *cost).seconds;
    int64_t maxTokens =
        maxNewTokensOf(module, module.lookupSymbol<func::FuncOp>(kPrefillName));
    int64_t period = chooseLockstepPeriod(agreement, step, maxTokens);
    LLVM_DEBUG(llvm::dbgs()
               << "agreement " << agreement << " s, decode step " << step
               << " s, M " << maxTokens << ": period " << period << "\n");
    decode->setAttr(
        kLockstepPeriodAttrName,
        IntegerAttr::get(IntegerType::get(&getContext(), 64), period));
  }
};

} // namespace
