//===- OptimizerStep.cpp - the zplan-optimizer-step pass ------------------===//
//
// Adds @optimizer_step to a training module (see Passes.td). It is a
// function like the others so that the verifier can prove what it touches
// (rule 9: shards only) and the emitter lowers it as it lowers any program.
// Tests: test/transforms/optimizer-step.mlir, shard-parameters-train.mlir.
//
//===----------------------------------------------------------------------===//

#include "compiler/transforms/Passes.h"
#include "compiler/transforms/Programs.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/zero/ZeroDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace zplan {
#define GEN_PASS_DEF_OPTIMIZERSTEP
#include "compiler/transforms/Passes.h.inc"
} // namespace zplan

using namespace mlir;
using namespace zplan;

namespace {

struct OptimizerStepPass : zplan::impl::OptimizerStepBase<OptimizerStepPass> {
  using OptimizerStepBase::OptimizerStepBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto train = module.lookupSymbol<func::FuncOp>(kTrainStepName);
    if (!train)
      return;
    if (optimizer != "adamw" && optimizer != "sgd") {
      module.emitError() << "zplan-optimizer-step: unknown optimizer '"
                         << optimizer << "' (expected adamw or sgd)";
      return signalPassFailure();
    }
    if (module.lookupSymbol(kOptimizerStepName)) {
      module.emitError() << "zplan-optimizer-step: the module already has @"
                         << kOptimizerStepName;
      return signalPassFailure();
    }
    if (module.getOps<zero::GroupOp>().empty()) {
      train.emitError() << "zplan-optimizer-step: no zero.group to update "
                           "(run zplan-shard-parameters first)";
      return signalPassFailure();
    }
    OpBuilder builder(module.getBodyRegion());
    builder.setInsertionPointAfter(train);
    auto hyperType = RankedTensorType::get({zero::kHyperParameterCount},
                                           builder.getF32Type());
    auto func =
        builder.create<func::FuncOp>(train.getLoc(), kOptimizerStepName,
                                     builder.getFunctionType({hyperType}, {}));
    func.setArgAttr(0, "nn.name", builder.getStringAttr("hyper"));
    Block *body = func.addEntryBlock();
    builder.setInsertionPointToStart(body);
    // A frozen group (frozen parameters: buffers, --freeze) is never
    // updated.
    for (auto group : module.getOps<zero::GroupOp>())
      if (!group.getFrozen())
        builder.create<zero::OptimizerUpdateOp>(
            NameLoc::get(builder.getStringAttr("@" + group.getSymName())),
            FlatSymbolRefAttr::get(group.getSymNameAttr()),
            body->getArgument(0), builder.getStringAttr(optimizer));
    builder.create<func::ReturnOp>(train.getLoc());
  }
};

} // namespace
