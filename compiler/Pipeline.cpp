//===- Pipeline.cpp - the pass pipelines zcc runs -------------------------===//

#include "compiler/Pipeline.h"

#include "compiler/transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

void zplan::buildImportPipeline(mlir::OpPassManager &pm) {
  mlir::OpPassManager &func = pm.nest<mlir::func::FuncOp>();
  // Canonicalise first so the patterns see folded constants and reshapes.
  func.addPass(mlir::createCanonicalizerPass());
  func.addPass(mlir::createCSEPass());
  func.addPass(createFormNNOps());
  func.addPass(mlir::createCanonicalizerPass());
  func.addPass(mlir::createCSEPass());
}

void zplan::registerPipelines() {
  mlir::PassPipelineRegistration<>(
      "zplan-import-pipeline",
      "What zcc runs after import: form nn ops, fold, CSE",
      [](mlir::OpPassManager &pm) { buildImportPipeline(pm); });
}
