//===- zcc-opt.cpp - mlir-opt over the zplan dialects and passes ----------===//
//
// The driver lit tests use: parses nn/zero IR, runs passes by flag, prints.
//
//===----------------------------------------------------------------------===//

#include "compiler/Registration.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  zplan::registerAllDialects(registry);
  zplan::registerAllPasses();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "zplan optimizer driver\n", registry));
}
