//===- LogprobsProgram.cpp - the zplan-logprobs-program pass --------------===//
//
// @logprobs is @forward with its results replaced by the per-token
// log-probs of its own input_ids and the entropies (Passes.td). The ops the
// new results do not need (other outputs) are erased; the schedule then
// shards and gathers @logprobs like any program. It is built before
// scheduling, as @train_micro_step is, so the two share the parameters'
// groups and gathers are inserted for it by the same passes.
//
//===----------------------------------------------------------------------===//

#include "compiler/autodiff/Loss.h"
#include "compiler/transforms/Passes.h"
#include "compiler/transforms/Programs.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace zplan {
#define GEN_PASS_DEF_LOGPROBSPROGRAM
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;
using namespace zplan::autodiff;

namespace {

struct LogprobsProgramPass
    : zplan::impl::LogprobsProgramBase<LogprobsProgramPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>(kForwardName);
    if (!forward) {
      module.emitError("zplan-logprobs-program: the module has no @forward "
                       "function");
      return signalPassFailure();
    }
    if (module.lookupSymbol(kLogprobsName)) {
      module.emitError("zplan-logprobs-program: the module already has a @" +
                       kLogprobsName);
      return signalPassFailure();
    }
    auto logprobs = llvm::cast<func::FuncOp>(forward->clone());
    logprobs.setSymName(kLogprobsName);
    module.getBody()->getOperations().insertAfter(forward->getIterator(),
                                                  logprobs);
    if (failed(build(logprobs)))
      return signalPassFailure();
  }

  LogicalResult build(func::FuncOp func) {
    Block &body = func.front();
    auto forwardReturn = llvm::cast<func::ReturnOp>(body.getTerminator());
    OpBuilder builder(forwardReturn);
    FailureOr<Value> logits =
        findLogits(func, forwardReturn.getOperands(), "the log-probs program");
    if (failed(logits))
      return failure();
    Value inputIds = argumentNamed(func, "input_ids");
    auto logitsType = llvm::cast<RankedTensorType>(logits->getType());
    auto idsType =
        inputIds ? llvm::cast<RankedTensorType>(inputIds.getType()) : nullptr;
    if (!idsType || idsType.getShape() != logitsType.getShape().drop_back() ||
        !llvm::isa<IntegerType>(idsType.getElementType()))
      return func.emitError(
          "the log-probs program needs an integer input named 'input_ids' "
          "of the logits' batch and sequence: the tokens it scores");
    Location loc = NameLoc::get(builder.getStringAttr("logprobs"));
    Value logp = buildAlignedLogprobs(builder, loc, *logits, inputIds);
    Value entropy = buildAlignedEntropy(builder, loc, *logits);
    builder.create<func::ReturnOp>(forwardReturn.getLoc(),
                                   ValueRange{logp, entropy});
    forwardReturn.erase();
    func.setType(builder.getFunctionType(body.getArgumentTypes(),
                                         {logp.getType(), entropy.getType()}));
    auto named = [&](StringRef name) {
      return builder.getDictionaryAttr(
          builder.getNamedAttr("nn.name", builder.getStringAttr(name)));
    };
    func.setAllResultAttrs(
        ArrayRef<DictionaryAttr>{named("logprobs"), named("entropy")});
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isOpTriviallyDead(&op))
        op.erase();
    return success();
  }
};

} // namespace
