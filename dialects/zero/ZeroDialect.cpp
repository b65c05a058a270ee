//===- ZeroDialect.cpp - zero dialect registration ------------------------===//
//
// Registers the zero types and ops.
//
//===----------------------------------------------------------------------===//

#include "dialects/zero/ZeroDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace zplan::zero;

#include "dialects/zero/ZeroDialect.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "dialects/zero/ZeroTypes.cpp.inc"

void ZeroDialect::initialize() {
  addTypes<
#define GET_TYPEDEF_LIST
#include "dialects/zero/ZeroTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "dialects/zero/ZeroOps.cpp.inc"
      >();
}
