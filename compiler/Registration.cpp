//===- Registration.cpp - dialects and passes every zplan tool knows ------===//

#include "compiler/Registration.h"

#include "compiler/Pipeline.h"
#include "compiler/transforms/Passes.h"
#include "dialects/nn/NNDialect.h"
#include "dialects/zero/ZeroDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Transforms/Passes.h"

void zplan::registerAllDialects(mlir::DialectRegistry &registry) {
  registry.insert<nn::NNDialect, zero::ZeroDialect, mlir::func::FuncDialect>();
}

void zplan::registerAllPasses() {
  registerZplanPasses();
  mlir::registerCanonicalizerPass();
  mlir::registerCSEPass();
  registerPipelines();
}
